/* xclbin_gen.c - the kernels' argument lists and the metadata-only xclbin
 * writer (see xclbin_gen.h). Layout from XRT's <xclbin.h> (struct axlf and its
 * section structures); every section starts 8-byte aligned. */
#include "xclbin_gen.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xclbin.h>

#include "rd_bytes.h"

static const rd_fpga_karg_t RMM_ARGS[] = {
    {"op", 0, "uint", NULL, 0},
    {"n", 0, "uint", NULL, 0},
    {"first", 0, "uint", NULL, 0},
    {"u64_in", 1, "ulong*", "M_AXI_GMEM0", 0},
    {"pos_in", 1, "uint*", "M_AXI_GMEM1", 0},
    {"leaf_out", 1, "uint*", "M_AXI_GMEM1", 0},
    {"info_out", 1, "ulong*", "M_AXI_GMEM0", 0},
};

const rd_fpga_kernel_desc_t rd_fpga_rmm_kernel_desc = {"rmm_kernel", 7, RMM_ARGS};

static const rd_fpga_karg_t LRN_ARGS[] = {
    {"desc", 1, "uint*", "M_AXI_GMEM0", 0},
    {"hp", 1, "double*", "M_AXI_GMEM0", 0},
    {"step", 0, "ulong", NULL, 1},
    {"n", 0, "uint", NULL, 0},
    {"params", 1, "float*", "M_AXI_GMEM1", 0},
    {"target", 1, "float*", "M_AXI_GMEM1", 0},
    {"adam_m", 1, "float*", "M_AXI_GMEM2", 0},
    {"adam_v", 1, "float*", "M_AXI_GMEM2", 0},
    {"ws", 1, "float*", "M_AXI_GMEM3", 0},
    {"obs", 1, "float*", "M_AXI_GMEM4", 0},
    {"action_i", 1, "int*", "M_AXI_GMEM4", 0},
    {"action_f", 1, "float*", "M_AXI_GMEM4", 0},
    {"reward", 1, "float*", "M_AXI_GMEM4", 0},
    {"discount", 1, "float*", "M_AXI_GMEM4", 0},
    {"next_obs", 1, "float*", "M_AXI_GMEM4", 0},
    {"weights", 1, "float*", "M_AXI_GMEM4", 0},
    {"td_abs", 1, "float*", "M_AXI_GMEM0", 0},
    {"stats", 1, "double*", "M_AXI_GMEM0", 0},
};

const rd_fpga_kernel_desc_t rd_fpga_learner_kernel_desc = {
    "lrn_train_step", sizeof LRN_ARGS / sizeof LRN_ARGS[0], LRN_ARGS};

uint32_t rd_fpga_karg_offset(const rd_fpga_kernel_desc_t *k, uint32_t i) {
  uint32_t off = 0x10;
  for (uint32_t j = 0; j < i && j < k->n_args; j++)
    off += k->args[j].pointer || k->args[j].wide ? 12 : 8;
  return off;
}

#define CU_BASE 0x1800000ull
#define CU_STRIDE 0x10000ull
#define MAX_KERNELS 16
#define MAX_CONNECTIONS 256

static void putf(rd_bytes_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(rd_bytes_t *b, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line) {
    b->oom = 1;
    return;
  }
  rd_bytes_put(b, line, (size_t)n);
}

