/* model.c - the FPGA analytical performance model (see model.h for the
 * model, its sources and its constants). Three parts: the part-file
 * loader, SRAM bank placement shared by both modules, and the RMM and
 * learner models with their searches. */
#include "model.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *rd_fpga_parts_default_dir(void) { return RD_FPGA_PARTS_DEFAULT_DIR; }

/* ------------------------------------------------------------------ */
/* Part files                                                          */
/* ------------------------------------------------------------------ */

#define LINE_MAX_BYTES 512

enum { T_STR, T_U32, T_TOTAL };
enum { RES_DSP, RES_LUT, RES_FF, RES_BRAM, RES_URAM, RES_N };

typedef struct {
  const char *key;
  int type;
  size_t off;       /* T_STR, T_U32: offset in rd_fpga_part_t; T_TOTAL: resource index */
  size_t cap;       /* T_STR: buffer size */
  uint64_t min, max;
  int required;
} part_key_t;

#define FIELD(f) offsetof(rd_fpga_part_t, f)

static const part_key_t PART_KEYS[] = {
    {"name", T_STR, FIELD(name), RD_FPGA_NAME_MAX, 0, 0, 1},
    {"device", T_STR, FIELD(device), RD_FPGA_DEVICE_MAX, 0, 0, 0},
    {"slrs", T_U32, FIELD(slrs), 0, 1, RD_FPGA_MAX_SLRS, 1},
    {"dsp", T_TOTAL, RES_DSP, 0, 1, UINT64_C(1) << 32, 1},
    {"lut", T_TOTAL, RES_LUT, 0, 1, UINT64_C(1) << 32, 1},
    {"ff", T_TOTAL, RES_FF, 0, 1, UINT64_C(1) << 32, 1},
    {"bram36", T_TOTAL, RES_BRAM, 0, 0, UINT64_C(1) << 32, 1},
    {"uram", T_TOTAL, RES_URAM, 0, 0, UINT64_C(1) << 32, 1},
    {"clock_mhz", T_U32, FIELD(clock_mhz), 0, 1, 2000, 1},
    {"usable_pct", T_U32, FIELD(usable_pct), 0, 1, 100, 0},
    {"dsp_alu_bits", T_U32, FIELD(dsp_alu_bits), 0, 8, 128, 0},
    {"ddr_banks", T_U32, FIELD(ddr_banks), 0, 0, 64, 0},
    {"ddr_gb", T_U32, FIELD(ddr_gb), 0, 0, 1u << 20, 0},
    {"hbm_gb", T_U32, FIELD(hbm_gb), 0, 0, 1u << 20, 0},
    {"hbm_channels", T_U32, FIELD(hbm_channels), 0, 0, 1024, 0},
    {"mem_bw_gbps", T_U32, FIELD(mem_bw_gbps), 0, 0, 1u << 20, 0},
};
#define N_PART_KEYS (sizeof PART_KEYS / sizeof PART_KEYS[0])

static int valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= RD_FPGA_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return 0;
  }
  return 1;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) e--;
  *e = '\0';
  return s;
}

/* Strictly a decimal whole number: no sign, no space inside, no suffix. */
static int parse_u64(const char *s, uint64_t *v) {
  if (*s < '0' || *s > '9') return 0;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') return 0;
  *v = x;
  return 1;
}

/* The stem of a path ending in ".part" ("dir/u200.part" -> "u200"), or
 * an empty string for other names. */
static void part_stem(const char *path, char *stem, size_t cap) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  stem[0] = '\0';
  if (n > 5 && strcmp(base + n - 5, ".part") == 0 && n - 5 < cap) {
    memcpy(stem, base, n - 5);
    stem[n - 5] = '\0';
  }
}

static int parse_part_file(const char *path, rd_fpga_part_t *out, rd_error_t *err) {
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return rd_error_set(err, RD_EINVAL, "%s: cannot open part file: %s", path, strerror(errno));

  rd_fpga_part_t p;
  memset(&p, 0, sizeof p);
  p.usable_pct = 100;
  p.dsp_alu_bits = 48;
  uint64_t total[RES_N] = {0};
  int seen[N_PART_KEYS] = {0};
  char line[LINE_MAX_BYTES + 2];
  unsigned lineno = 0;
  int rc = RD_OK;

  while (fgets(line, sizeof line, f) != NULL) {
    lineno++;
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: line longer than %d bytes", path, lineno,
                        LINE_MAX_BYTES);
      goto out;
    }
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *s = trim(line);
    if (*s == '\0') continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: expected 'key = value', got '%.40s'", path,
                        lineno, s);
      goto out;
    }
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    if (*key == '\0' || *val == '\0') {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: %s", path, lineno,
                        *key == '\0' ? "missing key before '='" : "missing value after '='");
      goto out;
    }
    size_t k = 0;
    while (k < N_PART_KEYS && strcmp(PART_KEYS[k].key, key) != 0) k++;
    if (k == N_PART_KEYS) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: unknown key '%.40s'", path, lineno, key);
      goto out;
    }
    const part_key_t *pk = &PART_KEYS[k];
    if (seen[k]) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: key '%s' given twice", path, lineno, pk->key);
      goto out;
    }
    seen[k] = 1;
    if (pk->type == T_STR) {
      if (strlen(val) >= pk->cap) {
        rc = rd_error_set(err, RD_EINVAL, "%s:%u: %s is longer than %zu characters", path,
                          lineno, pk->key, pk->cap - 1);
        goto out;
      }
      if (pk->off == FIELD(name) && !valid_name(val)) {
        rc = rd_error_set(err, RD_EINVAL,
                          "%s:%u: name '%.40s' must be lower-case letters, digits, '_' or '-'",
                          path, lineno, val);
        goto out;
      }
      memcpy((char *)&p + pk->off, val, strlen(val) + 1);
      continue;
    }
    uint64_t v;
    if (!parse_u64(val, &v)) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: %s = '%.40s' is not a whole number", path,
                        lineno, pk->key, val);
      goto out;
    }
    if (v < pk->min || v > pk->max) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: %s = %" PRIu64 " is outside [%" PRIu64
                        ", %" PRIu64 "]", path, lineno, pk->key, v, pk->min, pk->max);
      goto out;
    }
    if (pk->type == T_U32)
      *(uint32_t *)(void *)((char *)&p + pk->off) = (uint32_t)v;
    else
      total[pk->off] = v;
  }
  if (ferror(f)) {
    rc = rd_error_set(err, RD_EINVAL, "%s: read error after line %u", path, lineno);
    goto out;
  }
  for (size_t k = 0; k < N_PART_KEYS; k++)
    if (PART_KEYS[k].required && !seen[k]) {
      rc = rd_error_set(err, RD_EINVAL, "%s: missing key '%s'", path, PART_KEYS[k].key);
      goto out;
    }
  /* Totals are the data sheet's; every SLR of the Alveo parts holds the
   * same share, and a total that does not split evenly is a typo. */
  for (size_t k = 0; k < N_PART_KEYS; k++) {
    if (PART_KEYS[k].type != T_TOTAL) continue;
    uint64_t t = total[PART_KEYS[k].off];
    if (t % p.slrs != 0) {
      rc = rd_error_set(err, RD_EINVAL, "%s: %s = %" PRIu64 " does not divide evenly over %u SLRs",
                        path, PART_KEYS[k].key, t, p.slrs);
      goto out;
    }
  }
  p.per_slr.dsp = total[RES_DSP] / p.slrs;
  p.per_slr.lut = total[RES_LUT] / p.slrs;
  p.per_slr.ff = total[RES_FF] / p.slrs;
  p.per_slr.bram36 = total[RES_BRAM] / p.slrs;
  p.per_slr.uram = total[RES_URAM] / p.slrs;
  char stem[RD_FPGA_NAME_MAX + 8];
  part_stem(path, stem, sizeof stem);
  if (stem[0] != '\0' && strcmp(stem, p.name) != 0) {
    rc = rd_error_set(err, RD_EINVAL, "%s: name '%s' does not match the file name", path, p.name);
    goto out;
  }
  rd_error_t e2;
  if (rd_fpga_part_validate(&p, &e2) != RD_OK) {
    rc = rd_error_set(err, RD_EINVAL, "%s: %s", path, e2.msg);
    goto out;
  }
  *out = p;
