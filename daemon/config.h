/* config.h - the daemon's configuration: defaults, file, flags.
 *
 * Precedence: embedded defaults < config file (--config PATH) < flags.
 * The file is "key = value" lines ('#' comments), with the same keys as the
 * long flags without "--" (e.g. "listen = 127.0.0.1:50051").
 */
#ifndef RD_CONFIG_H
#define RD_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

typedef enum { RD_LOG_DEBUG = 0, RD_LOG_INFO, RD_LOG_WARN, RD_LOG_ERROR } rd_log_level_t;

/* The replay kernel build inside an xclbin (backends/fpga/kernels/rmm.h):
 * the xclbin does not record it, so the operator states it with the path
 * (`fpga-xclbin-shape = K,N,BATCH[,MIN_TABLE]`). k = RMM_K, n =
 * RMM_CAPACITY, batch = RMM_MAX_BATCH; min_table is the smallest table its
 * leaf bound serves: RMM_MAX_LEAF = (2^63 - 1) / min_table, as
 * csim_rmm_shape.c raises it. min_table = n is rmm.h's default bound, the
 * one kernels/build_xclbin.sh builds (it serves tables of exactly n items). */
typedef struct {
  uint32_t k, n, batch, min_table;
} rd_fpga_xclbin_shape_t;

/* The build's RMM_MAX_LEAF: (2^63 - 1) / min_table. */
uint64_t rd_fpga_xclbin_max_leaf(const rd_fpga_xclbin_shape_t *s);

typedef struct {
  char listen[256];           /* host:port; default 127.0.0.1:50051 */
  char state_dir[PATH_MAX];   /* $STATE_DIRECTORY, else $XDG_STATE_HOME/replayd,
                                 else $HOME/.local/state/replayd */
  char log_file[PATH_MAX];    /* empty = stderr; reopened on SIGHUP */
  rd_log_level_t log_level;   /* default info */
  uint32_t threads;           /* completion-queue threads; default 2 */
  uint32_t ingest_threads;    /* threads applying inserts, niced (server.c); default 2 */
  uint32_t learner_shares;    /* 1: learners' steps take turns by weight (share.h), strict;
                                2: work-conserving; 0: off; default 1 */
  uint32_t remap;             /* 1: re-map the live set on every register/delete (remapper.h);
                                 default 1 */
  uint32_t remap_threshold_pct; /* a re-mapping moves placed workloads only if the set's
                                   predicted GPS gains more than this (percent); default 10 */
  uint32_t shutdown_grace_ms; /* SIGTERM: in-flight calls may finish this long; default 10 s */
  uint32_t max_message_bytes; /* per gRPC message, both ways; default 64 MiB */
  uint32_t max_batch;         /* rows per insert/sample/update call; default 65536 */
  uint32_t max_capacity;      /* items per workload; default 2^24 */
  uint64_t max_memory_bytes;  /* rows + trees + learners of all workloads; default 8 GiB */
  uint32_t max_workloads;     /* default 64 */
  uint32_t learner_threads;   /* OpenMP threads per hosted learner step; default 1 */
  uint32_t max_waiting_calls; /* calls waiting for a rate limiter, all workloads; default 4096 */
  uint32_t max_waiting_per_workload; /* ... per workload; default 1024 */
  char fpga_parts_dir[PATH_MAX]; /* FPGA part files for the model; empty = the installed ones */
  char fpga_csim[64];         /* a part name ("u250"): list one FPGA run as C-simulation (no
                                 board), modelled as that part; empty (default) = none */
  char fpga_xclbin[PATH_MAX]; /* an xclbin with rmm_kernel and lrn_train_step that XRT boards
                                 run (placement.h); empty (default) = none. A build without
                                 XRT refuses a non-empty one at start (main.c) */
  rd_fpga_xclbin_shape_t fpga_xclbin_shape; /* its replay kernel's build; default rmm.h's
                                               16,65536,1024 */
  /* Durability (core/durable.h). */
  char durability[16];            /* a spec's default: none, checkpoint (default) or journal */
  char checkpoint_dir[PATH_MAX];  /* empty (default) = <state-dir>/checkpoints */
  uint32_t checkpoint_interval_s; /* a spec's default period; 0 = none; default 600 */
  uint32_t checkpoint_keep;       /* checkpoints kept per workload; default 2 */
  uint32_t checkpoint_zstd;       /* zstd level of checkpoints; 0 (default) = uncompressed */
  uint32_t journal_commit_us;     /* the journal's group-commit window; default 200 */
  uint32_t journal_direct;        /* 1 (default): O_DIRECT where the file system allows it */
  uint64_t journal_max_pending;   /* journal bytes waiting for the disk before inserts are
                                     refused; default 256 MiB */
  uint64_t import_max_bytes;      /* an ImportStream's file at most; default 16 GiB */
  /* Operations (docs/architecture.md "Operations"). */
  char metrics_listen[256];   /* Prometheus /metrics over HTTP: "" (default) = off; "PORT"
                                 or ":PORT" = 127.0.0.1:PORT; "HOST:PORT" as given */
  char tls_cert[PATH_MAX];    /* PEM certificate chain: gRPC over TLS; "" = plaintext */
  char tls_key[PATH_MAX];     /* its PEM private key (with tls_cert) */
  char tls_client_ca[PATH_MAX]; /* PEM CAs: clients must present a certificate one of
                                   them signed; "" = no client certificates asked */
} rd_config_t;

/* Fill c with the embedded defaults (reads the environment for state_dir). */
void rd_config_defaults(rd_config_t *c);

/* Apply a config file. RD_EINVAL with "PATH:LINE: ..." on a bad line. */
int rd_config_load_file(rd_config_t *c, const char *path, rd_error_t *err);

/* Apply argv (flags "--key value" or "--key=value", plus --config PATH which
 * is applied first wherever it appears). *show_help / *show_version are set
 * for --help / --version. RD_EINVAL on an unknown flag or bad value. */
int rd_config_parse_args(rd_config_t *c, int argc, char **argv, int *show_help,
                         int *show_version, rd_error_t *err);

/* The --help text. */
const char *rd_config_usage(void);

#endif
