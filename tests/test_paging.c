/* test_paging.c - pages of the list RPCs (daemon/rpc/paging.h): page sizes,
 * the byte budget of a page, page tokens, and the keyset listings behind
 * them (rd_registry_list_after, rd_store_list_profiles_after) under
 * registrations, deletes and imports between pages. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "paging.h"
#include "registry.h"
#include "spec_pb.h"
#include "store.h"
#include "rdt_dse.h"
#include "rdt_pb.h"
#include "rdt_unit.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Sizes                                                               */
/* ------------------------------------------------------------------ */

static void test_page_size(void **state) {
  (void)state;
  assert_int_equal(rd_page_size(0, 100, 1000), 100);
  assert_int_equal(rd_page_size(1, 100, 1000), 1);
  assert_int_equal(rd_page_size(1000, 100, 1000), 1000);
  assert_int_equal(rd_page_size(1001, 100, 1000), 1000);
  assert_int_equal(rd_page_size(UINT32_MAX, 100, 1000), 1000);
  assert_int_equal(rd_page_budget(4096), 4096 - RD_REPLY_HEADROOM);
  assert_int_equal(rd_page_budget(RD_REPLY_HEADROOM), 0);
  assert_int_equal(rd_page_budget(10), 0);
}

/* rd_pb_field_bytes is what protobuf-c packs for a string and for a
 * sub-message. */
static void test_field_bytes(void **state) {
  (void)state;
  static const size_t lens[] = {0, 1, 127, 128, 16383, 16384, 2097151, 2097152};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    char *s = malloc(lens[i] + 1);
    assert_non_null(s);
    memset(s, 'a', lens[i]);
    s[lens[i]] = '\0';
    Replayd__V1__ListWorkloadsResponse m = REPLAYD__V1__LIST_WORKLOADS_RESPONSE__INIT;
    m.next_page_token = s;
    /* proto3 leaves an empty string out; a non-empty one is a field. */
    if (lens[i] > 0)
      assert_int_equal(replayd__v1__list_workloads_response__get_packed_size(&m),
                       rd_pb_field_bytes(lens[i]));
    free(s);
  }
  Replayd__V1__Profile p = REPLAYD__V1__PROFILE__INIT, *pp = &p;
  p.device = "cpu-0011223344556677";
  p.network = "dqn:4-64-64-2";
  p.latency_s = 1e-3;
  Replayd__V1__ListProfilesResponse m = REPLAYD__V1__LIST_PROFILES_RESPONSE__INIT;
  m.n_profiles = 1;
  m.profiles = &pp;
  assert_int_equal(replayd__v1__list_profiles_response__get_packed_size(&m),
                   rd_pb_field_bytes(replayd__v1__profile__get_packed_size(&p)));
}

static void test_page_take(void **state) {
  (void)state;
  rd_page_fill_t f = {100, 0, 0};
  assert_int_equal(rd_page_take(&f, 40, 10), RD_OK);
  assert_int_equal(rd_page_take(&f, 40, 10), RD_OK);
  assert_int_equal(f.used, 80);
  /* 80 + 15 + its token 10 > 100: the page ends before it. */
  assert_int_equal(rd_page_take(&f, 15, 10), RD_ETOOBIG);
  assert_int_equal(f.used, 80);
  assert_int_equal(f.items, 2);
  /* Exactly the budget fits. */
  assert_int_equal(rd_page_take(&f, 15, 5), RD_OK);
  assert_int_equal(f.used, 95);
  assert_int_equal(f.items, 3);
  assert_int_equal(rd_page_take(&f, 1, 5), RD_ETOOBIG);

  /* A first item that alone does not fit: nothing taken. */
  rd_page_fill_t g = {100, 30, 0};
  assert_int_equal(rd_page_take(&g, 71, 0), RD_ETOOBIG);
  assert_int_equal(rd_page_take(&g, 60, 11), RD_ETOOBIG);
  assert_int_equal(g.items, 0);
  assert_int_equal(g.used, 30);
  assert_int_equal(rd_page_take(&g, SIZE_MAX, 0), RD_ETOOBIG);
  assert_int_equal(rd_page_take(&g, 0, SIZE_MAX), RD_ETOOBIG);
  /* Other fields already over the budget: nothing fits. */
  rd_page_fill_t h = {100, 101, 0};
  assert_int_equal(rd_page_take(&h, 0, 0), RD_ETOOBIG);
}

