/* mapper.c - papers/001 Algorithm 3: learner, RMM and storage to devices.
 *
 * The rules are in mapper.h. The implementation enumerates the candidate
 * pairs (at most 3 learners x 3 RMMs) instead of running the two argmaxes
 * one after the other: the learner's ties and the RMM's ties are then
 * decided by one ordering over whole mappings, which is what "prefer the
 * mapping with fewer devices, then less traffic" means. The learner set is
 * still Step 1's argmax (with its ties), so the result is Algorithm 3's.
 *
 * Greedy's one blind spot, kept because it is the paper's: with T_L^GPU =
 * 1, T_L^CPU = 1.05, T_RMM^GPU = 0.5 and a slow CPU RMM, Step 1 puts the
 * learner on the GPU, whose RMM must then share it (1/1.5 GPS), while
 * learner CPU + RMM GPU would give 1/1.05. Only a GPU-GPU penalty can make
 * a slower learner win, and only when the GPU's RMM is the sole fast one.
 */
#include "mapper.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const devkind_names[RD_DEV_COUNT] = {"cpu", "gpu", "fpga"};
static const char devkind_letters[RD_DEV_COUNT] = {'C', 'G', 'F'};

const char *rd_devkind_name(rd_devkind_t d) {
  return (unsigned)d < RD_DEV_COUNT ? devkind_names[d] : "invalid";
}

char rd_devkind_letter(rd_devkind_t d) {
  return (unsigned)d < RD_DEV_COUNT ? devkind_letters[d] : '?';
}

int rd_devkind_parse(const char *s, rd_devkind_t *out, rd_error_t *err) {
  if (s == NULL || out == NULL) return rd_error_set(err, RD_EINVAL, "no device kind given");
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    char letter[2] = {devkind_letters[d], '\0'};
    if (strcasecmp(s, devkind_names[d]) == 0 || strcasecmp(s, letter) == 0) {
      *out = (rd_devkind_t)d;
      return RD_OK;
    }
  }
  return rd_error_set(err, RD_EINVAL, "unknown device kind \"%.32s\": use cpu, gpu or fpga", s);
}

const char *rd_pt_source_name(rd_pt_source_t s) {
  switch (s) {
  case RD_PT_NONE: return "-";
  case RD_PT_MEASURED: return "measured";
  case RD_PT_CACHED: return "cached";
  case RD_PT_MODEL: return "model";
  case RD_PT_ASSUMED: return "assumed";
  }
  return "invalid";
}

const char *rd_bottleneck_name(rd_bottleneck_t b) {
  switch (b) {
  case RD_BOTTLENECK_LEARNER: return "learner";
  case RD_BOTTLENECK_RMM: return "rmm";
  }
  return "invalid";
}

/* ------------------------------------------------------------------ */
/* Validation                                                          */
/* ------------------------------------------------------------------ */

static int entry_check(rd_devkind_t d, const char *prim, double t, rd_pt_source_t src,
                       rd_error_t *err) {
  if (src == RD_PT_NONE) return RD_OK;
  if ((unsigned)src > RD_PT_ASSUMED)
    return rd_error_set(err, RD_EINVAL, "%s %s: unknown source %d", rd_devkind_name(d), prim,
                        (int)src);
  if (!isfinite(t) || t <= 0)
    return rd_error_set(err, RD_EINVAL,
                        "%s %s time %g s: must be finite and > 0 (or mark the entry absent)",
                        rd_devkind_name(d), prim, t);
  return RD_OK;
}

static int has_learner(const rd_ptable_t *t, int d) {
  return t->dev[d].present && t->dev[d].src_learner != RD_PT_NONE;
}

static int has_rmm(const rd_ptable_t *t, int d) {
  return t->dev[d].present && t->dev[d].src_rmm != RD_PT_NONE;
}

