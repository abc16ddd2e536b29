/* replayctl_top.h - `replayctl top`: a live view of a server's workloads.
 *
 * Every interval (default 1 s) it lists the server's workloads (ListWorkloads,
 * all pages) and its devices (ServerInfo) and redraws one frame: per
 * workload its rows and fill, insert and sample rates and, with a hosted
 * learner, gradient steps per second, loss and where its parts run; per
 * device its state and how many workloads' learners (L), replay modules (R)
 * and storage (S) run on its kind. Rates are differences of the server's
 * counters between two reads divided by the time between them.
 *
 * The frame fits the terminal's width and at least 80 columns' worth of it
 * (columns are fixed; longer names are cut), and as many workloads as the
 * height allows, the busiest first. Only ANSI sequences every terminal
 * emulator since the VT100 knows (clear, home; the alternate screen and
 * the cursor on entry and exit), so it works over SSH. Keys: q quits;
 * Ctrl-C, SIGTERM and SIGHUP quit as well; the terminal is restored in
 * every case. A server that stops answering shows as an error line and is
 * asked again at the next tick.
 *
 * --once: two reads one interval apart, one frame on stdout without
 * escape sequences, then exit (0, or 1 if the server failed): for scripts.
 * With --json that frame is one JSON document.
 */
#ifndef RDC_REPLAYCTL_TOP_H
#define RDC_REPLAYCTL_TOP_H

#include "replayctl_cli.h"
#include "replayd_client.h"

/* Run `top` on c as o says; returns the exit status. */
int rctl_top(rdc_client_t *c, const rctl_opts_t *o);

#endif