/* ------------------------------------------------------------------ */
/* Tokens                                                              */
/* ------------------------------------------------------------------ */

#define ID_A "0123456789abcdef0123456789abcdef"

static void test_workload_tokens(void **state) {
  (void)state;
  char tok[RD_PAGE_TOKEN_MAX + 1], id[RD_WORKLOAD_ID_LEN + 1];
  rd_page_token_workload(ID_A, tok);
  assert_int_equal(rd_page_token_parse_workload(tok, id, NULL), RD_OK);
  assert_string_equal(id, ID_A);
  assert_int_equal(rd_page_token_parse_workload("", id, NULL), RD_OK);
  assert_string_equal(id, "");
  assert_int_equal(rd_page_token_parse_workload(NULL, id, NULL), RD_OK);
  assert_string_equal(id, "");

  char longtok[2100];
  memset(longtok, 'a', sizeof longtok - 1);
  longtok[sizeof longtok - 1] = '\0';
  memcpy(longtok, "w1.", 3);
  const char *bad[] = {
      "x", "w1.", "w1." ID_A "0", "w1.0123456789abcdef0123456789abcde", /* 33, 31 digits */
      "w1.0123456789ABCDEF0123456789abcdef", "w2." ID_A, "W1." ID_A, "w1," ID_A,
      "w1.0123456789abcdef0123456789abcdeg", " w1." ID_A, "p1.00", longtok,
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rd_error_t err;
    rd_error_clear(&err);
    strcpy(id, "unchanged");
    assert_int_equal(rd_page_token_parse_workload(bad[i], id, &err), RD_EINVAL);
    assert_string_equal(id, "");
    assert_non_null(strstr(err.msg, "page_token"));
  }
}

static rd_profile_t profile(const char *fp, rd_primitive_t prim, uint32_t threads,
                            uint32_t batch, const char *net, const char *build) {
  rd_profile_t p = rdt_profile(fp, prim, threads, batch, net[0] ? "dqn" : "none", net, build,
                               1e-6 * (1 + batch));
  p.source = RD_PROFILE_IMPORTED;
  return p;
}

static int same_key(const rd_profile_t *a, const rd_profile_t *b) {
  return strcmp(a->device_fp, b->device_fp) == 0 && a->primitive == b->primitive &&
         a->threads == b->threads && rd_profile_key_equal(&a->shape, &b->shape) &&
         strcmp(a->build, b->build) == 0;
}

/* The page of up to `size` profiles after *cursor (none yet: *has 0) into
 * *v (the caller frees it); the cursor moves to its last row. */
static size_t next_page(rd_store_t *st, rd_profile_t *cursor, int *has, size_t size,
                        rd_profile_t **v) {
  size_t k;
  assert_int_equal(rd_store_list_profiles_after(st, *has ? cursor : NULL, size, v, &k, NULL),
                   RD_OK);
  if (k > 0) {
    *cursor = (*v)[k - 1];
    *has = 1;
  }
  return k;
}

/* Hex-encode a Profile message as a "p1." token would carry it. */
static void forge(const Replayd__V1__Profile *m, char *out) {
  uint8_t buf[2048];
  size_t n = replayd__v1__profile__pack(m, buf);
  strcpy(out, "p1.");
  for (size_t i = 0; i < n; i++) sprintf(out + 3 + 2 * i, "%02x", buf[i]);
}