int rd_ptable_validate(const rd_ptable_t *t, rd_error_t *err) {
  if (t == NULL) return rd_error_set(err, RD_EINVAL, "no performance table");
  if (t->batch == 0) return rd_error_set(err, RD_EINVAL, "batch 0: must be >= 1");
  if (t->item_words == 0) return rd_error_set(err, RD_EINVAL, "item_words 0: must be >= 1");
  if (!isfinite(t->n_actor) || t->n_actor < 0)
    return rd_error_set(err, RD_EINVAL, "n_actor %g: must be finite and >= 0", t->n_actor);
  if (!isfinite(t->link_bytes_per_s) || t->link_bytes_per_s < 0)
    return rd_error_set(err, RD_EINVAL, "link_bytes_per_s %g: must be finite and >= 0 (0: off)",
                        t->link_bytes_per_s);
  const double extra[3] = {t->cpu_gather_s, t->cpu_handoff_s, t->cpu_pass_s};
  const char *extra_name[3] = {"cpu_gather_s", "cpu_handoff_s", "cpu_pass_s"};
  for (int i = 0; i < 3; i++)
    if (!isfinite(extra[i]) || extra[i] < 0)
      return rd_error_set(err, RD_EINVAL, "%s %g: must be finite and >= 0 (0: not modelled)",
                          extra_name[i], extra[i]);
  /* The actors' items arrive through the CPU (Step 3), so it always exists;
   * whether it may run the learner or the RMM is its entries' business. */
  if (!t->dev[RD_DEV_CPU].present)
    return rd_error_set(err, RD_EINVAL, "cpu absent: the actors' inserts arrive through it");
  int n_learner = 0, n_rmm = 0;
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    const rd_pdevice_t *p = &t->dev[d];
    if (!p->present) continue;
    int rc = entry_check((rd_devkind_t)d, "learner", p->t_learner, p->src_learner, err);
    if (rc == RD_OK) rc = entry_check((rd_devkind_t)d, "rmm", p->t_rmm, p->src_rmm, err);
    if (rc != RD_OK) return rc;
    n_learner += has_learner(t, d);
    n_rmm += has_rmm(t, d);
  }
  if (n_learner == 0)
    return rd_error_set(err, RD_EINVAL, "no present device has a learner time");
  if (n_rmm == 0) return rd_error_set(err, RD_EINVAL, "no present device has an rmm time");
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Candidates                                                          */
/* ------------------------------------------------------------------ */

typedef struct {
  rd_devkind_t l, r, s;
  double gps;
  double traffic;                  /* words per step, storage on s */
  double traffic_on[RD_DEV_COUNT]; /* -1: not a candidate */
  double transfer_s;
  int shares_gpu;
  int cpu_shared; /* learner and RMM time-share the CPU's cores */
  uint32_t n_devices;
} cand_t;

/* Step 3 (Alg. 3 lines 9-16) for learner l and RMM r. */
static void place_storage(const rd_ptable_t *t, cand_t *c) {
  const double c_rmm = (double)t->batch;
  const double c_learner = (double)t->batch * (double)t->item_words;
  const double c_actor = t->n_actor * (double)t->item_words;
  /* Line 12's loop order: learner, actors, RMM. */
  const rd_devkind_t order[3] = {c->l, RD_DEV_CPU, c->r};
  double best = INFINITY;
  for (int d = 0; d < RD_DEV_COUNT; d++) c->traffic_on[d] = -1;
  for (int i = 0; i < 3; i++) {
    rd_devkind_t d = order[i];
    double traffic = (c->l != d ? c_learner : 0) + (d != RD_DEV_CPU ? c_actor : 0) +
                     (c->r != d ? c_rmm : 0);
    c->traffic_on[d] = traffic;
    if (traffic < best) { /* strict, as line 14: a tie keeps the earlier device */
      best = traffic;
      c->s = d;
    }
  }
  c->traffic = best;
}

