/* listing.c - list pages within the message limit. */
#include "listing.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "messages.h"
#include "paging.h"
#include "rd_clock.h"

#ifndef RD_VERSION
#define RD_VERSION "0.0.0"
#endif

/* ---- Workloads ---- */

/* The workloads a page may show, referenced, and their messages. */
typedef struct {
  rd_workload_t **ws;
  rd_workload_msg_t *msgs;
  Replayd__V1__Workload **ptrs;
  size_t cap, k, built; /* slots, workloads referenced, messages built */
  size_t count;         /* registered when the page started */
} wl_page_t;

/* Room for the page and one more (is there a next page?), or for what is
 * registered now and one more: if that fills, the page says there may be
 * more, as workloads registered meanwhile could sort anywhere. */
static int wl_page_collect(const rd_handler_ctx_t *ctx, const rd_tenant_t *owner,
                           const char *after, uint32_t page, wl_page_t *p) {
  memset(p, 0, sizeof *p);
  p->count = rd_registry_count_owned(ctx->registry, owner);
  p->cap = (page < p->count ? page : p->count) + 1;
  p->ws = calloc(p->cap, sizeof *p->ws);
  p->msgs = calloc(p->cap, sizeof *p->msgs);
  p->ptrs = calloc(p->cap, sizeof *p->ptrs);
  if (p->ws == NULL || p->msgs == NULL || p->ptrs == NULL) return RD_ENOMEM;
  p->k = rd_registry_list_owned_after(ctx->registry, owner, after, p->ws, p->cap);
  return RD_OK;
}

static void wl_page_free(wl_page_t *p) {
  for (size_t i = 0; i < p->built; i++) rd_workload_msg_free(&p->msgs[i]);
  for (size_t i = 0; i < p->k; i++) rd_workload_unref(p->ws[i]);
  free(p->ws);
  free(p->msgs);
  free(p->ptrs);
}

/* ServerInfo's devices and its messages, which borrow the devices' strings. */
typedef struct {
  rd_device_t devs[RD_MAX_DEVICES];
  Replayd__V1__Device dm[RD_MAX_DEVICES], *dp[RD_MAX_DEVICES];
} devices_msg_t;

/* ServerInfo's own fields, sized with both flags set (their largest), and
 * the devices that fit; fill->used counts them. */
static void server_info_head(const rd_handler_ctx_t *ctx, size_t count, size_t k,
                             Replayd__V1__ServerInfoResponse *si, devices_msg_t *d,
                             rd_page_fill_t *fill) {
  rd_device_t *devs = d->devs;
  Replayd__V1__Device *dm = d->dm, **dp = d->dp;
  si->version = RD_VERSION;
  si->uptime_seconds = rd_clock_now() - ctx->start_time;
  si->workload_count = count > k ? count : k;
  si->workloads_truncated = 1;
  si->devices_truncated = 1;
  fill->used = replayd__v1__server_info_response__get_packed_size(si);
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES), taken = fill->items;
  for (size_t i = 0; i < nd; i++) {
    rd_device_msg(&dm[i], &devs[i]);
    dp[i] = &dm[i];
    if (rd_page_take(fill, rd_pb_field_bytes(replayd__v1__device__get_packed_size(&dm[i])), 0))
      break;
  }
  si->n_devices = fill->items - taken;
  si->devices = dp;
  si->devices_truncated = si->n_devices < nd;
  fill->items = taken; /* the page counts workloads */
}

/* Take workloads into the page while they fit; the number listed, or -1
 * with r failed (ListWorkloads only: an item alone over the limit). */
static ptrdiff_t wl_page_fill(const rd_handler_ctx_t *ctx, wl_page_t *p, uint32_t page,
                              rd_page_fill_t *fill, int server_info, rd_reply_t *r) {
  char token[RD_PAGE_TOKEN_MAX + 1];
  for (size_t i = 0; i < p->k && i < page; i++) {
    if (rd_workload_msg(&p->msgs[i], p->ws[i], NULL, NULL) != RD_OK) {
      rd_reply_error(r, RD_ENOMEM, "out of memory listing workload %s", p->ws[i]->id);
      return -1;
    }
    p->built = i + 1;
    p->ptrs[i] = &p->msgs[i].msg;
    size_t item = rd_pb_field_bytes(replayd__v1__workload__get_packed_size(&p->msgs[i].msg));
    /* A ListWorkloads page that ends here carries this item's token. */
    rd_page_token_workload(p->ws[i]->id, token);
    if (rd_page_take(fill, item, server_info ? 0 : rd_pb_field_bytes(strlen(token))) == RD_OK)
      continue;
    if (fill->items == 0 && !server_info) {
      rd_reply_error(r, RD_ETOOBIG, "workload %s alone takes %zu bytes of a ListWorkloads "
                     "reply, more than this server's message limit of %u bytes "
                     "(--max-message-bytes); DescribeWorkload shows it", p->ws[i]->id, item,
                     ctx->config->max_message_bytes);
      return -1;
    }
    break;
  }
  return (ptrdiff_t)fill->items;
}

