/* replayctl_top.c - `replayctl top` (replayctl_top.h). */
#include "replayctl_top.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "json_writer.h"

#define MIN_WIDTH 80
#define NAME_MIN 12
#define NAME_MAX_W 40

/* ------------------------------------------------------------------ */
/* Reading the server                                                  */
/* ------------------------------------------------------------------ */

typedef struct {
  double t; /* CLOCK_MONOTONIC seconds of the read */
  rdc_server_info_t *info;
  rdc_workload_t *w;
  size_t n;
} sample_t;

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sample_free(sample_t *s) {
  rdc_server_info_free(s->info);
  rdc_list_free(s->w);
  memset(s, 0, sizeof *s);
}

static int sample_read(rdc_client_t *c, sample_t *s, rdc_error_t *e) {
  memset(s, 0, sizeof *s);
  int rc = rdc_server_info(c, &s->info, e);
  if (rc == RDC_OK) rc = rdc_list(c, &s->w, &s->n, e);
  s->t = mono_now();
  if (rc != RDC_OK) sample_free(s);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Figures of one workload                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  const rdc_workload_t *w;
  double fill;                     /* 0..1 */
  double ins, smp, upd, gps;       /* per second; NAN: not known yet */
  int learner;
  const char *running;             /* "C-C-C", or "-" */
} row_t;

static const rdc_workload_t *find(const sample_t *s, const char *id) {
  if (s == NULL) return NULL;
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->w[i].id, id) == 0) return &s->w[i];
  return NULL;
}

static double rate(uint64_t now, uint64_t before, double dt) {
  return now >= before && dt > 0 ? (double)(now - before) / dt : NAN;
}

static void make_row(row_t *r, const rdc_workload_t *w, const sample_t *prev, double dt) {
  memset(r, 0, sizeof *r);
  r->w = w;
  r->fill = w->spec.capacity ? (double)w->counters.size / w->spec.capacity : 0;
  r->learner = w->has_learner_counters;
  r->running = w->has_placement && w->placement.running[0] ? w->placement.running : "-";
  const rdc_workload_t *p = find(prev, w->id);
  r->ins = r->smp = r->upd = r->gps = NAN;
  if (p != NULL) {
    r->ins = rate(w->counters.inserts, p->counters.inserts, dt);
    r->smp = rate(w->counters.samples, p->counters.samples, dt);
    r->upd = rate(w->counters.updates, p->counters.updates, dt);
    if (r->learner) r->gps = rate(w->learner.steps, p->learner.steps, dt);
  }
}

/* Busiest first (inserts + samples per second), then by id. */
static int row_cmp(const void *a, const void *b) {
  const row_t *x = a, *y = b;
  double bx = (isnan(x->ins) ? 0 : x->ins) + (isnan(x->smp) ? 0 : x->smp);
  double by = (isnan(y->ins) ? 0 : y->ins) + (isnan(y->smp) ? 0 : y->smp);
  if (bx != by) return bx > by ? -1 : 1;
  return strcmp(x->w->id, y->w->id);
}

/* 0.5, 12, 999, 1.2k, 12.3k, 123k, 1.23M, ...: at most 6 characters;
 * "-" for an unknown value. */