out:
  fclose(f);
  return rc;
}

int rd_fpga_part_validate(const rd_fpga_part_t *p, rd_error_t *err) {
  if (p == NULL) return rd_error_set(err, RD_EINVAL, "part is NULL");
  if (memchr(p->name, '\0', sizeof p->name) == NULL || !valid_name(p->name))
    return rd_error_set(err, RD_EINVAL, "part name must be 1..%d lower-case letters, digits, "
                        "'_' or '-'", RD_FPGA_NAME_MAX - 1);
  if (p->slrs < 1 || p->slrs > RD_FPGA_MAX_SLRS)
    return rd_error_set(err, RD_EINVAL, "part %s: slrs = %u is outside [1, %d]", p->name, p->slrs,
                        RD_FPGA_MAX_SLRS);
  if (p->per_slr.dsp == 0 || p->per_slr.lut == 0 || p->per_slr.ff == 0)
    return rd_error_set(err, RD_EINVAL, "part %s: an SLR needs DSPs, LUTs and FFs", p->name);
  if (p->per_slr.bram36 + p->per_slr.uram == 0)
    return rd_error_set(err, RD_EINVAL, "part %s: an SLR needs block RAM or UltraRAM", p->name);
  if (p->per_slr.dsp > (UINT64_C(1) << 32) || p->per_slr.lut > (UINT64_C(1) << 32) ||
      p->per_slr.ff > (UINT64_C(1) << 32) || p->per_slr.bram36 > (UINT64_C(1) << 32) ||
      p->per_slr.uram > (UINT64_C(1) << 32))
    return rd_error_set(err, RD_EINVAL, "part %s: a resource count exceeds 2^32", p->name);
  if (p->usable_pct < 1 || p->usable_pct > 100)
    return rd_error_set(err, RD_EINVAL, "part %s: usable_pct = %u is outside [1, 100]", p->name,
                        p->usable_pct);
  if (p->clock_mhz < 1 || p->clock_mhz > 2000)
    return rd_error_set(err, RD_EINVAL, "part %s: clock_mhz = %u is outside [1, 2000]", p->name,
                        p->clock_mhz);
  if (p->dsp_alu_bits < 8 || p->dsp_alu_bits > 128)
    return rd_error_set(err, RD_EINVAL, "part %s: dsp_alu_bits = %u is outside [8, 128]",
                        p->name, p->dsp_alu_bits);
  return RD_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

int rd_fpga_parts_load(const char *dir_or_file, rd_fpga_part_t *out, size_t cap, size_t *n,
                       rd_error_t *err) {
  if (dir_or_file == NULL || dir_or_file[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "part path is empty");
  if (out == NULL || n == NULL) return rd_error_set(err, RD_EINVAL, "out and n are required");
  if (cap == 0) return rd_error_set(err, RD_ETOOBIG, "no room for parts (cap = 0)");
  struct stat st;
  if (stat(dir_or_file, &st) != 0)
    return rd_error_set(err, RD_EINVAL, "%s: %s", dir_or_file, strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    rd_fpga_part_t p;
    int rc = parse_part_file(dir_or_file, &p, err);
    if (rc != RD_OK) return rc;
    out[0] = p;
    *n = 1;
    return RD_OK;
  }

  /* A directory: every "*.part", in name order so results do not depend
   * on the file system's order. Parsed into the stack first: on error the
   * caller's array is untouched. */
  _Static_assert(NAME_MAX + 1 <= 256, "d_name fits the name buffer");
  char names[RD_FPGA_MAX_PARTS][256];
  size_t count = 0;
  DIR *d = opendir(dir_or_file);
  if (d == NULL) return rd_error_set(err, RD_EINVAL, "%s: %s", dir_or_file, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".part") != 0) continue;
    if (count == RD_FPGA_MAX_PARTS || count == cap) {
      closedir(d);
      return rd_error_set(err, RD_ETOOBIG, "%s: more than %zu part files", dir_or_file,
                          cap < RD_FPGA_MAX_PARTS ? cap : (size_t)RD_FPGA_MAX_PARTS);
    }
    memcpy(names[count++], e->d_name, len + 1);
  }
  closedir(d);
  if (count == 0) return rd_error_set(err, RD_EINVAL, "%s: no *.part files", dir_or_file);
  qsort(names, count, sizeof names[0], cmp_names);

  rd_fpga_part_t parts[RD_FPGA_MAX_PARTS];
  char path[PATH_MAX];
  for (size_t i = 0; i < count; i++) {
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir_or_file, names[i]) >= sizeof path)
      return rd_error_set(err, RD_EINVAL, "%s: path too long", dir_or_file);
    int rc = parse_part_file(path, &parts[i], err);
    if (rc != RD_OK) return rc;
  }
  memcpy(out, parts, count * sizeof parts[0]);
  *n = count;
  return RD_OK;
}

int rd_fpga_part_find(const char *name, const char *dir, rd_fpga_part_t *out, rd_error_t *err) {
  if (name == NULL || !valid_name(name))
    return rd_error_set(err, RD_EINVAL, "FPGA part name '%.40s' must be lower-case letters, "
                        "digits, '_' or '-'", name ? name : "(null)");
  if (out == NULL) return rd_error_set(err, RD_EINVAL, "out is required");
  if (dir == NULL) dir = rd_fpga_parts_default_dir();
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s.part", dir, name) >= sizeof path)
    return rd_error_set(err, RD_EINVAL, "%s: path too long", dir);
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) {
    /* Say what there is: the usual mistake is a name the directory spells
     * differently, or the wrong directory. */
    rd_fpga_part_t known[RD_FPGA_MAX_PARTS];
    size_t n = 0;
    rd_error_t e2;
    char list[160] = "";
    if (rd_fpga_parts_load(dir, known, RD_FPGA_MAX_PARTS, &n, &e2) == RD_OK) {
      size_t used = 0;
      for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 known[i].name);
      return rd_error_set(err, RD_ENOTFOUND, "no FPGA part '%s' in %s (known: %s)", name, dir,
                          list);
    }
    return rd_error_set(err, RD_ENOTFOUND, "no FPGA part '%s' in %s", name, dir);
  }
  rd_fpga_part_t p;
  int rc = parse_part_file(path, &p, err);
  if (rc != RD_OK) return rc;
  *out = p;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Workloads                                                            */
/* ------------------------------------------------------------------ */

typedef struct {
  const char *name;
  uint32_t bits;        /* a weight or activation word */
  uint32_t acc_bits;    /* a gradient accumulator word */
  uint32_t dsp_per_mac; /* DSP48s per multiply-add unit */
} precision_t;

static const precision_t PRECISIONS[] = {
    [RD_FPGA_FP32] = {"fp32", 32, 32, 5},
    [RD_FPGA_FX32] = {"fx32", 32, 64, 4},
    [RD_FPGA_FX16] = {"fx16", 16, 32, 1},
};

typedef struct {
  uint32_t ops_per_weight;   /* U: multiply-adds per weight in the WU module */
  uint32_t state_words;      /* optimizer words kept per weight */
} optimizer_t;

static const optimizer_t OPTIMIZERS[] = {
    [RD_FPGA_ADAM] = {6, 2},
    [RD_FPGA_SGD] = {1, 0},
};

const char *rd_fpga_precision_name(rd_fpga_precision_t p) {
  return ((unsigned)p <= RD_FPGA_FX16) ? PRECISIONS[p].name : "invalid";
}