static void predict(const rd_ptable_t *t, cand_t *c) {
  double tl = t->dev[c->l].t_learner, tr = t->dev[c->r].t_rmm;
  double strict_extra = 0;
  if (c->l == RD_DEV_CPU && c->r == RD_DEV_CPU && c->s == RD_DEV_CPU) {
    /* mapper.h "Pipeline costs". */
    if (t->depth == 0) {
      strict_extra = t->cpu_gather_s + t->cpu_handoff_s;
    } else {
      tl += t->cpu_pass_s;
      tr += t->cpu_gather_s;
    }
  }
  c->shares_gpu = c->l == RD_DEV_GPU && c->r == RD_DEV_GPU;
  c->transfer_s = 0;
  if (t->depth == 0) {
    /* Strict loop: each step waits for the previous update, so nothing
     * overlaps; the storage traffic crosses the link in the step too. */
    if (t->link_bytes_per_s > 0)
      c->transfer_s = c->traffic * RD_MAPPER_WORD_BYTES / t->link_bytes_per_s;
    c->gps = 1.0 / (tl + tr + c->transfer_s + strict_extra);
  } else if (c->shares_gpu) {
    c->gps = 1.0 / (tl + tr); /* §VI-B: B/T_L becomes B/(T_L + T_RMM) */
  } else {
    c->gps = 1.0 / fmax(tl, tr); /* eq. (3): min(TP_L, TP_RMM) / B */
    if (c->l == RD_DEV_CPU && c->r == RD_DEV_CPU && t->cpu_cores > 0) {
      /* mapper.h "CPU sharing": the RMM's thread has no core of its own
       * when the learner's threads take them all (§V-B, §VI-B). */
      double lt = t->cpu_learner_threads ? (double)t->cpu_learner_threads : 1.0;
      if (lt + 1 > (double)t->cpu_cores) {
        double shared = (lt * tl + tr) / (double)t->cpu_cores;
        c->gps = 1.0 / fmax(fmax(tl, tr), shared);
        c->cpu_shared = 1;
      }
    }
  }
  uint32_t used = 1u << RD_DEV_CPU; /* the actors */
  used |= 1u << c->l;
  used |= 1u << c->r;
  used |= 1u << c->s;
  c->n_devices = (uint32_t)__builtin_popcount(used);
}

/* Every figure the mapping and its explanation carry is a finite number
 * (mapper.h): each entry's throughput B / T, each candidate's GPS (> 0)
 * and traffic. A table of finite times can still overflow: B / 5e-324,
 * 1 / (1e308 + 1e308), a traffic of 1e300 items per step. */
static int figures_finite(const rd_ptable_t *t, const cand_t *cands, size_t n, rd_error_t *err) {
  const double B = (double)t->batch;
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    if (has_learner(t, d) && !isfinite(B / t->dev[d].t_learner))
      return rd_error_set(err, RD_ERANGE, "%s learner: B / T = %u / %g s is not a finite "
                          "throughput", rd_devkind_name(d), t->batch, t->dev[d].t_learner);
    if (has_rmm(t, d) && !isfinite(B / t->dev[d].t_rmm))
      return rd_error_set(err, RD_ERANGE, "%s rmm: B / T = %u / %g s is not a finite "
                          "throughput", rd_devkind_name(d), t->batch, t->dev[d].t_rmm);
  }
  for (size_t i = 0; i < n; i++) {
    const cand_t *c = &cands[i];
    int bad = !(isfinite(c->gps) && c->gps > 0) || !isfinite(c->traffic) ||
              !isfinite(c->transfer_s);
    for (int d = 0; d < RD_DEV_COUNT; d++) bad |= !isfinite(c->traffic_on[d]);
    if (bad)
      return rd_error_set(err, RD_ERANGE, "learner %s, rmm %s: %g GPS with %g words/step of "
                          "traffic is not a finite prediction (times or N_actor out of range)",
                          rd_devkind_name(c->l), rd_devkind_name(c->r), c->gps, c->traffic);
  }
  return RD_OK;
}

static int eligible(const cand_t *c, double best_gps) {
  return c->gps >= best_gps * (1.0 - RD_MAPPER_TIE_REL);
}