static void human(char *buf, size_t cap, double v) {
  static const char units[] = " kMGTPE";
  if (isnan(v) || v < 0) {
    snprintf(buf, cap, "-");
    return;
  }
  int u = 0;
  while (v >= 999.5 && u < 6) {
    v /= 1000;
    u++;
  }
  if (u == 0)
    snprintf(buf, cap, v < 10 && v != floor(v) ? "%.1f" : "%.0f", v);
  else
    snprintf(buf, cap, v < 9.995 ? "%.2f%c" : v < 99.95 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* Printable ASCII only: a name's control or non-ASCII bytes become '?',
 * so every character is one column. */
static void ascii(char *dst, size_t cap, const char *src, size_t width) {
  size_t n = 0;
  for (; *src && n + 1 < cap && n < width; src++)
    dst[n++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
  if (*src && n > 0) dst[n - 1] = '~'; /* cut */
  dst[n] = '\0';
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

/* Parts of the workloads on each device kind: [kind][L, R, S]. */
static void device_use(const sample_t *s, int use[3][3]) {
  static const char letters[] = "CGF";
  memset(use, 0, 9 * sizeof(int));
  for (size_t i = 0; i < s->n; i++) {
    const rdc_workload_t *w = &s->w[i];
    const char *r = w->has_placement ? w->placement.running : "";
    char at[3] = {'-', 'C', 'C'}; /* no placement: the table on the CPU */
    if (strlen(r) == 5) {
      at[0] = r[0];
      at[1] = r[2];
      at[2] = r[4];
    }
    for (int p = 0; p < 3; p++)
      for (int k = 0; k < 3; k++) use[k][p] += at[p] == letters[k];
  }
}

static int kind_index(const char *kind) {
  return strcmp(kind, "cpu") == 0 ? 0 : strcmp(kind, "gpu") == 0 ? 1 : strcmp(kind, "fpga") == 0 ? 2 : -1;
}

/* "ok", "unusable", ...: the status's first word. */
static void status_word(char *buf, size_t cap, const char *status) {
  size_t n = strcspn(status, " :;,");
  snprintf(buf, cap, "%.*s", (int)(n < 16 ? n : 16), status);
  if (buf[0] == '\0') snprintf(buf, cap, "?");
}

/* ------------------------------------------------------------------ */
/* A frame as text                                                     */
/* ------------------------------------------------------------------ */

/* One line, cut to width columns (everything written is ASCII). */
static void line_out(FILE *f, int width, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line_out(FILE *f, int width, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  size_t n = strlen(buf);
  while (n > 0 && buf[n - 1] == ' ') n--; /* no trailing blanks */
  if (width > 0 && n > (size_t)width) n = (size_t)width;
  fprintf(f, "%.*s\n", (int)n, buf);
}

static void fmt_uptime(char *buf, size_t cap, double s) {
  uint64_t t = s > 0 ? (uint64_t)s : 0;
  if (t >= 86400)
    snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, t % 86400 / 3600);
  else if (t >= 3600)
    snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t % 3600 / 60);
  else
    snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
}

/* The frame: header, devices, totals, the table; at most max_rows
 * workload rows (0: all). error (may be NULL) is shown under the header. */
static void frame(FILE *f, const char *server, const sample_t *prev, const sample_t *cur,
                  int width, int max_rows, const char *error) {
  double dt = prev ? cur->t - prev->t : 0;
  row_t *rows = cur->n ? calloc(cur->n, sizeof *rows) : NULL;
  if (cur->n && rows == NULL) {
    line_out(f, width, "replayctl: out of memory");
    return;
  }
  double tins = 0, tsmp = 0, tgps = 0;
  for (size_t i = 0; i < cur->n; i++) {
    make_row(&rows[i], &cur->w[i], prev, dt);
    if (!isnan(rows[i].ins)) tins += rows[i].ins;
    if (!isnan(rows[i].smp)) tsmp += rows[i].smp;
    if (!isnan(rows[i].gps)) tgps += rows[i].gps;
  }
  if (cur->n > 1) qsort(rows, cur->n, sizeof *rows, row_cmp);

  char up[32], clock[16];
  fmt_uptime(up, sizeof up, cur->info->uptime_s);
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(clock, sizeof clock, "%H:%M:%S", &tm);
  char head[256];
  snprintf(head, sizeof head, "replayd %.24s at %.64s, up %s, %zu workload%s", cur->info->version,
           server, up, cur->info->workload_count, cur->info->workload_count == 1 ? "" : "s");
  int w = width > 0 ? width : MIN_WIDTH;
  int pad = w - (int)strlen(head) - (int)strlen(clock);
  line_out(f, width, "%s%*s%s", head, pad > 1 ? pad : 1, "", clock);

  /* Devices, with the parts of workloads on each kind (first of its kind). */
  int use[3][3];
  device_use(cur, use);
  char dev[512] = "devices ";
  int seen[3] = {0};
  for (size_t i = 0; i < cur->info->n_devices; i++) {
    const rdc_device_t *d = &cur->info->devices[i];
    int k = kind_index(d->kind);
    char st[20], part[96];
    status_word(st, sizeof st, d->status);
    int idx = k >= 0 ? seen[k]++ : 0;
    snprintf(part, sizeof part, " %.8s%d %s", d->kind, idx, st);
    if (k >= 0 && idx == 0 && (use[k][0] || use[k][1] || use[k][2])) {
      size_t n = strlen(part);
      snprintf(part + n, sizeof part - n, " L%d R%d S%d", use[k][0], use[k][1], use[k][2]);
    }
    strncat(dev, part, sizeof dev - strlen(dev) - 1);
  }
  line_out(f, width, "%s", dev);
  char a[16], b[16], g[16];
  human(a, sizeof a, prev ? tins : NAN);
  human(b, sizeof b, prev ? tsmp : NAN);
  human(g, sizeof g, prev ? tgps : NAN);
  line_out(f, width, "total   insert %s/s  sample %s/s  learner %s steps/s", a, b, g);
  if (error != NULL) line_out(f, width, "error   %s", error);
  line_out(f, width, "%s", "");

  /* NAME takes what the terminal has beyond 80 columns, up to 40. */
  int name_w = NAME_MIN + (width > MIN_WIDTH ? width - MIN_WIDTH : 0);
  if (name_w > NAME_MAX_W) name_w = NAME_MAX_W;
  line_out(f, width, "%-8s %-*s %6s %5s %8s %8s %7s %8s %5s", "ID", name_w, "NAME", "ITEMS",
           "FILL", "INSERT/s", "SAMPLE/s", "GPS", "LOSS", "RUN");
  size_t shown = max_rows > 0 && (size_t)max_rows < cur->n ? (size_t)max_rows : cur->n;
  if (shown < cur->n && shown > 0) shown--; /* room for the "more" line */
  for (size_t i = 0; i < shown; i++) {
    const row_t *r = &rows[i];
    char name[NAME_MAX_W + 1], items[16], ins[16], smp[16], gps[16], loss[16], fill[8];
    ascii(name, sizeof name, r->w->spec.name, (size_t)name_w);
    human(items, sizeof items, (double)r->w->counters.size);
    human(ins, sizeof ins, r->ins);
    human(smp, sizeof smp, r->smp);
    human(gps, sizeof gps, r->learner ? r->gps : NAN);
    if (r->learner && isfinite(r->w->learner.loss))
      snprintf(loss, sizeof loss, "%.3g", r->w->learner.loss);
    else
      snprintf(loss, sizeof loss, "-");
    snprintf(fill, sizeof fill, "%.0f%%", r->fill * 100);
    line_out(f, width, "%.8s %-*s %6s %5s %8s %8s %7s %8.8s %5.5s", r->w->id, name_w, name,
             items, fill, ins, smp, gps, loss, r->running);
  }
  if (shown < cur->n) line_out(f, width, "... %zu more (a taller terminal shows them)", cur->n - shown);
  free(rows);
}

/* --once --json: the same figures as one document. */
static void frame_json(FILE *f, const char *server, const sample_t *prev, const sample_t *cur) {
  double dt = cur->t - prev->t;
  jw_t w;
  jw_init(&w, f);
  jw_object_begin(&w);
  jw_key(&w, "server");
  jw_string(&w, server);
  jw_key(&w, "version");
  jw_string(&w, cur->info->version);
  jw_key(&w, "uptime_seconds");
  jw_double(&w, cur->info->uptime_s);
  jw_key(&w, "interval_seconds");
  jw_double(&w, dt);
  int use[3][3], seen[3] = {0};
  device_use(cur, use);
  jw_key(&w, "devices");
  jw_array_begin(&w);
  for (size_t i = 0; i < cur->info->n_devices; i++) {
    const rdc_device_t *d = &cur->info->devices[i];
    int k = kind_index(d->kind);
    int idx = k >= 0 ? seen[k]++ : 0;
    char name[32], st[20];
    snprintf(name, sizeof name, "%.8s%d", d->kind, idx);
    status_word(st, sizeof st, d->status);
    jw_object_begin(&w);
    jw_key(&w, "device");
    jw_string(&w, name);
    jw_key(&w, "kind");
    jw_string(&w, d->kind);
    jw_key(&w, "state");
    jw_string(&w, st);
    static const char *const parts[3] = {"learners", "replay_modules", "storages"};
    for (int p = 0; p < 3; p++) {
      jw_key(&w, parts[p]);
      jw_u64(&w, k >= 0 && idx == 0 ? (uint64_t)use[k][p] : 0);
    }
    jw_object_end(&w);
  }
  jw_array_end(&w);
  jw_key(&w, "workloads");
  jw_array_begin(&w);
  for (size_t i = 0; i < cur->n; i++) {
    row_t r;
    make_row(&r, &cur->w[i], prev, dt);
    jw_object_begin(&w);
    jw_key(&w, "id");
    jw_string(&w, r.w->id);
    jw_key(&w, "name");
    jw_string(&w, r.w->spec.name);
    jw_key(&w, "items");
    jw_u64(&w, r.w->counters.size);
    jw_key(&w, "capacity");
    jw_u64(&w, r.w->spec.capacity);
    jw_key(&w, "fill");
    jw_double(&w, r.fill);
    jw_key(&w, "inserts_per_second");
    jw_double(&w, r.ins);
    jw_key(&w, "samples_per_second");
    jw_double(&w, r.smp);
    jw_key(&w, "updates_per_second");
    jw_double(&w, r.upd);
    jw_key(&w, "learner_steps_per_second");
    jw_double(&w, r.learner ? r.gps : NAN);
    jw_key(&w, "loss");
    jw_double(&w, r.learner ? r.w->learner.loss : NAN);
    jw_key(&w, "running");
    jw_string(&w, r.running);
    jw_object_end(&w);
  }
  jw_array_end(&w);
  jw_object_end(&w);
  jw_finish(&w);
}

/* ------------------------------------------------------------------ */
/* --once                                                              */
/* ------------------------------------------------------------------ */

static int failed(const rdc_error_t *e) {
  fprintf(stderr, "replayctl: %s: %s\n", rdc_strerror(e->code), e->msg);
  return RCTL_EXIT_CALL;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int top_once(rdc_client_t *c, const rctl_opts_t *o) {
  sample_t a, b;
  rdc_error_t e;
  if (sample_read(c, &a, &e) != RDC_OK) return failed(&e);
  sleep_s(o->interval_s);
  if (sample_read(c, &b, &e) != RDC_OK) {
    sample_free(&a);
    return failed(&e);
  }
  if (o->json)
    frame_json(stdout, o->server, &a, &b);
  else
    frame(stdout, o->server, &a, &b, MIN_WIDTH, 0, NULL);
  sample_free(&a);
  sample_free(&b);
  return RCTL_EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* The live view                                                       */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t quit_signal, resized;
static struct termios saved_tty;
static int tty_raw, screen_on;

static void on_quit(int sig) { quit_signal = sig; }
static void on_winch(int sig) {
  (void)sig;
  resized = 1;
}

/* Put the terminal back as it was: every way out goes through here. */
static void restore_terminal(void) {
  if (tty_raw) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
  tty_raw = 0;
  if (screen_on) fputs("\x1b[?25h\x1b[?1049l", stdout); /* cursor, main screen */
  screen_on = 0;
  fflush(stdout);
}

/* Keys one at a time, without echo; Ctrl-C still sends SIGINT (ISIG). */
static void raw_terminal(void) {
  if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty) != 0) return;
  struct termios t = saved_tty;
  t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  t.c_cc[VMIN] = 0;
  t.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) tty_raw = 1;
}

static void term_size(int *w, int *h) {
  struct winsize ws;
  *w = MIN_WIDTH;
  *h = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *w = ws.ws_col;
    *h = ws.ws_row;
  }
}

/* Wait up to s seconds for a key; returns 1 if it means quit. */
static int wait_key(double s) {
  double end = mono_now() + s;
  for (;;) {
    if (quit_signal || resized) return quit_signal != 0;
    double left = end - mono_now();
    if (left <= 0) return 0;
    struct pollfd p = {STDIN_FILENO, POLLIN, 0};
    int n = poll(&p, tty_raw ? 1 : 0, (int)ceil(left * 1000));
    if (n < 0 && errno == EINTR) continue;
    if (n > 0 && (p.revents & (POLLHUP | POLLERR))) return 1; /* the terminal went away */
    if (n > 0 && (p.revents & POLLIN)) {
      char buf[64];
      ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
      if (got == 0) return 1;
      for (ssize_t i = 0; i < got; i++)
        if (buf[i] == 'q' || buf[i] == 'Q' || buf[i] == 3 /* Ctrl-C without ISIG */) return 1;
    }
  }
}

static int top_live(rdc_client_t *c, const rctl_opts_t *o) {
  int tty = isatty(STDOUT_FILENO);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_quit; /* no SA_RESTART: poll returns at once */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sa.sa_handler = on_winch;
  sigaction(SIGWINCH, &sa, NULL);
  atexit(restore_terminal);
  raw_terminal();
  if (tty) {
    fputs("\x1b[?1049h\x1b[?25l", stdout); /* alternate screen, no cursor */
    screen_on = 1;
  }
  sample_t prev, cur;
  memset(&prev, 0, sizeof prev);
  memset(&cur, 0, sizeof cur);
  int have_prev = 0, have_cur = 0;
  rdc_error_t e;
  char error[RDC_ERROR_MSG_MAX + 32] = "";
  while (!quit_signal) {
    sample_t next;
    if (sample_read(c, &next, &e) == RDC_OK) {
      if (have_prev) sample_free(&prev);
      prev = cur;
      have_prev = have_cur;
      cur = next;
      have_cur = 1;
      error[0] = '\0';
    } else {
      snprintf(error, sizeof error, "%s: %s", rdc_strerror(e.code), e.msg);
    }
    resized = 0;
    int w = MIN_WIDTH, h = 24;
    if (tty) {
      term_size(&w, &h);
      fputs("\x1b[H\x1b[2J", stdout); /* home, clear */
    }
    if (have_cur) {
      /* Header lines: 5, one more with an error. */
      int rows = tty ? h - 5 - (error[0] != '\0') - 1 : 0;
      frame(stdout, o->server, have_prev ? &prev : NULL, &cur, tty ? w : MIN_WIDTH,
            rows < 1 ? 1 : rows, error[0] ? error : NULL);
    } else {
      line_out(stdout, w, "replayd at %.64s: %s", o->server, error);
    }
    if (tty) line_out(stdout, w, "%s", "q quits");
    else fputc('\n', stdout);
    fflush(stdout);
    if (wait_key(o->interval_s)) break;
  }
  if (have_prev) sample_free(&prev);
  if (have_cur) sample_free(&cur);
  restore_terminal();
  return RCTL_EXIT_OK;
}

int rctl_top(rdc_client_t *c, const rctl_opts_t *o) {
  return o->once ? top_once(c, o) : top_live(c, o);
}
