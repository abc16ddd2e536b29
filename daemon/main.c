/* main.c - replayd: configuration, start-up, the libuv loop, shutdown.
 *
 * The libuv loop owns the process: signals (SIGTERM/SIGINT stop, SIGHUP
 * reopens the log), a periodic timer for the status line, and readiness
 * (sd_notify). gRPC calls are served by the server's own completion-queue
 * threads (server.c); the loop never touches a call.
 *
 * Shutdown: stop accepting, let in-flight calls finish (up to
 * shutdown-grace-ms, 10 s by default), cancel the rest, then free
 * everything and exit 0.
 */
#include <grpc/grpc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "devices.h"
#include "durable.h"
#include "handlers.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "placement.h"
#include "placer.h"
#include "provider_fpga.h"
#include "registry.h"
#include "remapper.h"
#include "rpc_stats.h"
#include "secrets.h"
#include "server.h"
#include "spec_pb.h"
#include "store.h"
#include "rd_clock.h"

#ifndef RD_VERSION
#define RD_VERSION "0.0.0"
#endif

#define STATUS_PERIOD_MS 60000

static struct {
  rd_server_t *server;
  rd_registry_t *registry;
  const char *address;
  int signal_seen;
} app;

static void on_stop_signal(uv_signal_t *h, int signum) {
  app.signal_seen = signum;
  rd_log_info("main", "%s received: draining calls and stopping",
              signum == SIGTERM ? "SIGTERM" : "SIGINT");
  uv_stop(h->loop);
}

static void on_hup(uv_signal_t *h, int signum) {
  (void)h;
  (void)signum;
  if (rd_log_reopen() == 0) rd_log_info("main", "SIGHUP: log reopened");
}

static void on_status_timer(uv_timer_t *t) {
  (void)t;
  char status[160];
  snprintf(status, sizeof status, "STATUS=serving %zu workloads on %s",
           rd_registry_count(app.registry), app.address);
  sd_notify(0, status);
  rd_log_debug("main", "%s, %llu calls so far", status + 7,
               (unsigned long long)rd_server_calls_started(app.server));
}

static int render_metrics(void *arg, FILE *f) { return rd_metrics_render(arg, f); }

/* With --metrics-listen: count RPCs (before the server serves one) ... */
static void metrics_count_rpcs(void) {
  static const char *names[RD_M_COUNT];
  for (int m = 0; m < RD_M_COUNT; m++) {
    const char *path = rd_method_path((rd_method_t)m);
    const char *slash = strrchr(path, '/');
    names[m] = slash ? slash + 1 : path;
  }
  rd_rpc_stats_enable(names, RD_M_COUNT);
}

/* ... and serve them (after it started: its load is among them). */
static int metrics_serve(const rd_config_t *cfg, const rd_handler_ctx_t *ctx,
                         rd_metrics_http_t **out, rd_error_t *err) {
  static rd_metrics_source_t src;
  src = (rd_metrics_source_t){app.registry, rd_server_metrics, app.server, ctx->start_unix,
                              RD_VERSION};
  char bound[300];
  int rc = rd_metrics_http_start(cfg->metrics_listen, render_metrics, &src, out, bound,
                                 sizeof bound, err);
  if (rc == RD_OK) rd_log_info("main", "metrics on http://%s/metrics", bound);
  return rc;
}

/* "host:port" with the port replaced by the one actually bound. */
static void bound_address(const char *listen, int port, char *out, size_t len) {
  const char *colon = strrchr(listen, ':');
  int host_len = colon ? (int)(colon - listen) : (int)strlen(listen);
  snprintf(out, len, "%.*s:%d", host_len, listen, port);
}