static void test_profile_tokens(void **state) {
  (void)state;
  char tok[RD_PAGE_TOKEN_MAX + 1];
  rd_profile_t key;
  int has = 1;
  assert_int_equal(rd_page_token_parse_profile("", &key, &has, NULL), RD_OK);
  assert_false(has);

  /* Round trips, the longest key included (it fits RD_PAGE_TOKEN_MAX). */
  char net[RD_PROFILE_NETWORK_MAX], build[RD_PROFILE_BUILD_MAX];
  memset(net, 0, sizeof net);
  strcpy(net, "dqn:65536");
  while (strlen(net) + 6 < sizeof net) strcat(net, "-65536");
  memset(build, '~', sizeof build - 1);
  build[sizeof build - 1] = '\0';
  rd_profile_t ps[] = {
      profile("cpu-0011223344556677", RD_PRIM_SAMPLE, 1, 32, "dqn:4-64-2", "0.1.0 x"),
      profile("gpu-ffeeddccbbaa9988", RD_PRIM_PASS, 256, 65536, "", "b"),
      profile("fpga-00000000000000ff", RD_PRIM_TRAIN, UINT32_MAX, UINT32_MAX, net, build),
  };
  ps[2].shape.capacity = UINT32_MAX;
  ps[2].shape.fanout = UINT32_MAX;
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    assert_int_equal(rd_page_token_profile(&ps[i], tok, NULL), RD_OK);
    assert_true(strlen(tok) <= RD_PAGE_TOKEN_MAX);
    assert_int_equal(strncmp(tok, "p1.", 3), 0);
    assert_int_equal(rd_page_token_parse_profile(tok, &key, &has, NULL), RD_OK);
    assert_true(has);
    assert_true(same_key(&key, &ps[i]));
    assert_true(key.latency_s == 0 && key.reps == 0); /* only the key travels */
  }

  /* Tampered and foreign tokens. */
  char good[RD_PAGE_TOKEN_MAX + 1];
  assert_int_equal(rd_page_token_profile(&ps[0], good, NULL), RD_OK);
  char upper[RD_PAGE_TOKEN_MAX + 1], odd[RD_PAGE_TOKEN_MAX + 1], cut[RD_PAGE_TOKEN_MAX + 1];
  strcpy(upper, good);
  for (char *c = upper + 3; *c; c++)
    if (*c >= 'a' && *c <= 'f') *c = (char)(*c - 'a' + 'A');
  strcpy(odd, good);
  odd[strlen(odd) - 1] = '\0';
  strcpy(cut, good);
  cut[strlen(cut) - 2] = '\0';
  Replayd__V1__Profile m = REPLAYD__V1__PROFILE__INIT;
  m.device = "cpu-0011223344556677";
  m.primitive = "sample";
  m.threads = 1;
  m.batch = 32;
  m.capacity = 100000;
  m.fanout = 16;
  m.algorithm = "dqn";
  m.network = "dqn:4-64-2";
  m.build = "0.1.0 x";
  char canonical[2 * 2048 + 4], extra[2 * 2048 + 4], prim[2 * 2048 + 4], longb[2 * 2048 + 4];
  forge(&m, canonical);
  assert_string_equal(canonical, good); /* the forge writes what the server writes */
  m.latency_s = 1.0;                    /* a field that is not part of the key */
  forge(&m, extra);
  m.latency_s = 0;
  m.primitive = "bogus";
  forge(&m, prim);
  m.primitive = "sample";
  char lb[RD_PROFILE_BUILD_MAX + 1];
  memset(lb, 'b', sizeof lb - 1);
  lb[sizeof lb - 1] = '\0';
  m.build = lb; /* one byte longer than a build can be */
  forge(&m, longb);
  char wtok[RD_PAGE_TOKEN_MAX + 1];
  rd_page_token_workload(ID_A, wtok);
  const char *bad[] = {"x", "p1.", "p1.0", "p1.zz", "p2.00", upper, odd, cut, extra, prim,
                       longb, wtok, "p1.ffffffffffffffff"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rd_error_t err;
    rd_error_clear(&err);
    has = 1;
    assert_int_equal(rd_page_token_parse_profile(bad[i], &key, &has, &err), RD_EINVAL);
    assert_false(has);
    assert_non_null(strstr(err.msg, "page_token"));
  }
}

/* ------------------------------------------------------------------ */
/* The registry's keyset listing                                       */
/* ------------------------------------------------------------------ */

static void tiny_spec(rdt_pb_spec_t *s) {
  rdt_pb_spec_init(s, "tiny", 4);
  rdt_pb_field(s, "x", REPLAYD__V1__DTYPE__FLOAT32, 0, NULL);
}

static void register_one(rd_registry_t *r, char *id_out) {
  rdt_pb_spec_t s;
  tiny_spec(&s);
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_spec_pb_register(r, &s.spec, NULL, &w, &err) != RD_OK) fail_msg("register: %s", err.msg);
  strcpy(id_out, w->id);
  rd_workload_unref(w);
}

#define MAX_W 64

