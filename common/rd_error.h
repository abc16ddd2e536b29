/* rd_error.h - error codes and messages shared by every replayd library.
 *
 * Convention (after libuv): functions return 0 on success or a negative
 * RD_E* code. Functions that can fail on user input also take an optional
 * rd_error_t* that receives a sentence a person can act on. A function that
 * returns an error has changed nothing.
 */
#ifndef RD_ERROR_H
#define RD_ERROR_H

#include <stddef.h>

#define RD_ERROR_MSG_MAX 256

typedef enum {
  RD_OK = 0,
  RD_EINVAL = -1,    /* malformed argument: NaN, wrong size, bad schema */
  RD_ERANGE = -2,    /* value outside what the structure can represent */
  RD_ENOMEM = -3,    /* allocation failed */
  RD_EEMPTY = -4,    /* operation needs data the table does not have */
  RD_ETOOBIG = -5,   /* batch larger than the table or the configured limit */
  RD_ENOTFOUND = -6, /* key never issued by this table */
  RD_ESTORE = -7,    /* the persistent store (SQLite, state files) failed */
  RD_EBUSY = -8,     /* a conflicting operation is running (one TrainStep at a time) */
  RD_ETIMEDOUT = -9, /* a deadline passed before the operation finished */
  RD_ECANCELED = -10, /* stopped: the object is shutting down */
  RD_EINTERNAL = -11, /* a system resource failed (thread creation, ...) */
  RD_ESTATE = -12,    /* the object's state or configuration does not allow the call */
} rd_err_t;

typedef struct {
  int code;
  char msg[RD_ERROR_MSG_MAX];
} rd_error_t;

/* Name of a code, e.g. "RD_EINVAL". Never NULL. */
const char *rd_err_name(int code);

/* Record code and a printf-style message in err (if err is not NULL) and
 * return code, so callers can write `return rd_error_set(err, RD_EINVAL, ...)`. */
int rd_error_set(rd_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reset err to RD_OK with an empty message (err may be NULL). */
void rd_error_clear(rd_error_t *err);

#endif
