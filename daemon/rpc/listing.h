/* listing.h - the pages of ListWorkloads, ServerInfo and ListProfiles.
 *
 * paging.h's rules: a page holds at most its page size and ends before its
 * packed size would pass --max-message-bytes (less RD_REPLY_HEADROOM); an
 * item that alone passes it is RESOURCE_EXHAUSTED naming it; a next page
 * token (the last key returned) when more may follow. ServerInfo lists the
 * first workloads by id and the devices that fit, flagging what it left
 * out: it never fails for size.
 */
#ifndef RD_LISTING_H
#define RD_LISTING_H

#include "handlers.h"
#include "profile.h"

/* A ListWorkloads page of up to page workloads whose id sorts after
 * `after` ("": from the first); with server_info, ServerInfo's reply.
 * owner: only that tenant's workloads (tenant.h; NULL: everyone's, the
 * admin's view), counted and listed. */
void rd_list_workloads(const rd_handler_ctx_t *ctx, const rd_tenant_t *owner, const char *after,
                       uint32_t page, int server_info, rd_reply_t *r);

/* A ListProfiles page of up to page profiles after key `after` (NULL: from
 * the first) in the profile store's order. */
void rd_list_profiles(const rd_handler_ctx_t *ctx, const rd_profile_t *after, uint32_t page,
                      rd_reply_t *r);

#endif