static void align8(rd_bytes_t *b) {
  static const char zero[8] = {0};
  if (b->len % 8) rd_bytes_put(b, zero, 8 - b->len % 8);
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

static int valid_ident(const char *s) {
  if (!s || !*s || strlen(s) > 40) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return 0;
  return 1;
}

/* The EMBEDDED_METADATA XML, in the shape v++ writes it. */
static void metadata_xml(rd_bytes_t *x, const rd_fpga_kernel_desc_t *const *k, size_t n) {
  putf(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<project name=\"replayd\">\n"
          "  <platform vendor=\"xilinx\" boardid=\"replayd_noop\" name=\"replayd_noop\" "
          "featureRomTime=\"0\">\n    <version major=\"1\" minor=\"0\"/>\n"
          "    <device name=\"fpga0\" fpgaDevice=\"replayd_noop\" addrWidth=\"0\">\n"
          "      <core name=\"OCL_REGION_0\" target=\"bitstream\" type=\"clc_region\" "
          "clockFreq=\"0MHz\" numComputeUnits=\"%zu\">\n", n);
  for (size_t i = 0; i < n; i++) {
    putf(x, "        <kernel name=\"%s\" language=\"c\" vlnv=\"replayd:hls:%s:1.0\" "
            "attributes=\"\" preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" "
            "interrupt=\"true\" hwControlProtocol=\"ap_ctrl_hs\">\n", k[i]->name, k[i]->name);
    putf(x, "          <port name=\"S_AXI_CONTROL\" mode=\"slave\" range=\"0x1000\" "
            "dataWidth=\"32\" portType=\"addressable\" base=\"0x0\"/>\n");
    /* One master port per distinct bundle. */
    for (uint32_t a = 0; a < k[i]->n_args; a++) {
      const rd_fpga_karg_t *g = &k[i]->args[a];
      if (!g->pointer) continue;
      int seen = 0;
      for (uint32_t b = 0; b < a; b++)
        if (k[i]->args[b].pointer && strcmp(k[i]->args[b].port, g->port) == 0) seen = 1;
      if (!seen)
        putf(x, "          <port name=\"%s\" mode=\"master\" range=\"0xFFFFFFFFFFFFFFFF\" "
                "dataWidth=\"64\" portType=\"addressable\" base=\"0x0\"/>\n", g->port);
    }
    for (uint32_t a = 0; a < k[i]->n_args; a++) {
      const rd_fpga_karg_t *g = &k[i]->args[a];
      putf(x, "          <arg name=\"%s\" addressQualifier=\"%d\" id=\"%u\" port=\"%s\" "
              "size=\"0x%x\" offset=\"0x%x\" hostOffset=\"0x0\" hostSize=\"0x%x\" "
              "type=\"%s\"/>\n", g->name, g->pointer ? 1 : 0, a,
           g->pointer ? g->port : "S_AXI_CONTROL", g->pointer || g->wide ? 8u : 4u,
           rd_fpga_karg_offset(k[i], a), g->pointer || g->wide ? 8u : 4u, g->type);
    }
    putf(x, "          <instance name=\"%s_1\">\n            <addrRemap base=\"0x%llx\" "
            "range=\"0x%llx\" port=\"S_AXI_CONTROL\"/>\n          </instance>\n"
            "        </kernel>\n", k[i]->name, CU_BASE + i * CU_STRIDE, CU_STRIDE);
  }
  putf(x, "      </core>\n    </device>\n  </platform>\n</project>\n");
}

int rd_fpga_xclbin_write(const char *path, const rd_fpga_kernel_desc_t *const *k, size_t n,
                         rd_error_t *err) {
  if (!path || !k || n == 0 || n > MAX_KERNELS)
    return rd_error_set(err, RD_EINVAL, "xclbin: need 1..%d kernel descriptions and a path",
                        MAX_KERNELS);
  size_t n_conn = 0;
  for (size_t i = 0; i < n; i++) {
    if (!k[i] || !valid_ident(k[i]->name) || k[i]->n_args == 0 || !k[i]->args)
      return rd_error_set(err, RD_EINVAL, "xclbin: kernel %zu has no valid name or arguments", i);
    for (uint32_t a = 0; a < k[i]->n_args; a++) {
      const rd_fpga_karg_t *g = &k[i]->args[a];
      if (!valid_ident(g->name) || !g->type || (g->pointer && !valid_ident(g->port)))
        return rd_error_set(err, RD_EINVAL, "xclbin: kernel %s argument %u is malformed",
                            k[i]->name, a);
      n_conn += g->pointer != 0;
    }
  }
  if (n_conn == 0 || n_conn > MAX_CONNECTIONS)
    return rd_error_set(err, RD_EINVAL, "xclbin: %zu pointer arguments (1..%d)", n_conn,
                        MAX_CONNECTIONS);

  /* Sections. */
  rd_bytes_t xml = {0}, mem = {0}, ip = {0}, conn = {0};
  metadata_xml(&xml, k, n);

  struct mem_topology mt;
  memset(&mt, 0, sizeof mt);
  mt.m_count = 1;
  mt.m_mem_data[0].m_type = MEM_DDR4;
  mt.m_mem_data[0].m_used = 1;
  mt.m_mem_data[0].m_size = 16ull * 1024 * 1024; /* KB: 16 GiB */
  mt.m_mem_data[0].m_base_address = 0;
  memcpy(mt.m_mem_data[0].m_tag, "bank0", 6);
  rd_bytes_put(&mem, &mt, sizeof mt);

  int32_t count = (int32_t)n;
  rd_bytes_put(&ip, &count, sizeof count);
  rd_bytes_put(&ip, "\0\0\0\0", 4); /* ip_data is 8-byte aligned */
  for (size_t i = 0; i < n; i++) {
    struct ip_data d;
    memset(&d, 0, sizeof d);
    d.m_type = IP_KERNEL;
    d.properties = (uint32_t)AP_CTRL_HS << IP_CONTROL_SHIFT;
    d.m_base_address = CU_BASE + i * CU_STRIDE;
    snprintf((char *)d.m_name, sizeof d.m_name, "%s:%s_1", k[i]->name, k[i]->name);
    rd_bytes_put(&ip, &d, sizeof d);
  }

  count = (int32_t)n_conn;
  rd_bytes_put(&conn, &count, sizeof count);
  for (size_t i = 0; i < n; i++)
    for (uint32_t a = 0; a < k[i]->n_args; a++) {
      if (!k[i]->args[a].pointer) continue;
      struct connection c = {(int32_t)a, (int32_t)i, 0};
      rd_bytes_put(&conn, &c, sizeof c);
    }

  struct {
    enum axlf_section_kind kind;
    const char *name;
    rd_bytes_t *b;
  } sec[] = {
      {MEM_TOPOLOGY, "mem_topology", &mem},
      {IP_LAYOUT, "ip_layout", &ip},
      {CONNECTIVITY, "connectivity", &conn},
      {EMBEDDED_METADATA, "metadata", &xml},
  };
  const uint32_t n_sec = sizeof sec / sizeof sec[0];

  /* Header and section table, then the sections. */
  const size_t head = sizeof(struct axlf) + (n_sec - 1) * sizeof(struct axlf_section_header);
  struct axlf *ax = calloc(1, head);
  rd_bytes_t out = {0};
  int rc = RD_OK;
  if (!ax || xml.oom || mem.oom || ip.oom || conn.oom) {
    rc = rd_error_set(err, RD_ENOMEM, "xclbin: out of memory");
    goto done;
  }
  memcpy(ax->m_magic, "xclbin2", 8);
  ax->m_signature_length = -1;
  memset(ax->reserved, 0xff, sizeof ax->reserved);
  memset(ax->m_keyBlock, 0xff, sizeof ax->m_keyBlock);
  ax->m_header.m_versionMajor = 2;
  ax->m_header.m_versionMinor = 13;
  ax->m_header.m_mode = XCLBIN_FLAT;
  snprintf((char *)ax->m_header.m_platformVBNV, sizeof ax->m_header.m_platformVBNV,
           "xilinx:replayd:noop:1.0");
  ax->m_header.m_numSections = n_sec;
  size_t off = head;
  off = (off + 7) & ~(size_t)7;
  for (uint32_t s = 0; s < n_sec; s++) {
    ax->m_sections[s].m_sectionKind = sec[s].kind;
    snprintf(ax->m_sections[s].m_sectionName, sizeof ax->m_sections[s].m_sectionName, "%s",
             sec[s].name);
    ax->m_sections[s].m_sectionOffset = off;
    ax->m_sections[s].m_sectionSize = sec[s].b->len;
    off += (sec[s].b->len + 7) & ~(size_t)7;
  }
  ax->m_header.m_length = off;
  /* A stable UUID from the content: the same kernels give the same xclbin. */
  uint64_t h1 = fnv1a(xml.p, xml.len, 0xcbf29ce484222325ull);
  uint64_t h2 = fnv1a(conn.p, conn.len, h1 ^ 0x9e3779b97f4a7c15ull);
  memcpy(ax->m_header.uuid, &h1, 8);
  memcpy(ax->m_header.uuid + 8, &h2, 8);
  ax->m_uniqueId = h1 ^ h2;

  rd_bytes_put(&out, ax, head);
  align8(&out);
  for (uint32_t s = 0; s < n_sec; s++) {
    rd_bytes_put(&out, sec[s].b->p, sec[s].b->len);
    align8(&out);
  }
  if (out.oom || out.len != off) {
    rc = rd_error_set(err, RD_ENOMEM, "xclbin: out of memory");
    goto done;
  }

  FILE *f = fopen(path, "wb");
  if (!f) {
    rc = rd_error_set(err, RD_ESTORE, "xclbin: cannot create %s: %s", path, strerror(errno));
    goto done;
  }
  int bad = fwrite(out.p, 1, out.len, f) != out.len;
  bad |= fclose(f) != 0;
  if (bad) {
    unlink(path);
    rc = rd_error_set(err, RD_ESTORE, "xclbin: cannot write %s", path);
  }
done:
  free(ax);
  free(out.p);
  free(xml.p);
  free(mem.p);
  free(ip.p);
  free(conn.p);
  return rc;
}