typedef struct {
  char id[MAX_W * 2][RD_WORKLOAD_ID_LEN + 1];
  int live[MAX_W * 2], seen[MAX_W * 2], throughout[MAX_W * 2];
  size_t n;
} wset_t;

static int find_id(const wset_t *s, const char *id) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->id[i], id) == 0) return (int)i;
  return -1;
}

static void test_registry_pages(void **state) {
  (void)state;
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  cfg.max_workloads = MAX_W * 2;
  rd_registry_t *r = NULL;
  assert_int_equal(rd_registry_create(&r, &cfg, NULL, NULL), RD_OK);
  wset_t s;
  memset(&s, 0, sizeof s);
  for (int i = 0; i < MAX_W; i++) {
    register_one(r, s.id[s.n]);
    s.live[s.n] = s.throughout[s.n] = 1;
    s.n++;
  }

  /* Whole list in pages of 5: id order, each once. */
  rd_workload_t *w[8];
  char after[RD_WORKLOAD_ID_LEN + 1] = "";
  size_t total = 0;
  for (;;) {
    size_t k = rd_registry_list_after(r, after, w, 5);
    for (size_t i = 0; i < k; i++) {
      assert_true(strcmp(w[i]->id, after) > 0);
      strcpy(after, w[i]->id);
      rd_workload_unref(w[i]);
    }
    total += k;
    if (k < 5) break;
  }
  assert_int_equal(total, MAX_W);
  assert_int_equal(rd_registry_list_after(r, NULL, w, 0), 0);

  /* Registrations and deletes between pages of 3, the cursor's own
   * workload deleted at every other page: every workload registered
   * throughout is listed exactly once, nothing twice, in id order. */
  unsigned seed = 12345;
  after[0] = '\0';
  int page = 0;
  for (;;) {
    size_t k = rd_registry_list_after(r, after, w, 3);
    for (size_t i = 0; i < k; i++) {
      assert_true(strcmp(w[i]->id, after) > 0);
      int at = find_id(&s, w[i]->id);
      assert_true(at >= 0);
      assert_int_equal(s.seen[at], 0);
      s.seen[at] = 1;
      strcpy(after, w[i]->id);
      rd_workload_unref(w[i]);
    }
    if (k < 3) break;
    page++;
    /* Delete the cursor's workload, or another live one at random. */
    int victim = page % 2 ? find_id(&s, after) : (int)(rand_r(&seed) % s.n);
    if (s.live[victim]) {
      assert_int_equal(rd_registry_delete(r, s.id[victim], NULL), RD_OK);
      s.live[victim] = s.throughout[victim] = 0;
    }
    if (s.n < MAX_W * 2) {
      register_one(r, s.id[s.n]);
      s.live[s.n] = 1;
      s.n++;
    }
  }
  for (size_t i = 0; i < s.n; i++)
    if (s.throughout[i]) assert_int_equal(s.seen[i], 1);

  /* A cursor whose workload is gone resumes where it would sort: after
   * ids[3] and after a deleted ids[4] alike, the next page starts at ids[5]. */
  char ids[MAX_W * 2][RD_WORKLOAD_ID_LEN + 1];
  size_t n = 0;
  after[0] = '\0';
  for (size_t k; (k = rd_registry_list_after(r, after, w, 8)) > 0;)
    for (size_t i = 0; i < k; i++) {
      strcpy(ids[n++], w[i]->id);
      strcpy(after, w[i]->id);
      rd_workload_unref(w[i]);
    }
  assert_true(n > 6);
  assert_int_equal(rd_registry_delete(r, ids[4], NULL), RD_OK);
  for (int c = 3; c <= 4; c++) {
    assert_int_equal(rd_registry_list_after(r, ids[c], w, 1), 1);
    assert_string_equal(w[0]->id, ids[5]);
    rd_workload_unref(w[0]);
  }
  assert_int_equal(rd_registry_list_after(r, "ffffffffffffffffffffffffffffffff", w, 8), 0);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* The store's keyset listing                                          */
/* ------------------------------------------------------------------ */

static void put_ok(rd_store_t *st, const rd_profile_t *p) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_store_put_profile(st, p, &err) != RD_OK) fail_msg("put: %s", err.msg);
}

/* The i-th profile of a family whose keys spread over every key column,
 * distinct for i < 144. */