/* Why a beats b under the ordering of mapper.h ("Ties between whole
 * mappings"); 0 when b beats (or equals) a. The reason goes to why. */
static int beats(const rd_ptable_t *t, const cand_t *a, const cand_t *b, double best_gps,
                 char *why, size_t cap) {
  int ea = eligible(a, best_gps), eb = eligible(b, best_gps);
  if (ea != eb) {
    if (ea) snprintf(why, cap, "only %.3g GPS vs %.3g", b->gps, a->gps);
    return ea;
  }
  if (a->n_devices != b->n_devices) {
    if (a->n_devices < b->n_devices)
      snprintf(why, cap, "the same GPS (within %g%%) on %u devices vs %u",
               RD_MAPPER_TIE_REL * 100, b->n_devices, a->n_devices);
    return a->n_devices < b->n_devices;
  }
  if (a->traffic != b->traffic) {
    if (a->traffic < b->traffic)
      snprintf(why, cap, "the same GPS (within %g%%) and devices with %.4g words/step vs %.4g",
               RD_MAPPER_TIE_REL * 100, b->traffic, a->traffic);
    return a->traffic < b->traffic;
  }
  if (a->gps != b->gps) {
    if (a->gps > b->gps) snprintf(why, cap, "%.4g GPS vs %.4g (within the tie)", b->gps, a->gps);
    return a->gps > b->gps;
  }
  double ta = t->dev[a->r].t_rmm, tb = t->dev[b->r].t_rmm;
  if (ta != tb) {
    if (ta < tb) snprintf(why, cap, "the same figures with a slower rmm");
    return ta < tb;
  }
  return 0; /* enumeration order decides: the earlier stays */
}

/* ------------------------------------------------------------------ */
/* Explanation                                                         */
/* ------------------------------------------------------------------ */

typedef struct {
  char *buf;
  size_t cap, len;
} sbuf_t;

static void sb_printf(sbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends what fits; len counts the whole text, so len >= cap means
 * truncated and len is the size a caller needs (less the NUL). */
static void sb_printf(sbuf_t *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = sb->len < sb->cap ? vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap)
                            : vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n > 0) sb->len += (size_t)n;
}

/* Words as bytes for people: "2.7 KiB". */
static void fmt_bytes(double words, char *out, size_t cap) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double b = words * RD_MAPPER_WORD_BYTES;
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(out, cap, "%.0f B", b);
  else
    snprintf(out, cap, "%.3g %s", b, unit[u]);
}