int main(int argc, char **argv) {
  rd_config_t cfg;
  rd_error_t err;
  int show_help = 0, show_version = 0;
  rd_error_clear(&err);
  rd_config_defaults(&cfg);
  if (rd_config_parse_args(&cfg, argc, argv, &show_help, &show_version, &err) != RD_OK) {
    fprintf(stderr, "replayd: %s\n(see replayd --help)\n", err.msg);
    return 2;
  }
  if (show_help) {
    fputs(rd_config_usage(), stdout);
    return 0;
  }
  if (show_version) {
    printf("replayd %s\n", RD_VERSION);
    return 0;
  }
  if (rd_log_open(cfg.log_file, cfg.log_level, &err) != RD_OK) {
    fprintf(stderr, "replayd: %s\n", err.msg);
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  rd_log_info("main", "replayd %s starting (state %s)", RD_VERSION, cfg.state_dir);

  rd_store_t *store = NULL;
  if (rd_store_open(&store, cfg.state_dir, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    return 1;
  }
  static rd_handler_ctx_t ctx;
  /* The token stays in its file (replayctl reads it there); the daemon
   * keeps only its hash. */
  char admin_token[RD_WORKLOAD_TOKEN_LEN + 1];
  int admin_rc = rd_store_admin_token(cfg.state_dir, admin_token, sizeof admin_token, &err);
  if (admin_rc == RD_OK) {
    rd_token_hash(admin_token, strlen(admin_token), ctx.admin_token_hash);
    ctx.has_admin_token = 1;
  }
  rd_secret_wipe(admin_token, sizeof admin_token);
  if (admin_rc != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_store_close(store);
    return 1;
  }
  if (rd_registry_create(&app.registry, &cfg, store, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_store_close(store);
    return 1;
  }
  rd_devices_init();
  const char *parts_dirs[2];
  if (rd_fpga_provider_parts_dirs(cfg.fpga_parts_dir, parts_dirs) == 2)
    rd_log_info("main", "run from the build directory: FPGA parts from %s, then %s",
                parts_dirs[0], parts_dirs[1]);
  /* The C-simulation FPGA (devices.h) before any placement, restored
   * workloads' included. A part that is not there stops the start. */
  if (cfg.fpga_csim[0] != '\0' &&
      rd_fpga_provider_add_csim(cfg.fpga_csim, cfg.fpga_parts_dir[0] ? cfg.fpga_parts_dir : NULL,
                                &err) != RD_OK) {
    rd_log_error("main", "fpga-csim = %s: %s", cfg.fpga_csim, err.msg);
    rd_registry_destroy(app.registry);
    rd_store_close(store);
    return 2;
  }
  /* The XRT kernels (fpga-xclbin) before any placement too: a build
   * without XRT, or a path that is not an xclbin, stops the start. */
  if (rd_fpga_provider_setup_xrt(&cfg, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_registry_destroy(app.registry);
    rd_store_close(store);
    return 2;
  }
  /* Checkpoints and journals (durable.h): before the restore, which reads
   * them. A bad setting or a directory that cannot be made stops the start. */
  static rd_durable_t *durable;
  if (rd_durable_create(&durable, &cfg, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_registry_destroy(app.registry);
    rd_store_close(store);
    return err.code == RD_EINVAL ? 2 : 1;
  }
  rd_registry_set_durable(app.registry, durable);
  ctx.registry = app.registry;
  ctx.store = store;
  ctx.durable = durable;
  ctx.config = &cfg;
  /* Restored workloads get their placement back from stored profiles
   * (nothing is measured at start). */
  static rd_placer_t placer;
  placer = (rd_placer_t){app.registry, store, &cfg};
  rd_registry_set_restore_placer(app.registry, rd_place_restored, &placer);
  /* Logs each workload and the count; a store it cannot read stops the
   * start. The stored specs are the wire's WorkloadSpec (spec_pb.h). */
  rd_spec_decoder_t decoder = rd_spec_pb_decoder(&cfg);
  if (rd_registry_restore(app.registry, &decoder, NULL, &err) != RD_OK ||
      rd_durable_start(durable, app.registry, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_registry_destroy(app.registry);
    rd_durable_destroy(durable);
    rd_store_close(store);
    return 1;
  }

  grpc_init();
  ctx.start_time = rd_clock_now();
  ctx.start_unix = (int64_t)time(NULL);

  if (cfg.metrics_listen[0] != '\0') metrics_count_rpcs();
  int port = 0;
  if (rd_server_start(&app.server, &cfg, &ctx, &port, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_registry_destroy(app.registry);
    rd_durable_destroy(durable);
    rd_store_close(store);
    grpc_shutdown();
    return 1;
  }
  char address[300];
  bound_address(cfg.listen, port, address, sizeof address);
  app.address = address;
  rd_metrics_http_t *metrics = NULL;
  if (cfg.metrics_listen[0] != '\0' && metrics_serve(&cfg, &ctx, &metrics, &err) != RD_OK) {
    rd_log_error("main", "%s", err.msg);
    rd_registry_stop_learners(app.registry);
    if (rd_server_stop(app.server, 0) == 0) {
      rd_registry_destroy(app.registry);
      rd_store_close(store);
      grpc_shutdown();
    }
    rd_log_close();
    return 1;
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t status_timer;
  uv_signal_init(&loop, &sig_term);
  uv_signal_init(&loop, &sig_int);
  uv_signal_init(&loop, &sig_hup);
  uv_signal_start(&sig_term, on_stop_signal, SIGTERM);
  uv_signal_start(&sig_int, on_stop_signal, SIGINT);
  uv_signal_start(&sig_hup, on_hup, SIGHUP);
  uv_timer_init(&loop, &status_timer);
  uv_timer_start(&status_timer, on_status_timer, STATUS_PERIOD_MS, STATUS_PERIOD_MS);

  /* Only now: whoever reads this line (a test, an operator's script) may
   * signal at once, and before uv_signal_start a SIGHUP or SIGTERM took the
   * default action and killed the daemon (seen under ASan in CI). */
  rd_log_info("main", "listening on %s with %u threads (+%u applying inserts)%s", address,
              cfg.threads, cfg.ingest_threads,
              !cfg.tls_cert[0] ? "" : cfg.tls_client_ca[0] ? ", TLS, client certificates required"
                                                           : ", TLS");
  char ready[400];
  snprintf(ready, sizeof ready, "READY=1\nSTATUS=listening on %s", address);
  sd_notify(0, ready);

  /* Every registration and deletion re-maps the hosted learners together
   * and moves them live (remapper.h). */
  rd_remapper_t *remapper = NULL;
  if (cfg.remap && rd_remapper_create(&remapper, app.registry, cfg.remap_threshold_pct / 100.0,
                                      &err) != RD_OK)
    rd_log_warn("main", "no re-mapping: %s", err.msg);
  if (remapper != NULL) rd_remapper_attach(remapper);

  uv_run(&loop, UV_RUN_DEFAULT);

  sd_notify(0, "STOPPING=1");
  rd_remapper_destroy(remapper); /* the move in progress ends first */
  rd_metrics_http_stop(metrics); /* it reads the registry and the server */
  /* Hosted learners first: a TrainStep in progress ends (UNAVAILABLE) at
   * its current step instead of holding the server's drain. */
  rd_registry_stop_learners(app.registry);
  int server_stopped = rd_server_stop(app.server, cfg.shutdown_grace_ms / 1000.0) == 0;
  /* The final checkpoint: every call is done (or cancelled) and every
   * learner stopped, so it holds everything that was acknowledged. */
  rd_durable_stop(durable);
  size_t ck_done = 0, ck_failed = 0;
  rd_durable_checkpoint_all(durable, app.registry, &ck_done, &ck_failed);
  if (ck_done + ck_failed > 0)
    rd_log_info("main", "final checkpoints: %zu written, %zu failed", ck_done, ck_failed);
  if (!server_stopped) {
    rd_log_close();
    _exit(0); /* calls were drained or cancelled; only gRPC's teardown hung */
  }
  uv_close((uv_handle_t *)&sig_term, NULL);
  uv_close((uv_handle_t *)&sig_int, NULL);
  uv_close((uv_handle_t *)&sig_hup, NULL);
  uv_close((uv_handle_t *)&status_timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);

  rd_registry_destroy(app.registry); /* workloads' journals close: what is appended is synced */
  rd_durable_destroy(durable);
  rd_store_close(store);
  grpc_shutdown();
  rd_log_info("main", "stopped");
  rd_log_close();
  return 0;
}