int rd_fpga_learner_unit_defs(const rd_fpga_learner_est_t *e, char *buf, size_t cap,
                              rd_error_t *err) {
  enum { NETS = 2, LAYERS = 8 }; /* kernels/learner.h: LRN_UNIT_LAYERS */
  uint64_t units[NETS][LAYERS];
  memset(units, 0, sizeof units);
  if (cap > 0) buf[0] = '\0';
  for (uint32_t i = 0; i < e->n_tus; i++) {
    const rd_fpga_tu_t *t = &e->tu[i];
    if (t->kind == RD_FPGA_TU_LOSS) continue;
    if (t->net >= NETS || t->layer >= LAYERS)
      return rd_error_set(err, RD_ERANGE, "TU %s: the learner kernel has its own units for "
                          "%d networks of %d layers", t->label, NETS, LAYERS);
    uint64_t *u = &units[t->net][t->layer];
    if (*u != 0 && *u != t->units) /* not by construction: units = ceil(macs / T) */
      return rd_error_set(err, RD_EINTERNAL, "TU %s: %" PRIu64 " units, another TU of its "
                          "layer %" PRIu64, t->label, t->units, *u);
    *u = t->units;
  }
  size_t pos = 0;
  for (uint32_t n = 0; n < NETS; n++)
    for (uint32_t l = 0; l < LAYERS; l++) {
      if (units[n][l] == 0) continue;
      int w = snprintf(buf + pos, cap > pos ? cap - pos : 0, "%s-DLRN_UNITS_N%u_L%u=%" PRIu64,
                       pos ? " " : "", n, l, units[n][l]);
      if (w < 0 || pos + (size_t)w >= cap) {
        if (cap > 0) buf[0] = '\0';
        return rd_error_set(err, RD_ETOOBIG, "the learner's unit flags need more than %zu "
                            "bytes", cap);
      }
      pos += (size_t)w;
    }
  return RD_OK;
}

void rd_fpga_rmm_port_masks(const rd_fpga_rmm_est_t *e, uint32_t *regs, uint32_t *banked) {
  *regs = *banked = 0;
  for (uint32_t h = 1; h <= e->shared_levels && h <= 32; h++) {
    if (e->port[h] == RD_FPGA_PORT_REGS) *regs |= 1u << (h - 1);
    if (e->port[h] == RD_FPGA_PORT_BANKED) *banked |= 1u << (h - 1);
  }
}

const char *rd_fpga_port_name(rd_fpga_port_t p) {
  static const char *NAMES[] = {"none", "one port", "registers", "banked"};
  return ((unsigned)p <= RD_FPGA_PORT_BANKED) ? NAMES[p] : "invalid";
}

void rd_fpga_workload_default(rd_fpga_workload_t *w) {
  memset(w, 0, sizeof *w);
  w->batch = 32;
  w->capacity = 1u << 20;
  w->fanout = 16;
  w->algo = RD_FPGA_NO_LEARNER;
  w->double_dqn = 1;
  w->precision = RD_FPGA_FP32;
  w->optimizer = RD_FPGA_ADAM;
}

static int is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

static uint32_t log2u(uint64_t x) { /* x a power of two */
  uint32_t l = 0;
  while (x > 1) x >>= 1, l++;
  return l;
}