static void explain(const rd_ptable_t *t, const cand_t *cands, size_t n, const cand_t *win,
                    int pruned, rd_devkind_t pruned_by, double best_gps, char *out, size_t cap) {
  sbuf_t sb = {out, cap, 0};
  const double B = (double)t->batch;
  char why[160];

  /* Learner: Step 1's argmax, or one of its ties decided by the whole
   * mapping; the rival named is the fastest other learner in the tie set. */
  int rival_l = -1;
  for (size_t i = 0; i < n; i++)
    if (cands[i].l != win->l &&
        (rival_l < 0 || t->dev[cands[i].l].t_learner < t->dev[rival_l].t_learner))
      rival_l = (int)cands[i].l;
  sb_printf(&sb, "learner on %s (%.3g items/s", rd_devkind_name(win->l),
            B / t->dev[win->l].t_learner);
  if (rival_l >= 0) {
    const cand_t *rival = NULL; /* the best mapping with that learner */
    for (size_t i = 0; i < n; i++)
      if (cands[i].l == (rd_devkind_t)rival_l &&
          (rival == NULL || beats(t, &cands[i], rival, best_gps, why, sizeof why)))
        rival = &cands[i];
    snprintf(why, sizeof why, "a worse mapping");
    beats(t, win, rival, best_gps, why, sizeof why);
    sb_printf(&sb, "; %s's %.3g ties within %g%%, and its best mapping gives %s",
              rd_devkind_name(rival_l), B / t->dev[rival_l].t_learner, RD_MAPPER_TIE_REL * 100,
              why);
  } else {
    sb_printf(&sb, ", best");
  }
  sb_printf(&sb, ")");

  /* RMM: whether it is the fastest, the prune, then the fastest RMM that
   * was allowed but not taken, and why. */
  const cand_t *faster = NULL;
  for (size_t i = 0; i < n; i++)
    if (cands[i].l == win->l && cands[i].r != win->r &&
        t->dev[cands[i].r].t_rmm < t->dev[win->r].t_rmm &&
        (faster == NULL || t->dev[cands[i].r].t_rmm < t->dev[faster->r].t_rmm))
      faster = &cands[i];
  sb_printf(&sb, "; rmm on %s (%.3g items/s", rd_devkind_name(win->r),
            B / t->dev[win->r].t_rmm);
  if (faster == NULL) {
    int gpu_faster = pruned && t->dev[RD_DEV_GPU].t_rmm < t->dev[win->r].t_rmm;
    sb_printf(&sb, gpu_faster ? ", best after the prune)" : ", best)");
  } else {
    sb_printf(&sb, ")");
  }
  if (pruned)
    sb_printf(&sb, "; %s's %.3g >= the learner's %.3g, so gpu is pruned (sharing the gpu "
              "would slow the learner)",
              rd_devkind_name(pruned_by), B / t->dev[pruned_by].t_rmm,
              B / t->dev[win->l].t_learner);
  if (faster != NULL) {
    snprintf(why, sizeof why, "a worse mapping");
    beats(t, win, faster, best_gps, why, sizeof why);
    sb_printf(&sb, "; %s's faster rmm (%.3g) gives %s", rd_devkind_name(faster->r),
              B / t->dev[faster->r].t_rmm, why);
  }

  /* Storage: its traffic against the other candidates'. */
  char bytes[32];
  fmt_bytes(win->traffic, bytes, sizeof bytes);
  sb_printf(&sb, "; storage on %s: %.4g words/step (%s)", rd_devkind_name(win->s), win->traffic,
            bytes);
  int tie = 0;
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    if (d == (int)win->s || win->traffic_on[d] < 0) continue;
    fmt_bytes(win->traffic_on[d], bytes, sizeof bytes);
    sb_printf(&sb, " vs %.4g (%s) on %s", win->traffic_on[d], bytes, rd_devkind_name(d));
    tie |= win->traffic_on[d] == win->traffic;
  }
  if (tie)
    sb_printf(&sb, " (a tie: the %s device comes first, Alg. 3 line 12)",
              win->s == win->l ? "learner's" : win->s == RD_DEV_CPU ? "actors'" : "rmm's");

  /* The prediction and the formula it came from. */
  const double tl = t->dev[win->l].t_learner, tr = t->dev[win->r].t_rmm;
  sb_printf(&sb, "; %.4g GPS predicted, %s-bound ", win->gps, tl >= tr ? "learner" : "rmm");
  if (t->depth == 0)
    sb_printf(&sb, "(strict loop, D=0: 1/(T_learner+T_rmm+transfer %.3g s))", win->transfer_s);
  else if (win->shares_gpu)
    sb_printf(&sb, "(both share the gpu: 1/(T_learner+T_rmm), D=%u)", t->depth);
  else if (win->cpu_shared)
    sb_printf(&sb, "(both share the cpu's %u cores, learner on %u threads: "
              "1/max(T_learner, T_rmm, (threads*T_learner+T_rmm)/cores), D=%u)",
              t->cpu_cores, t->cpu_learner_threads ? t->cpu_learner_threads : 1, t->depth);
  else
    sb_printf(&sb, "(relaxed pipeline, D=%u: min(TP_learner, TP_rmm)/B)", t->depth);
  if (win->l == RD_DEV_CPU && win->r == RD_DEV_CPU && win->s == RD_DEV_CPU &&
      (t->cpu_gather_s > 0 || t->cpu_handoff_s > 0 || t->cpu_pass_s > 0)) {
    if (t->depth == 0)
      sb_printf(&sb, ", plus the cpu pipeline's gather %.3g s and hand-off %.3g s per step",
                t->cpu_gather_s, t->cpu_handoff_s);
    else
      sb_printf(&sb, ", with the cpu pipeline's gather %.3g s on the rmm's side and pass "
                "%.3g s on the learner's", t->cpu_gather_s, t->cpu_pass_s);
  }

  if (sb.len >= cap && cap >= 4) memcpy(out + cap - 4, "...", 4); /* show it was cut */
}

