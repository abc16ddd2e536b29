/* place_history.h - where a workload ran and why: the placement events
 * `replayctl describe` shows (workload_move.h records them). */
#ifndef RD_PLACE_HISTORY_H
#define RD_PLACE_HISTORY_H

#include <stdint.h>

#include "mapper.h"

#define RD_PLACE_HISTORY_MAX 16 /* events kept per workload: the newest */
#define RD_PLACE_REASON_MAX 200

/* One placement decision about a workload. */
typedef struct {
  int64_t unix_ms;
  int moved;                         /* 1: it moved from -> to; 0: placed or kept */
  char from[RD_MAPPING_CODE_MAX];    /* "" for its first placement */
  char to[RD_MAPPING_CODE_MAX];
  double gps_from, gps_to;           /* its predicted GPS under the set's sharing, before/after */
  double total_from, total_to;       /* the set's predicted total GPS, kept vs proposed */
  char reason[RD_PLACE_REASON_MAX];  /* "registered", "re-mapped after delete of X", ... */
} rd_place_event_t;

typedef struct {
  rd_place_event_t ev[RD_PLACE_HISTORY_MAX]; /* a ring: the oldest at (next - n) */
  uint32_t n, next;
  uint64_t total; /* events ever recorded */
} rd_place_history_t;

#endif