static uint64_t pow2floor(uint64_t x) { /* x >= 1 */
  uint64_t p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* J, the replicated levels of S pipelines at fanout K: the first level
 * with K^J >= S (kernels/rmm.h RMM_J). */
static uint32_t replicated_levels(uint64_t K, uint64_t S) {
  uint32_t J = 0;
  for (uint64_t full = 1; full < S; full *= K) J++;
  return J;
}

int rd_fpga_workload_validate(const rd_fpga_workload_t *w, rd_error_t *err) {
  if (w == NULL) return rd_error_set(err, RD_EINVAL, "workload is NULL");
  if (w->batch < 1 || w->batch > RD_FPGA_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "batch %u is outside [1, %u]", w->batch,
                        RD_FPGA_MAX_BATCH);
  if (w->capacity < 2 || w->capacity > RD_FPGA_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "capacity %u is outside [2, %u]", w->capacity,
                        RD_FPGA_MAX_CAPACITY);
  if (w->fanout < 2 || w->fanout > 64 || !is_pow2(w->fanout))
    return rd_error_set(err, RD_EINVAL, "fanout %u is not a power of two in [2, 64]", w->fanout);
  if (w->leaf_bits > 64)
    return rd_error_set(err, RD_EINVAL, "leaf_bits %u is above 64", w->leaf_bits);
  if (w->rmm_s != 0 && (!is_pow2(w->rmm_s) || w->rmm_s > RD_FPGA_MAX_S || w->rmm_s > w->capacity))
    return rd_error_set(err, RD_EINVAL, "rmm_s %u is not a power of two in [1, min(%u, capacity)]",
                        w->rmm_s, RD_FPGA_MAX_S);
  if (w->rmm_ports_fixed) {
    if (w->rmm_s == 0)
      return rd_error_set(err, RD_EINVAL, "rmm_ports_fixed needs a fixed rmm_s");
    const uint32_t J = replicated_levels(w->fanout, w->rmm_s);
    const uint32_t all = J ? (uint32_t)((UINT64_C(1) << J) - 1) : 0;
    const uint32_t r = w->rmm_port_regs, b = w->rmm_port_banked;
    if ((r & b) != 0 || ((r | b) & ~all) != 0 || ((r | b) != 0 && (r | b) != all))
      return rd_error_set(err, RD_EINVAL,
                          "rmm ports regs 0x%x banked 0x%x: with S=%u, K=%u the replicated "
                          "levels are 1..%u; the masks must name each once (0x%x together) "
                          "or both be 0", r, b, w->rmm_s, w->fanout, J, all);
  } else if (w->rmm_port_regs || w->rmm_port_banked) {
    return rd_error_set(err, RD_EINVAL, "rmm port masks are set but rmm_ports_fixed is 0");
  }
  if ((unsigned)w->precision > RD_FPGA_FX16)
    return rd_error_set(err, RD_EINVAL, "precision %d is not fp32, fx32 or fx16", (int)w->precision);
  if ((unsigned)w->optimizer > RD_FPGA_SGD)
    return rd_error_set(err, RD_EINVAL, "optimizer %d is not Adam or SGD", (int)w->optimizer);
  if (w->clock_mhz > 2000)
    return rd_error_set(err, RD_EINVAL, "clock_mhz %u is above 2000", w->clock_mhz);
  if (w->learner_slrs > RD_FPGA_MAX_SLRS)
    return rd_error_set(err, RD_EINVAL, "learner_slrs %u is above %d", w->learner_slrs,
                        RD_FPGA_MAX_SLRS);
  rd_error_t e2;
  switch (w->algo) {
  case RD_FPGA_NO_LEARNER:
    return RD_OK;
  case RD_FPGA_DQN:
    if (rd_nn_spec_validate(&w->net[0], &e2) != RD_OK)
      return rd_error_set(err, RD_EINVAL, "DQN network: %s", e2.msg);
    return RD_OK;
  case RD_FPGA_DDPG: {
    const rd_nn_spec_t *a = &w->net[0], *c = &w->net[1];
    if (rd_nn_spec_validate(a, &e2) != RD_OK)
      return rd_error_set(err, RD_EINVAL, "DDPG actor: %s", e2.msg);
    if (rd_nn_spec_validate(c, &e2) != RD_OK)
      return rd_error_set(err, RD_EINVAL, "DDPG critic: %s", e2.msg);
    uint64_t want = (uint64_t)a->sizes[0] + a->sizes[a->n_layers];
    if (c->sizes[0] != want)
      return rd_error_set(err, RD_EINVAL, "DDPG critic input %u is not obs + action = %" PRIu64,
                          c->sizes[0], want);
    if (c->sizes[c->n_layers] != 1)
      return rd_error_set(err, RD_EINVAL, "DDPG critic output %u is not 1",
                          c->sizes[c->n_layers]);
    if (a->n_layers + c->n_layers > 2 * RD_NN_MAX_LAYERS)
      return rd_error_set(err, RD_EINVAL, "DDPG networks have too many layers");
    return RD_OK;
  }
  }
  return rd_error_set(err, RD_EINVAL, "algo %d is not none, DQN or DDPG", (int)w->algo);
}

static uint32_t clock_of(const rd_fpga_part_t *p, const rd_fpga_workload_t *w) {
  return w->clock_mhz ? w->clock_mhz : p->clock_mhz;
}

/* Usable resources of k SLRs. */
static rd_fpga_res_t avail_of(const rd_fpga_part_t *p, uint32_t k) {
  rd_fpga_res_t a;
  a.dsp = p->per_slr.dsp * k * p->usable_pct / 100;
  a.lut = p->per_slr.lut * k * p->usable_pct / 100;
  a.ff = p->per_slr.ff * k * p->usable_pct / 100;
  a.bram36 = p->per_slr.bram36 * k * p->usable_pct / 100;
  a.uram = p->per_slr.uram * k * p->usable_pct / 100;
  return a;
}

/* ------------------------------------------------------------------ */
/* SRAM banks                                                           */
/* ------------------------------------------------------------------ */

/* A group of count identical banks, each words deep and bits wide. */
typedef struct {
  uint64_t count, words;
  uint32_t bits;
} bank_group_t;

#define MAX_GROUPS (2 * RD_FPGA_MAX_TUS + 8)

typedef struct {
  bank_group_t g[MAX_GROUPS];
  size_t n;
} banks_t;

static void banks_add(banks_t *b, uint64_t count, uint64_t words, uint32_t bits) {
  if (count == 0 || words == 0) return;
  /* MAX_GROUPS bounds what the models add: 2 per TU plus the WU's state. */
  b->g[b->n++] = (bank_group_t){count, words, bits};
}

/* BRAM18 halves one bank needs. RAMB18E2 is 512x36, 1Kx18, 2Kx9, 4Kx4,
 * 8Kx2 or 16Kx1 (UG573); a word wider than one configuration is split
 * into slices side by side, as synthesis does: as many 36-bit slices as
 * fit and the remainder in the narrowest configuration that holds it
 * (43 bits: 512x36 + 2Kx9, not 2 x 512x36), or all in one configuration
 * when that is cheaper. */
static uint64_t bram18_per_bank(uint64_t words, uint32_t bits) {
  static const struct { uint32_t width, depth; } CFG[] = {
      {1, 16384}, {2, 8192}, {4, 4096}, {9, 2048}, {18, 1024}, {36, 512}};
  const size_t n_cfg = sizeof CFG / sizeof CFG[0];
  uint64_t best = UINT64_MAX;
  for (size_t i = 0; i < n_cfg; i++) {
    uint64_t b = ceil_div(bits, CFG[i].width) * ceil_div(words, CFG[i].depth);
    if (b < best) best = b;
  }
  uint64_t split = (bits / 36) * ceil_div(words, 512);
  uint32_t rem = bits % 36;
  if (rem) {
    size_t i = 0;
    while (CFG[i].width < rem) i++;
    split += ceil_div(words, CFG[i].depth);
  }
  return split < best ? split : best;
}

/* URAM288 blocks one bank needs: 4K rows of 72 bits (UG573), as many
 * whole words per row as fit (a level's nodes are read one per cycle, so
 * packing siblings into a row costs nothing), wider words across blocks. */
static uint64_t uram_per_bank(uint64_t words, uint32_t bits) {
  if (bits <= 72) return ceil_div(ceil_div(words, 72 / bits), 4096);
  return ceil_div(bits, 72) * ceil_div(words, 4096);
}

static int cmp_groups(const void *a, const void *b) {
  const bank_group_t *x = a, *y = b;
  uint64_t bx = x->words * x->bits, by = y->words * y->bits;
  return bx < by ? 1 : bx > by ? -1 : 0;
}

/* Place the banks in avail; add the block RAMs, UltraRAMs and LUTRAM LUTs
 * to *used. Returns 0 if they do not fit (used then holds what the
 * placement wanted, for the error message). Largest banks first, so
 * UltraRAM goes to the banks that fill it. */
static int place_banks(banks_t *b, const rd_fpga_res_t *avail, rd_fpga_res_t *used) {
  qsort(b->g, b->n, sizeof b->g[0], cmp_groups);
  uint64_t b18 = 0, uram = 0, lut = 0;
  const uint64_t b18_cap = 2 * avail->bram36, uram_cap = avail->uram;
  int ok = 1;
  for (size_t i = 0; i < b->n; i++) {
    const bank_group_t *g = &b->g[i];
    if (g->words <= RD_FPGA_LUTRAM_MAX_WORDS) {
      /* RAM64X1D: two LUTs per bit of a 64-deep dual-port column. */
      lut += g->count * 2 * g->bits;
      continue;
    }
    uint64_t per18 = bram18_per_bank(g->words, g->bits);
    uint64_t peru = uram_per_bank(g->words, g->bits);
    uint64_t free_u = uram < uram_cap ? (uram_cap - uram) / peru : 0; /* banks URAM can take */
    uint64_t in_uram = 0;
    if (per18 >= RD_FPGA_URAM_MIN_BRAM18) in_uram = g->count < free_u ? g->count : free_u;
    uint64_t rest = g->count - in_uram;
    uint64_t free18 = b18 < b18_cap ? (b18_cap - b18) / per18 : 0;
    if (rest > free18) { /* block RAM is full: spill to UltraRAM, if any is left */
      uint64_t spill = rest - free18;
      if (spill > free_u - in_uram) ok = 0;
      in_uram += spill;
      rest -= spill;
    }
    uram += in_uram * peru;
    b18 += rest * per18;
  }
  used->bram36 += ceil_div(b18, 2);
  used->uram += uram;
  used->lut += lut;
  return ok && used->bram36 <= avail->bram36 && used->uram <= avail->uram;
}

/* Which resource of used exceeds avail, NULL if none. SRAM is judged by
 * the placement, which knows about granularity. */
static const char *over(const rd_fpga_res_t *used, const rd_fpga_res_t *avail, int sram_ok) {
  if (used->dsp > avail->dsp) return "dsp";
  if (used->lut > avail->lut) return "lut";
  if (used->ff > avail->ff) return "ff";
  if (!sram_ok) return "sram";
  return NULL;
}

/* "needs 2560 DSPs, has 2052" and the like, for error messages. */
static void need_msg(const char *what, const rd_fpga_res_t *u, const rd_fpga_res_t *a, char *buf,
                     size_t cap) {
  if (strcmp(what, "dsp") == 0)
    snprintf(buf, cap, "%" PRIu64 " DSPs, has %" PRIu64, u->dsp, a->dsp);
  else if (strcmp(what, "lut") == 0)
    snprintf(buf, cap, "%" PRIu64 " LUTs, has %" PRIu64, u->lut, a->lut);
  else if (strcmp(what, "ff") == 0)
    snprintf(buf, cap, "%" PRIu64 " FFs, has %" PRIu64, u->ff, a->ff);
  else
    snprintf(buf, cap, "%" PRIu64 " BRAM36 + %" PRIu64 " URAM of on-chip SRAM, has %" PRIu64
             " + %" PRIu64, u->bram36, u->uram, a->bram36, a->uram);
}

/* ------------------------------------------------------------------ */
/* RMM: the sum tree (papers/001 §IV-C4, §VI-A2)                        */
/* ------------------------------------------------------------------ */

typedef struct {
  uint32_t H, logk, K;
  uint32_t width[RD_FPGA_MAX_LEVELS + 1];
  uint64_t nodes[RD_FPGA_MAX_LEVELS + 1];
  uint32_t alu_bits;
} tree_t;

/* The banks of S pipelines, those of backends/fpga/kernels/rmm.h: levels
 * 1..J, J the first level with K^J >= S, are replicated in every pipeline
 * (papers/001 §IV-C4: the first log_K S levels are broadcast; picking a
 * child at level J needs all K siblings), each copy holding whole sibling
 * blocks (nodes_{h-1} K words); below J pipeline q owns C = ceil(nodes_J /
 * S) level-J nodes and everything under them, min(C K^(h-J), nodes_{h-1} K)
 * words per bank. Fills bank_words[0..H]; returns J (<= H, as S <= N). */
static uint32_t rmm_layout(const tree_t *t, uint64_t S, uint64_t *bank_words) {
  const uint32_t J = replicated_levels(t->K, S);
  const uint64_t C = ceil_div(t->nodes[J], S);
  uint64_t span = C; /* C K^(h-J) while h > J */
  bank_words[0] = 1;
  for (uint32_t h = 1; h <= t->H; h++) {
    const uint64_t blocked = t->nodes[h - 1] * t->K;
    if (h <= J) {
      bank_words[h] = blocked;
    } else {
      span *= t->K;
      if (span > blocked) span = blocked; /* stays capped below: blocked grows by <= K */
      bank_words[h] = span;
    }
  }
  return J;
}

static uint32_t bit_length(uint64_t x) { return x ? 64 - (uint32_t)__builtin_clzll(x) : 0; }

/* LUT6s of an AND of n inputs: one takes 6, each further one 5 more. */
static uint64_t and_luts(uint32_t n) { return n <= 6 ? 1 : 1 + ceil_div(n - 6, 5); }

/* Resources of S pipelines whose replicated levels 1..J take their deltas
 * as port[h] says (model.h, "Update ports of the replicated levels");
 * returns the exceeded resource or NULL. */
static const char *rmm_design(const tree_t *t, uint64_t S, uint32_t J,
                              const uint64_t *bank_words, const rd_fpga_port_t *port,
                              const rd_fpga_res_t *avail, rd_fpga_res_t *used) {
  memset(used, 0, sizeof *used);
  banks_t b;
  b.n = 0;
  uint64_t dsp_per_pipe = 0;
  for (uint32_t h = 1; h <= t->H; h++) {
    /* One sampler and one updater stage per level, one DSP48 adder each
     * (two or more when the level is wider than the DSP's ALU). */
    dsp_per_pipe += 2 * ceil_div(t->width[h], t->alu_bits);
    const uint64_t words = bank_words[h], W = t->width[h];
    switch (h <= J ? port[h] : RD_FPGA_PORT_NONE) {
    case RD_FPGA_PORT_REGS:
      /* Flip-flops instead of the replicas' banks; per word S - 1 shared
       * adders combine the cycle's deltas and S (one per replica) add
       * them; S address decoders; S lanes' w:1 read muxes. */
      used->ff += S * words * W;
      used->lut += (2 * S - 1) * words * W + S * words * and_luts(bit_length(words - 1)) +
                   S * W * ceil_div(words - 1, 3);
      break;
    case RD_FPGA_PORT_BANKED:
      /* S sub-banks per replica, and each lane's S - 1 adders (with
       * their pipeline registers) summing them on a read. */
      banks_add(&b, S * S, words, (uint32_t)W);
      used->lut += S * (S - 1) * W;
      used->ff += S * (S - 1) * W;
      break;
    default: /* a private level, or a replica with one port */
      banks_add(&b, S, words, (uint32_t)W);
      break;
    }
  }
  used->dsp = S * dsp_per_pipe;
  used->lut += S * 2 * t->H * RD_FPGA_RMM_LUT_PER_STAGE;
  used->ff += S * 2 * t->H * RD_FPGA_RMM_FF_PER_STAGE;
  int sram_ok = place_banks(&b, avail, used);
  return over(used, avail, sram_ok);
}

/* A design's share of its SLR: the sum over resources of used / usable
 * (a resource the SLR lacks is left out; a design needing it does not
 * fit anyway). */
static double rmm_cost(const rd_fpga_res_t *u, const rd_fpga_res_t *a) {
  double c = 0;
  if (a->dsp) c += (double)u->dsp / (double)a->dsp;
  if (a->lut) c += (double)u->lut / (double)a->lut;
  if (a->ff) c += (double)u->ff / (double)a->ff;
  if (a->bram36) c += (double)u->bram36 / (double)a->bram36;
  if (a->uram) c += (double)u->uram / (double)a->uram;
  return c;
}

/* Cycles of a batch of B at S (model.h): sample ceil(B/S) K + (H - 1) K,
 * update ceil(B/S) + (H - 1). With one port per replica (serial) every
 * delta of the batch crosses each replicated level's updater one per
 * cycle: B cycles where the ports take ceil(B/S). */
static void rmm_cycles_of(const tree_t *t, uint64_t B, uint64_t S, int serial, uint64_t *sample,
                          uint64_t *sample_fill, uint64_t *update, uint64_t *update_fill) {
  const uint64_t per_pipe = ceil_div(B, S);
  *sample_fill = (uint64_t)(t->H - 1) * t->K;
  *sample = per_pipe * t->K + *sample_fill;
  *update_fill = t->H - 1;
  *update = (serial ? B : per_pipe) + *update_fill;
}

/* Sample + update cycles. */
static uint64_t rmm_cycles(const tree_t *t, uint64_t B, uint64_t S, int serial) {
  uint64_t s, sf, u, uf;
  rmm_cycles_of(t, B, S, serial, &s, &sf, &u, &uf);
  return s + u;
}

enum { FIT_NONE, FIT_ONE_PORT, FIT_PORTS };

/* The RMM at one S, as rmm_fit found it. */
typedef struct {
  uint32_t J;
  uint64_t bank_words[RD_FPGA_MAX_LEVELS + 1];
  rd_fpga_port_t port[RD_FPGA_MAX_LEVELS + 1];
  rd_fpga_res_t used;          /* the design: with its ports, or (FIT_ONE_PORT) without */
  rd_fpga_res_t used_one_port; /* one port per replica */
  const char *why;             /* FIT_NONE: what one port per replica exceeds; FIT_ONE_PORT:
                                  what the cheapest design with ports exceeds */
} rmm_fit_t;

/* The RMM at S: FIT_PORTS when a design with S-delta ports on every
 * replicated level fits (the cheapest that does, over all 2^J choices of
 * registers or banked SRAM per level: the levels share one placement, so
 * they are chosen together; J <= 12 as S <= 4096 and K >= 2, and a design
 * that does not fit with one port per replica is not searched);
 * FIT_ONE_PORT when only one port per replica fits; FIT_NONE when not
 * even that does. */
_Static_assert(RD_FPGA_MAX_S <= 4096u, "rmm_fit enumerates 2^J port choices, J <= log2 S");

static int rmm_fit(const tree_t *t, uint64_t S, const rd_fpga_res_t *avail, rmm_fit_t *f) {
  memset(f, 0, sizeof *f); /* RD_FPGA_PORT_NONE */
  f->J = rmm_layout(t, S, f->bank_words);
  for (uint32_t h = 1; h <= f->J; h++) f->port[h] = RD_FPGA_PORT_ONE;
  f->why = rmm_design(t, S, f->J, f->bank_words, f->port, avail, &f->used_one_port);
  f->used = f->used_one_port;
  if (f->why != NULL) return FIT_NONE;
  if (f->J == 0) return FIT_PORTS; /* S = 1: nothing is replicated */

  rd_fpga_port_t port[RD_FPGA_MAX_LEVELS + 1];
  memcpy(port, f->port, sizeof port);
  double best = 0, cheapest = 0;
  int have_best = 0, have_cheapest = 0;
  const char *cheapest_why = NULL;
  for (uint32_t mask = 0; mask < (1u << f->J); mask++) {
    for (uint32_t h = 1; h <= f->J; h++)
      port[h] = (mask >> (h - 1)) & 1 ? RD_FPGA_PORT_BANKED : RD_FPGA_PORT_REGS;
    rd_fpga_res_t u;
    const char *why = rmm_design(t, S, f->J, f->bank_words, port, avail, &u);
    const double c = rmm_cost(&u, avail);
    if (why == NULL && (!have_best || c < best)) { /* ties: the first, more registers */
      best = c, have_best = 1;
      f->used = u;
      memcpy(f->port, port, sizeof port);
    }
    if (!have_cheapest || c < cheapest) cheapest = c, have_cheapest = 1, cheapest_why = why;
  }
  if (have_best) return FIT_PORTS;
  f->why = cheapest_why; /* not NULL: no design with ports fits */
  return FIT_ONE_PORT;
}

/* The design a kernel build names (workload.rmm_ports_fixed) at S: 1 if
 * its update is serial (one port per replica), 0 if it has ports, -1 if
 * it does not fit (f->why, f->used say why). */
static int fixed_design(const tree_t *t, uint64_t S, const rd_fpga_workload_t *w,
                        const rd_fpga_res_t *avail, rmm_fit_t *f) {
  memset(f, 0, sizeof *f);
  f->J = rmm_layout(t, S, f->bank_words);
  const int serial = f->J > 0 && (w->rmm_port_regs | w->rmm_port_banked) == 0;
  for (uint32_t h = 1; h <= f->J; h++)
    f->port[h] = serial                                ? RD_FPGA_PORT_ONE
                 : (w->rmm_port_banked >> (h - 1)) & 1 ? RD_FPGA_PORT_BANKED
                                                       : RD_FPGA_PORT_REGS;
  rd_fpga_port_t one[RD_FPGA_MAX_LEVELS + 1];
  memset(one, 0, sizeof one);
  for (uint32_t h = 1; h <= f->J; h++) one[h] = RD_FPGA_PORT_ONE;
  rmm_design(t, S, f->J, f->bank_words, one, avail, &f->used_one_port);
  f->why = rmm_design(t, S, f->J, f->bank_words, f->port, avail, &f->used);
  return f->why != NULL ? -1 : serial;
}

/* What rd_fpga_model_rmm and rd_fpga_model_learner check first, in this
 * order: the part, the workload, then somewhere to write the estimate. */
static int check_args(const rd_fpga_part_t *p, const rd_fpga_workload_t *w, const void *out,
                      rd_error_t *err) {
  int rc;
  if ((rc = rd_fpga_part_validate(p, err)) != RD_OK) return rc;
  if ((rc = rd_fpga_workload_validate(w, err)) != RD_OK) return rc;
  if (out == NULL) return rd_error_set(err, RD_EINVAL, "out is NULL");
  return RD_OK;
}

int rd_fpga_model_rmm(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                      rd_fpga_rmm_est_t *out, rd_error_t *err) {
  int rc;
  if ((rc = check_args(p, w, out, err)) != RD_OK) return rc;

  tree_t t;
  memset(&t, 0, sizeof t);
  t.K = w->fanout;
  t.logk = log2u(w->fanout);
  t.alu_bits = p->dsp_alu_bits;
  uint64_t span = 1; /* K^H */
  while (span < w->capacity) span *= t.K, t.H++;
  if (t.H > RD_FPGA_MAX_LEVELS) /* K = 2, N > 2^30 only; validate bounds N */
    return rd_error_set(err, RD_EINVAL, "tree of %u leaves is deeper than %d levels",
                        w->capacity, RD_FPGA_MAX_LEVELS);
  /* The CPU tree's largest leaf for this capacity (rd_fixed.h). */
  uint32_t leaf_bits = w->leaf_bits;
  if (leaf_bits == 0) {
    uint64_t max_leaf = ((UINT64_C(1) << 63) - 1) / w->capacity;
    leaf_bits = 64 - (uint32_t)__builtin_clzll(max_leaf);
  }
  uint64_t below = span; /* K^(H - h) */
  for (uint32_t h = 0; h <= t.H; h++) {
    t.width[h] = leaf_bits + (t.H - h) * t.logk; /* W_b = W_parent - log2 K */
    t.nodes[h] = ceil_div(w->capacity, below);
    below /= t.K;
  }

  const rd_fpga_res_t avail = avail_of(p, 1);
  uint64_t s_batch = w->batch <= t.H ? 1 : pow2floor(w->batch / t.H);
  const char *limit = "batch";
  if (s_batch > w->capacity) s_batch = pow2floor(w->capacity), limit = "capacity";
  if (s_batch > RD_FPGA_MAX_S) s_batch = RD_FPGA_MAX_S, limit = "max";
  uint64_t S = w->rmm_s ? w->rmm_s : s_batch;
  if (w->rmm_s) limit = "fixed";
  /* S halves until it fits with its update ports. On the way down, the
   * first S that fits only with one port per replica is kept as well: it
   * samples faster than the smaller S with ports but updates the batch
   * serially, and the design with the fewer sample + update cycles (the
   * RMM's time in papers/001 §VI-A3's table) wins, ties to the ports. A
   * fixed S is kept with one port per replica if that is all that fits. */
  rmm_fit_t f, serial;
  memset(&serial, 0, sizeof serial);
  const char *port_limit = NULL, *serial_limit = NULL;
  uint64_t serial_s = 0;
  int fit = FIT_PORTS;
  while (!w->rmm_ports_fixed && (fit = rmm_fit(&t, S, &avail, &f)) != FIT_PORTS) {
    if (fit == FIT_ONE_PORT && serial_s == 0) {
      serial = f;
      serial_s = S;
      serial_limit = limit;
      if (w->rmm_s) break;
    }
    if (S == 1 || w->rmm_s) { /* S = 1 replicates nothing: FIT_NONE */
      if (serial_s != 0) break;
      char need[160];
      need_msg(f.why, &f.used, &avail, need, sizeof need);
      return rd_error_set(err, RD_ERANGE,
                          "the sum tree (%u leaves, K=%u, %u levels) does not fit one SLR of %s "
                          "with S=%" PRIu64 ": needs %s", w->capacity, t.K, t.H, p->name, S, need);
    }
    S /= 2;
    limit = f.why;
    port_limit = fit == FIT_ONE_PORT ? f.why : NULL;
  }
  if (serial_s != 0 && (fit != FIT_PORTS || rmm_cycles(&t, w->batch, serial_s, 1) <
                                                 rmm_cycles(&t, w->batch, S, 0))) {
    f = serial;
    S = serial_s;
    limit = serial_limit;
    port_limit = serial.why;
    fit = FIT_ONE_PORT;
  }

  if (w->rmm_ports_fixed) { /* S is fixed as well (validated) */
    const int serial = fixed_design(&t, S, w, &avail, &f);
    if (serial < 0) {
      char need[160];
      need_msg(f.why, &f.used, &avail, need, sizeof need);
      return rd_error_set(err, RD_ERANGE,
                          "the sum tree (%u leaves, K=%u, %u levels) with S=%" PRIu64
                          " and the ports given does not fit one SLR of %s: needs %s",
                          w->capacity, t.K, t.H, S, p->name, need);
    }
    fit = serial ? FIT_ONE_PORT : FIT_PORTS;
    limit = "fixed";
    port_limit = NULL;
  }

  rd_fpga_rmm_est_t e;
  memset(&e, 0, sizeof e);
  e.levels = t.H;
  memcpy(e.width, t.width, sizeof e.width);
  memcpy(e.nodes, t.nodes, sizeof e.nodes);
  e.leaf_bits = leaf_bits;
  e.s = (uint32_t)S;
  e.s_batch = (uint32_t)s_batch;
  e.shared_levels = f.J;
  memcpy(e.bank_words, f.bank_words, sizeof e.bank_words);
  e.limit = limit;
  memcpy(e.port, f.port, sizeof e.port);
  for (uint32_t h = 1; h <= t.H; h++)
    e.banks[h] = e.port[h] == RD_FPGA_PORT_REGS     ? 0
                 : e.port[h] == RD_FPGA_PORT_BANKED ? S * S
                                                    : S;
  e.update_serial = fit == FIT_ONE_PORT;
  e.port_limit = port_limit;
  e.used_one_port = f.used_one_port;
  rmm_cycles_of(&t, w->batch, S, e.update_serial, &e.sample_cycles, &e.sample_fill_cycles,
                &e.update_cycles, &e.update_fill_cycles);
  e.clock_mhz = clock_of(p, w);
  e.sample_s = (double)e.sample_cycles / (e.clock_mhz * 1e6);
  e.update_s = (double)e.update_cycles / (e.clock_mhz * 1e6);
  e.used = f.used;
  e.avail = avail;
  *out = e;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Learner (papers/001 §IV-B3, §VI-A2; thesis 004 §4.3.2, §4.4.2.2)      */
/* ------------------------------------------------------------------ */

/* A TU as the search sees it, with what it stores. */
typedef struct {
  rd_fpga_tu_t tu;
  uint64_t weight_words; /* one weight copy (FW, BW) or accumulator (WA) */
  uint64_t act_words;    /* kept activations or FIFO words */
  int keep_acts;         /* trained network's FW: keeps its input for BW and WA */
  int wu_bank;           /* its units are the weight banks the WU writes */
} tu_plan_t;

typedef struct {
  tu_plan_t t[RD_FPGA_MAX_TUS];
  uint32_t n_tus, n;
  uint64_t tensor_size[2 * RD_NN_MAX_LAYERS]; /* trained tensors, weights + biases */
  uint32_t n_tensors;
  uint64_t min_gemm;     /* smallest FW/BW/WA multiply-adds */
  uint64_t max_macs;
  uint64_t fw_macs;      /* the chain FW TUs' multiply-adds: the most WU units there can be */
  uint32_t batch;
  precision_t prec;
  optimizer_t opt;
  rd_fpga_res_t avail;
} learner_plan_t;

static uint64_t layer_macs(const rd_nn_spec_t *s, uint32_t l) {
  return (uint64_t)s->sizes[l] * s->sizes[l + 1];
}

enum { SIDE = 0, CHAIN = 1 };
enum { NO_ACTS = 0, KEEP_ACTS = 1 };
enum { NO_WU = 0, WU_BANKS = 1 };

/* Add a FW, BW or WA TU for layer l of network s (workload.net[net]). */
static void plan_add(learner_plan_t *P, const char *prefix, rd_fpga_tu_kind_t kind,
                     const rd_nn_spec_t *s, uint32_t net, uint32_t l, uint32_t depth, int chain,
                     int keep_acts, int wu_bank) {
  static const char *KIND[] = {"FW", "LOSS", "BW", "WA"};
  tu_plan_t *x = &P->t[P->n_tus++];
  memset(x, 0, sizeof *x);
  snprintf(x->tu.label, sizeof x->tu.label, "%s%s%u", prefix, KIND[kind], l);
  x->tu.kind = kind;
  x->tu.net = net;
  x->tu.layer = l;
  x->tu.chain = (uint32_t)chain;
  x->tu.depth = depth;
  x->tu.macs = layer_macs(s, l);
  x->keep_acts = keep_acts;
  x->wu_bank = wu_bank;
  const uint64_t in = s->sizes[l], out = s->sizes[l + 1];
  switch (kind) {
  case RD_FPGA_TU_FW: /* W_l and b_l; a double-buffered input FIFO unless kept */
    x->weight_words = in * out + out;
    x->act_words = 2 * in;
    break;
  case RD_FPGA_TU_BW: /* delta_l = W_l^T delta_{l+1}: W_l without its bias */
    x->weight_words = in * out;
    x->act_words = 2 * in;
    break;
  default: /* WA: the gradient of W_l and b_l; reads the FW TU's kept input */
    x->weight_words = in * out + out;
    break;
  }
}

/* LOSS: elementwise over the values it compares (no weights, tiny FIFOs). */
static void plan_loss(learner_plan_t *P, const char *prefix, uint32_t net, uint64_t values,
                      uint32_t depth, int chain) {
  tu_plan_t *x = &P->t[P->n_tus++];
  memset(x, 0, sizeof *x);
  snprintf(x->tu.label, sizeof x->tu.label, "%sLOSS", prefix);
  x->tu.kind = RD_FPGA_TU_LOSS;
  x->tu.net = net;
  x->tu.chain = (uint32_t)chain;
  x->tu.depth = depth;
  x->tu.macs = values;
}

static void plan_tensors(learner_plan_t *P, const rd_nn_spec_t *s) {
  for (uint32_t l = 0; l < s->n_layers; l++)
    P->tensor_size[P->n_tensors++] = layer_macs(s, l) + s->sizes[l + 1];
}

static void plan_build(learner_plan_t *P, const rd_fpga_workload_t *w) {
  P->n_tus = 0;
  P->n_tensors = 0;
  if (w->algo == RD_FPGA_DQN) {
    const rd_nn_spec_t *q = &w->net[0];
    const uint32_t L = q->n_layers;
    for (uint32_t l = 0; l < L; l++)
      plan_add(P, "", RD_FPGA_TU_FW, q, 0, l, l + 1, CHAIN, KEEP_ACTS, WU_BANKS);
    plan_loss(P, "", 0, q->sizes[L], L + 1, CHAIN); /* over the Q values */
    for (uint32_t l = L - 1; l >= 1; l--)
      plan_add(P, "", RD_FPGA_TU_BW, q, 0, l, L + 1 + (L - l), CHAIN, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < L; l++)
      plan_add(P, "", RD_FPGA_TU_WA, q, 0, l, 2 * L + 1 + l, CHAIN, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < L; l++)
      plan_add(P, "t:", RD_FPGA_TU_FW, q, 0, l, l + 1, SIDE, NO_ACTS, NO_WU);
    if (w->double_dqn)
      for (uint32_t l = 0; l < L; l++)
        plan_add(P, "d:", RD_FPGA_TU_FW, q, 0, l, l + 1, SIDE, NO_ACTS, NO_WU);
    P->n = 3 * L;
    plan_tensors(P, q);
  } else {
    const rd_nn_spec_t *a = &w->net[0], *c = &w->net[1];
    const uint32_t La = a->n_layers, Lc = c->n_layers;
    /* The chain: the actor's update through the critic (papers/001: "FW
     * through L layers of policy and value networks"), then both WAs. */
    for (uint32_t l = 0; l < La; l++)
      plan_add(P, "a", RD_FPGA_TU_FW, a, 0, l, l + 1, CHAIN, KEEP_ACTS, WU_BANKS);
    for (uint32_t l = 0; l < Lc; l++)
      plan_add(P, "c", RD_FPGA_TU_FW, c, 1, l, La + l + 1, CHAIN, KEEP_ACTS, WU_BANKS);
    plan_loss(P, "", 1, 1, La + Lc + 1, CHAIN); /* -Q(s, mu(s)) */
    for (uint32_t l = Lc; l-- > 0;) /* down to the critic's input: dQ/da */
      plan_add(P, "c", RD_FPGA_TU_BW, c, 1, l, La + Lc + 1 + (Lc - l), CHAIN, NO_ACTS, NO_WU);
    for (uint32_t l = La - 1; l >= 1; l--)
      plan_add(P, "a", RD_FPGA_TU_BW, a, 0, l, La + 2 * Lc + 1 + (La - l), CHAIN, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < La; l++)
      plan_add(P, "a", RD_FPGA_TU_WA, a, 0, l, 2 * La + 2 * Lc + 1 + l, CHAIN, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < Lc; l++)
      plan_add(P, "c", RD_FPGA_TU_WA, c, 1, l, 3 * La + 2 * Lc + 1 + l, CHAIN, NO_ACTS, NO_WU);
    /* Beside it: the targets on s', the critic's TD path on (s, a) whose
     * gradient the chain's critic WA accumulates. */
    for (uint32_t l = 0; l < La; l++)
      plan_add(P, "t:a", RD_FPGA_TU_FW, a, 0, l, l + 1, SIDE, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < Lc; l++)
      plan_add(P, "t:c", RD_FPGA_TU_FW, c, 1, l, La + l + 1, SIDE, NO_ACTS, NO_WU);
    for (uint32_t l = 0; l < Lc; l++)
      plan_add(P, "c:", RD_FPGA_TU_FW, c, 1, l, La + l + 1, SIDE, KEEP_ACTS, NO_WU);
    plan_loss(P, "c:", 1, 1, La + Lc + 1, SIDE); /* the TD error */
    for (uint32_t l = Lc - 1; l >= 1; l--)
      plan_add(P, "c:", RD_FPGA_TU_BW, c, 1, l, La + Lc + 1 + (Lc - l), SIDE, NO_ACTS, NO_WU);
    P->n = 3 * (La + Lc);
    plan_tensors(P, a);
    plan_tensors(P, c);
  }
  P->min_gemm = UINT64_MAX;
  P->max_macs = 0;
  P->fw_macs = 0;
  for (uint32_t i = 0; i < P->n_tus; i++) {
    tu_plan_t *x = &P->t[i];
    /* Kept: the input vector of every sample still in the pipeline behind
     * this TU (n - depth + 1 of them) and the one arriving. */
    if (x->keep_acts) {
      const rd_nn_spec_t *s = &w->net[x->tu.net];
      x->act_words = (uint64_t)s->sizes[x->tu.layer] * (P->n - x->tu.depth + 2);
    }
    if (x->tu.kind != RD_FPGA_TU_LOSS && x->tu.macs < P->min_gemm) P->min_gemm = x->tu.macs;
    if (x->tu.macs > P->max_macs) P->max_macs = x->tu.macs;
    if (x->wu_bank) P->fw_macs += x->tu.macs;
  }
}

/* The learner at (DP, T): units, cycles, resources. Returns the exceeded
 * resource or NULL. Fills e's TUs and figures. */
static const char *learner_eval(const learner_plan_t *P, uint32_t dp, uint64_t T,
                                rd_fpga_learner_est_t *e) {
  const precision_t *pr = &P->prec;
  uint64_t units = 0, wu_units = 0, t_max = 0;
  banks_t b;
  b.n = 0;
  for (uint32_t i = 0; i < P->n_tus; i++) {
    const tu_plan_t *x = &P->t[i];
    rd_fpga_tu_t *tu = &e->tu[i];
    *tu = x->tu;
    tu->units = ceil_div(tu->macs, T);
    tu->dsp = tu->units * pr->dsp_per_mac;
    tu->cycles = ceil_div(tu->macs, tu->units);
    if (tu->cycles > t_max) t_max = tu->cycles;
    units += tu->units;
    if (x->wu_bank) wu_units += tu->units;
    if (x->weight_words)
      banks_add(&b, dp * tu->units, ceil_div(x->weight_words, tu->units),
                tu->kind == RD_FPGA_TU_WA ? pr->acc_bits : pr->bits);
    if (x->act_words) banks_add(&b, dp, x->act_words, pr->bits);
  }
  uint64_t all = 0;
  for (uint32_t j = 0; j < P->n_tensors; j++) all += P->tensor_size[j];
  if (P->opt.state_words)
    banks_add(&b, wu_units, ceil_div(all * P->opt.state_words, wu_units), pr->bits);

  e->n_tus = P->n_tus;
  e->n = P->n;
  e->dp = dp;
  e->pi = (uint32_t)ceil_div(P->batch, dp);
  e->t_target = T;
  e->f = ceil_div(P->min_gemm, T);
  e->pipeline_units = units;
  e->wu_units = wu_units;
  e->wu_dsp = wu_units * pr->dsp_per_mac;
  e->t_max = t_max;
  e->t_pipeline = ((uint64_t)e->pi + P->n - 1) * t_max;
  e->t_wu = 0;
  for (uint32_t j = 0; j < P->n_tensors; j++)
    e->t_wu += ceil_div(((uint64_t)dp - 1 + P->opt.ops_per_weight) * P->tensor_size[j], wu_units);
  e->cycles = e->t_pipeline + e->t_wu;

  memset(&e->used, 0, sizeof e->used);
  e->used.dsp = (dp * units + wu_units) * pr->dsp_per_mac;
  e->used.lut = e->used.dsp * RD_FPGA_LEARNER_LUT_PER_DSP;
  e->used.ff = e->used.dsp * RD_FPGA_LEARNER_FF_PER_DSP;
  int sram_ok = place_banks(&b, &P->avail, &e->used);
  return over(&e->used, &P->avail, sram_ok);
}

int rd_fpga_model_learner(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                          rd_fpga_learner_est_t *out, rd_error_t *err) {
  int rc;
  if ((rc = check_args(p, w, out, err)) != RD_OK) return rc;
  if (w->algo == RD_FPGA_NO_LEARNER)
    return rd_error_set(err, RD_EINVAL, "the workload has no learner (algo none)");
  const uint32_t slrs = w->learner_slrs ? w->learner_slrs : p->slrs - 1;
  if (slrs == 0)
    return rd_error_set(err, RD_EINVAL, "part %s has one SLR, which the RMM takes; set "
                        "learner_slrs = 1 to model the learner alone", p->name);
  if (slrs > p->slrs)
    return rd_error_set(err, RD_EINVAL, "learner_slrs %u is more than part %s's %u SLRs", slrs,
                        p->name, p->slrs);

  /* About 50 KB of stack: the plan, two estimates (best and candidate) and
   * learner_eval's bank list. */
  learner_plan_t P;
  P.batch = w->batch;
  P.prec = PRECISIONS[w->precision];
  P.opt = OPTIMIZERS[w->optimizer];
  P.avail = avail_of(p, slrs);
  plan_build(&P, w);

  rd_fpga_learner_est_t best, cur;
  memset(&best, 0, sizeof best);
  const char *why = learner_eval(&P, 1, P.max_macs, &cur);
  if (why != NULL) {
    char need[160];
    need_msg(why, &cur.used, &P.avail, need, sizeof need);
    return rd_error_set(err, RD_ERANGE,
                        "the %s learner does not fit %u SLR%s of %s even with one pipeline and "
                        "one MAC unit per stage (DP=1, f=1): needs %s",
                        w->algo == RD_FPGA_DQN ? "DQN" : "DDPG", slrs, slrs == 1 ? "" : "s",
                        p->name, need);
  }
  int have = 0;
  for (uint32_t dp = 1; dp <= w->batch; dp++) {
    /* No design with dp pipelines beats n + T_WU at its most WU units
     * (one per chain FW multiply-add), and that bound only grows with dp. */
    if (have) {
      uint64_t bound = P.n;
      for (uint32_t j = 0; j < P.n_tensors; j++)
        bound += ceil_div(((uint64_t)dp - 1 + P.opt.ops_per_weight) * P.tensor_size[j], P.fw_macs);
      if (bound >= best.cycles) break;
    }
    if (learner_eval(&P, dp, P.max_macs, &cur) != NULL) break; /* more pipelines fit no better */
    /* Smallest T that fits: resources only shrink as T grows. */
    uint64_t lo = 1, hi = P.max_macs;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (learner_eval(&P, dp, mid, &cur) == NULL) hi = mid;
      else lo = mid + 1;
    }
    learner_eval(&P, dp, lo, &cur);
    if (!have || cur.cycles < best.cycles) {
      best = cur;
      const char *l = lo == 1 ? "stage" : learner_eval(&P, dp, lo - 1, &cur);
      best.limit = l ? l : "stage";
      have = 1;
    }
  }
  /* The same cycles with fewer resources: the largest T that keeps them
   * (cycles only grow with T; the fit check keeps the answer feasible
   * should a bank's move to LUTRAM ever break the monotony). */
  const char *limit = best.limit;
  uint64_t lo = best.t_target, hi = P.max_macs;
  const uint64_t target = best.cycles;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (learner_eval(&P, best.dp, mid, &cur) == NULL && cur.cycles == target) lo = mid;
    else hi = mid - 1;
  }
  learner_eval(&P, best.dp, lo, &best);
  best.limit = limit;
  best.clock_mhz = clock_of(p, w);
  best.step_s = (double)best.cycles / (best.clock_mhz * 1e6);
  best.avail = P.avail;
  best.slrs = slrs;
  *out = best;
  return RD_OK;
}

int rd_fpga_model_estimate(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                           rd_fpga_estimate_t *out, rd_error_t *err) {
  int rc;
  if (out == NULL) return rd_error_set(err, RD_EINVAL, "out is NULL");
  rd_fpga_rmm_est_t rmm;
  if ((rc = rd_fpga_model_rmm(p, w, &rmm, err)) != RD_OK) return rc;
  if (w->algo == RD_FPGA_NO_LEARNER) {
    out->rmm = rmm;
    out->has_learner = 0;
    memset(&out->learner, 0, sizeof out->learner);
    return RD_OK;
  }
  if (w->learner_slrs >= p->slrs)
    return rd_error_set(err, RD_EINVAL, "learner_slrs %u leaves no SLR of part %s for the RMM; "
                        "model them separately", w->learner_slrs, p->name);
  if ((rc = rd_fpga_model_learner(p, w, &out->learner, err)) != RD_OK) return rc;
  out->rmm = rmm;
  out->has_learner = 1;
  return RD_OK;
}