static rd_profile_t nth(unsigned i) {
  static const char *const fps[] = {"cpu-00000000000000aa", "cpu-00000000000000bb",
                                    "gpu-00000000000000aa"};
  static const char *const nets[] = {"dqn:4-64-2", "dqn:4-8-2", "", "dqn:8-8-2"};
  char build[32];
  snprintf(build, sizeof build, "b%u", (i / 72) % 2);
  return profile(fps[i % 3], (rd_primitive_t)((i / 3) % 3), 1 + (i / 9) % 2, 1 + (i / 18) % 3,
                 nets[(i / 54) % 4], build);
}

static void test_store_pages(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/store", rdt_root);
  rd_store_t *st = NULL;
  assert_int_equal(rd_store_open(&st, dir, NULL), RD_OK);
  for (unsigned i = 0; i < 120; i++) {
    rd_profile_t p = nth(i);
    put_ok(st, &p);
  }
  rd_profile_t *all;
  size_t n_all;
  assert_int_equal(rd_store_list_profiles(st, &all, &n_all, NULL), RD_OK);
  assert_int_equal(n_all, 120);

  /* Pages of 7 give the list's order, each row once. */
  rd_profile_t cursor;
  int has = 0;
  size_t at = 0;
  for (;;) {
    rd_profile_t *v;
    size_t k = next_page(st, &cursor, &has, 7, &v);
    for (size_t i = 0; i < k; i++) assert_true(same_key(&v[i], &all[at + i]));
    at += k;
    rd_store_free_profiles(v);
    if (k < 7) break;
  }
  assert_int_equal(at, n_all);

  /* Between pages of 5: new keys before and after the cursor, and the
   * cursor's own row replaced (INSERT OR REPLACE: deleted and stored
   * again). Every row stored throughout comes exactly once, in order. */
  int *seen = calloc(n_all, sizeof *seen);
  assert_non_null(seen);
  has = 0;
  unsigned extra = 1000;
  for (;;) {
    rd_profile_t *v;
    size_t k = next_page(st, &cursor, &has, 5, &v);
    for (size_t i = 0; i < k; i++) {
      for (size_t j = 0; j < n_all; j++)
        if (same_key(&v[i], &all[j])) seen[j]++;
    }
    rd_store_free_profiles(v);
    if (k < 5) break;
    rd_profile_t before = profile("cpu-0000000000000000", RD_PRIM_SAMPLE, 1, extra, "", "b");
    rd_profile_t later = profile("hpu-ffffffffffffffff", RD_PRIM_SAMPLE, 1, extra, "", "b");
    extra++;
    put_ok(st, &before);
    put_ok(st, &later);
    rd_profile_t again = cursor;
    again.latency_s *= 2;
    put_ok(st, &again);
  }
  for (size_t j = 0; j < n_all; j++) assert_int_equal(seen[j], 1);
  free(seen);

  /* Cleared between pages: the next page is empty. */
  rd_profile_t *v;
  size_t k;
  assert_int_equal(rd_store_list_profiles_after(st, NULL, 3, &v, &k, NULL), RD_OK);
  assert_int_equal(k, 3);
  cursor = v[2];
  rd_store_free_profiles(v);
  assert_int_equal(rd_store_clear_profiles(st, NULL, NULL), RD_OK);
  assert_int_equal(rd_store_list_profiles_after(st, &cursor, 3, &v, &k, NULL), RD_OK);
  assert_int_equal(k, 0);
  assert_null(v);

  /* Page sizes out of range change nothing and say so. */
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_list_profiles_after(st, NULL, 0, &v, &k, &err), RD_EINVAL);
  assert_int_equal(rd_store_list_profiles_after(st, NULL, RD_STORE_PAGE_MAX + 1, &v, &k, &err),
                   RD_EINVAL);
  rd_store_free_profiles(all);
  rd_store_close(st);
}

RDT_MAIN(rdt_root_setup, rdt_root_teardown,
         cmocka_unit_test(test_page_size),       cmocka_unit_test(test_field_bytes),
         cmocka_unit_test(test_page_take),       cmocka_unit_test(test_workload_tokens),
         cmocka_unit_test(test_profile_tokens),  cmocka_unit_test(test_registry_pages),
         cmocka_unit_test(test_store_pages))