/* ------------------------------------------------------------------ */
/* Algorithm 3                                                         */
/* ------------------------------------------------------------------ */

int rd_map(const rd_ptable_t *t, rd_mapping_t *out, rd_error_t *err) {
  int rc = rd_ptable_validate(t, err);
  if (rc != RD_OK) return rc;
  if (out == NULL) return rd_error_set(err, RD_EINVAL, "no mapping to write");

  /* Step 1: argmax_j TP_L^j, keeping the devices within the tolerance. */
  double best_tl = INFINITY;
  for (int d = 0; d < RD_DEV_COUNT; d++)
    if (has_learner(t, d)) best_tl = fmin(best_tl, t->dev[d].t_learner);

  cand_t cands[RD_DEV_COUNT * RD_DEV_COUNT];
  int pruned_for[RD_DEV_COUNT] = {0};
  rd_devkind_t pruned_by_for[RD_DEV_COUNT] = {RD_DEV_CPU, RD_DEV_CPU, RD_DEV_CPU};
  size_t n = 0;
  for (int l = 0; l < RD_DEV_COUNT; l++) {
    if (!has_learner(t, l)) continue;
    /* TP_L^l >= (1 - tol) TP_L^best, in times. */
    if (best_tl / t->dev[l].t_learner < 1.0 - RD_MAPPER_TIE_REL) continue;

    /* Step 2's prune (lines 6-7; any non-GPU device, see mapper.h). The
     * fastest such RMM is the one named. */
    if (l == RD_DEV_GPU && t->depth > 0 && has_rmm(t, RD_DEV_GPU)) {
      for (int r = 0; r < RD_DEV_COUNT; r++) {
        if (r == RD_DEV_GPU || !has_rmm(t, r)) continue;
        /* TP_RMM^r >= TP_L^GPU  <=>  T_RMM^r <= T_L^GPU (same B). */
        if (t->dev[r].t_rmm <= t->dev[l].t_learner &&
            (!pruned_for[l] || t->dev[r].t_rmm < t->dev[pruned_by_for[l]].t_rmm)) {
          pruned_for[l] = 1;
          pruned_by_for[l] = (rd_devkind_t)r;
        }
      }
    }
    for (int r = 0; r < RD_DEV_COUNT; r++) {
      if (!has_rmm(t, r) || (pruned_for[l] && r == RD_DEV_GPU)) continue;
      cand_t *c = &cands[n++];
      memset(c, 0, sizeof *c);
      c->l = (rd_devkind_t)l;
      c->r = (rd_devkind_t)r;
      place_storage(t, c); /* Step 3 */
      predict(t, c);
    }
  }

  rc = figures_finite(t, cands, n, err);
  if (rc != RD_OK) return rc;

  /* Whole mappings: the best GPS, then the tie rules (mapper.h). */
  double best_gps = 0;
  for (size_t i = 0; i < n; i++) best_gps = fmax(best_gps, cands[i].gps);
  const cand_t *win = &cands[0];
  char why[160];
  for (size_t i = 1; i < n; i++)
    if (beats(t, &cands[i], win, best_gps, why, sizeof why)) win = &cands[i];

  rd_mapping_t m;
  memset(&m, 0, sizeof m);
  m.learner = win->l;
  m.rmm = win->r;
  m.storage = win->s;
  m.gps = win->gps;
  m.tp_learner = (double)t->batch / t->dev[win->l].t_learner;
  m.tp_rmm = (double)t->batch / t->dev[win->r].t_rmm;
  m.bottleneck = t->dev[win->l].t_learner >= t->dev[win->r].t_rmm ? RD_BOTTLENECK_LEARNER
                                                                    : RD_BOTTLENECK_RMM;
  m.shares_gpu = win->shares_gpu;
  m.gpu_rmm_pruned = pruned_for[win->l];
  m.pruned_by = pruned_by_for[win->l];
  m.traffic_words = win->traffic;
  memcpy(m.traffic_on, win->traffic_on, sizeof m.traffic_on);
  m.transfer_s = win->transfer_s;
  m.n_devices = win->n_devices;
  explain(t, cands, n, win, m.gpu_rmm_pruned, m.pruned_by, best_gps, m.explain,
          sizeof m.explain);
  *out = m;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

int rd_mapping_format(const rd_mapping_t *m, char *buf, size_t cap) {
  if (buf != NULL && cap > 0) buf[0] = '\0';
  if (m == NULL || buf == NULL) return RD_EINVAL;
  if (cap < RD_MAPPING_CODE_MAX) return RD_ETOOBIG;
  char l = rd_devkind_letter(m->learner), r = rd_devkind_letter(m->rmm),
       s = rd_devkind_letter(m->storage);
  if (l == '?' || r == '?' || s == '?') return RD_EINVAL;
  snprintf(buf, cap, "%c-%c-%c", l, r, s);
  return RD_OK;
}

/* One entry's three columns; the last column of a line is not padded. */
static void format_entry(sbuf_t *sb, double t_s, rd_pt_source_t src, uint32_t batch, int last) {
  const char *from = rd_pt_source_name(src);
  if (src == RD_PT_NONE)
    sb_printf(sb, "  %-10s  %-8s  %-*s", "-", "-", last ? 0 : 8, from);
  else
    sb_printf(sb, "  %-10.3e  %-8.3g  %-*s", t_s, t_s > 0 ? (double)batch / t_s : 0.0,
              last ? 0 : 8, from);
}

int rd_ptable_format(const rd_ptable_t *t, char *buf, size_t cap, size_t *len) {
  if (t == NULL || buf == NULL || cap == 0) return RD_EINVAL;
  sbuf_t sb = {buf, cap, 0};
  sb_printf(&sb, "device  %-10s  %-8s  %-8s  %-10s  %-8s  %s\n", "learner s", "items/s", "from",
            "rmm s", "items/s", "from");
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    const rd_pdevice_t *p = &t->dev[d];
    sb_printf(&sb, "%-6s", rd_devkind_name((rd_devkind_t)d));
    if (!p->present) {
      sb_printf(&sb, "  (absent)\n");
      continue;
    }
    format_entry(&sb, p->t_learner, p->src_learner, t->batch, 0);
    format_entry(&sb, p->t_rmm, p->src_rmm, t->batch, 1);
    sb_printf(&sb, "\n");
  }
  sb_printf(&sb, "B=%u E=%u words N_actor=%g items/step D=%u link=", t->batch, t->item_words,
            t->n_actor, t->depth);
  if (t->link_bytes_per_s > 0)
    sb_printf(&sb, "%.3g B/s\n", t->link_bytes_per_s);
  else
    sb_printf(&sb, "off\n");
  if (t->cpu_gather_s > 0 || t->cpu_handoff_s > 0 || t->cpu_pass_s > 0)
    sb_printf(&sb, "cpu pipeline per step: gather %.3e s, handoff %.3e s, pass %.3e s\n",
              t->cpu_gather_s, t->cpu_handoff_s, t->cpu_pass_s);
  if (len != NULL) *len = sb.len;
  return sb.len < cap ? RD_OK : RD_ETOOBIG;
}