void rd_list_workloads(const rd_handler_ctx_t *ctx, const rd_tenant_t *owner, const char *after,
                       uint32_t page, int server_info, rd_reply_t *r) {
  wl_page_t p;
  devices_msg_t devices;
  Replayd__V1__ServerInfoResponse si = REPLAYD__V1__SERVER_INFO_RESPONSE__INIT;
  si.max_message_bytes = ctx->config->max_message_bytes;
  rd_page_fill_t fill = {rd_page_budget(ctx->config->max_message_bytes), 0, 0};
  ptrdiff_t listed = -1;
  if (wl_page_collect(ctx, owner, after, page, &p) != RD_OK)
    rd_reply_error(r, RD_ENOMEM, "out of memory listing workloads");
  else {
    if (server_info) server_info_head(ctx, p.count, p.k, &si, &devices, &fill);
    listed = wl_page_fill(ctx, &p, page, &fill, server_info, r);
  }
  if (listed >= 0) {
    int more = (size_t)listed < p.k || p.k == p.cap;
    if (server_info) {
      si.n_workloads = (size_t)listed;
      si.workloads = p.ptrs;
      si.workloads_truncated = more || p.count > (size_t)listed;
      rd_reply_pack(r, &si.base);
    } else {
      char token[RD_PAGE_TOKEN_MAX + 1];
      Replayd__V1__ListWorkloadsResponse m = REPLAYD__V1__LIST_WORKLOADS_RESPONSE__INIT;
      m.n_workloads = (size_t)listed;
      m.workloads = p.ptrs;
      if (more) {
        rd_page_token_workload(p.ws[listed - 1]->id, token);
        m.next_page_token = token;
      }
      rd_reply_pack(r, &m.base);
    }
  }
  wl_page_free(&p);
}

/* ---- Profiles ---- */

/* Take profiles into the page while they fit; the number listed, or -1
 * with r failed. */
static ptrdiff_t profile_page_fill(const rd_handler_ctx_t *ctx, const rd_profile_t *rows,
                                   size_t nr, uint32_t page, Replayd__V1__Profile *pm,
                                   Replayd__V1__Profile **pp, rd_reply_t *r) {
  rd_page_fill_t fill = {rd_page_budget(ctx->config->max_message_bytes), 0, 0};
  char token[RD_PAGE_TOKEN_MAX + 1];
  rd_error_t err;
  rd_error_clear(&err);
  for (size_t i = 0; i < nr && i < page; i++) {
    const rd_profile_t *p = &rows[i];
    rd_profile_msg(&pm[i], p);
    pp[i] = &pm[i];
    /* The page may end here: count this item's token too. */
    if (rd_page_token_profile(p, token, &err) != RD_OK) {
      rd_reply_error(r, RD_EINTERNAL, "profile %s/%s: %s", p->device_fp,
                     rd_primitive_name(p->primitive), err.msg);
      return -1;
    }
    size_t item = rd_pb_field_bytes(replayd__v1__profile__get_packed_size(&pm[i]));
    if (rd_page_take(&fill, item, rd_pb_field_bytes(strlen(token))) == RD_OK) continue;
    if (fill.items == 0) {
      rd_reply_error(r, RD_ETOOBIG, "profile (%s, %s, %u threads, %s, batch %u) alone takes "
                     "%zu bytes of a ListProfiles reply, more than this server's message "
                     "limit of %u bytes (--max-message-bytes)", p->device_fp,
                     rd_primitive_name(p->primitive), p->threads, p->shape.network,
                     p->shape.batch, item, ctx->config->max_message_bytes);
      return -1;
    }
    break;
  }
  return (ptrdiff_t)fill.items;
}

void rd_list_profiles(const rd_handler_ctx_t *ctx, const rd_profile_t *after, uint32_t page,
                      rd_reply_t *r) {
  rd_profile_t *rows = NULL;
  size_t nr = 0;
  rd_error_t err;
  rd_error_clear(&err);
  /* One more than the page: is there a next one? */
  int rc = rd_store_list_profiles_after(ctx->store, after, (size_t)page + 1, &rows, &nr, &err);
  if (rc) {
    rd_reply_error(r, rc, "%s", err.msg);
    return;
  }
  Replayd__V1__Profile *pm = calloc(nr ? nr : 1, sizeof *pm);
  Replayd__V1__Profile **pp = calloc(nr ? nr : 1, sizeof *pp);
  char token[RD_PAGE_TOKEN_MAX + 1];
  ptrdiff_t listed = -1;
  if (pm == NULL || pp == NULL)
    rd_reply_error(r, RD_ENOMEM, "out of memory listing %zu profiles", nr);
  else
    listed = profile_page_fill(ctx, rows, nr, page, pm, pp, r);
  if (listed >= 0) {
    Replayd__V1__ListProfilesResponse m = REPLAYD__V1__LIST_PROFILES_RESPONSE__INIT;
    m.n_profiles = (size_t)listed;
    m.profiles = pp;
    if ((size_t)listed < nr && (rc = rd_page_token_profile(&rows[listed - 1], token, &err)))
      rd_reply_error(r, RD_EINTERNAL, "%s", err.msg);
    else {
      if ((size_t)listed < nr) m.next_page_token = token;
      rd_reply_pack(r, &m.base);
    }
  }
  free(pm);
  free(pp);
  rd_store_free_profiles(rows);
}
