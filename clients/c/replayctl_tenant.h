/* replayctl_tenant.h - `replayctl tenant ls | add | set | rm` (admin token).
 * Internal to replayctl. */
#ifndef RDC_REPLAYCTL_TENANT_H
#define RDC_REPLAYCTL_TENANT_H

#include "replayctl_cli.h"
#include "replayd_client.h"

/* o->args: the subcommand, the name, the quota operands (checked by
 * rctl_parse_args). Returns an RCTL_EXIT_* code. */
int rctl_cmd_tenant(rdc_client_t *c, const rctl_opts_t *o, const char *admin_token);

#endif
