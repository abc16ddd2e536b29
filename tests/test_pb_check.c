/* test_pb_check.c - the wire walk that checks a request's strings before
 * protobuf-c unpacks it (daemon/rpc/pb_check.h): hand-built wire bytes for
 * each rule and each way the bytes can be wrong, agreement with
 * protobuf-c's unpack where the two could differ, and random bytes and
 * mutations of valid requests (every buffer exactly its length, so the
 * sanitizer builds see any read past it). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_check.h"
#include "replayd.pb-c.h"
#include "rd_rng.h"
#include "rdt_main.h"

/* ---- A small encoder for hand-built messages ---- */

typedef struct {
  uint8_t b[1 << 17];
  size_t n;
} wire_t;

static void put_byte(wire_t *w, uint8_t v) {
  assert_true(w->n < sizeof w->b);
  w->b[w->n++] = v;
}

static void put_bytes(wire_t *w, const void *p, size_t n) {
  assert_true(w->n + n <= sizeof w->b);
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void put_varint(wire_t *w, uint64_t v) {
  while (v >= 0x80) {
    put_byte(w, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  put_byte(w, (uint8_t)v);
}

static void put_tag(wire_t *w, uint32_t field, unsigned wire) {
  put_varint(w, (uint64_t)field << 3 | wire);
}

/* Field `field` as length-delimited bytes. */
static void put_ld(wire_t *w, uint32_t field, const void *p, size_t n) {
  put_tag(w, field, 2);
  put_varint(w, n);
  put_bytes(w, p, n);
}

static void put_str(wire_t *w, uint32_t field, const char *s) { put_ld(w, field, s, strlen(s)); }

/* A nested message: field `field` holding inner's bytes. */
static void put_msg(wire_t *w, uint32_t field, const wire_t *inner) {
  put_ld(w, field, inner->b, inner->n);
}

/* A Field message: name (bytes, len n), dtype, shape. */
static void field_msg(wire_t *w, const char *name, size_t n) {
  w->n = 0;
  put_ld(w, 1, name, n);
  put_tag(w, 2, 0);
  put_varint(w, 1); /* FLOAT32 */
  uint8_t shape[] = {4};
  put_ld(w, 3, shape, 1); /* packed repeated uint32 */
}

/* Run the check on an exact-size copy; returns its code, the message in msg. */
static int check(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t n, char *msg,
                 size_t cap) {
  uint8_t *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  if (n) memcpy(copy, b, n);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_pb_check(d, n ? copy : NULL, n, &err);
  if (msg) snprintf(msg, cap, "%s", err.msg);
  if (rc != RD_OK) {
    assert_int_equal(rc, RD_EINVAL);
    assert_int_equal(err.code, RD_EINVAL);
    assert_true(strlen(err.msg) > 0);
    assert_int_equal(rd_pb_check(d, n ? copy : NULL, n, NULL), rc); /* err may be NULL */
  }
  free(copy);
  return rc;
}

static void expect_ok(const ProtobufCMessageDescriptor *d, const wire_t *w) {
  char msg[RD_ERROR_MSG_MAX];
  if (check(d, w->b, w->n, msg, sizeof msg) != RD_OK) fail_msg("refused: %s", msg);
}

/* Refused, and the message holds want. */
static void expect_bad(const ProtobufCMessageDescriptor *d, const wire_t *w, const char *want) {
  char msg[RD_ERROR_MSG_MAX];
  if (check(d, w->b, w->n, msg, sizeof msg) == RD_OK) fail_msg("accepted; expected \"%s\"", want);
  if (strstr(msg, want) == NULL) fail_msg("\"%s\" does not say \"%s\"", msg, want);
}

/* ---- Strings ---- */

static void test_valid_requests_pass(void **state) {
  (void)state;
  /* What protobuf-c itself packs: a whole PlanRequest. */
  Replayd__V1__Field f[2];
  Replayd__V1__Field *fp[2] = {&f[0], &f[1]};
  uint32_t shape[1] = {4};
  for (int i = 0; i < 2; i++) {
    replayd__v1__field__init(&f[i]);
    f[i].name = i ? "next_obs" : "obs";
    f[i].dtype = REPLAYD__V1__DTYPE__FLOAT32;
    f[i].n_shape = 1;
    f[i].shape = shape;
  }
  uint32_t hidden[2] = {64, 64};
  Replayd__V1__LearnerSpec ls = REPLAYD__V1__LEARNER_SPEC__INIT;
  ls.algorithm = "dqn";
  ls.n_hidden = 2;
  ls.hidden = hidden;
  ls.activation = "tanh";
  ls.lr_opt_case = REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR;
  ls.lr = 1e-3;
  Replayd__V1__WorkloadSpec spec = REPLAYD__V1__WORKLOAD_SPEC__INIT;
  spec.name = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\xb2"; /* 2-, 3- and 4-byte UTF-8 */
  spec.n_fields = 2;
  spec.fields = fp;
  spec.capacity = 1000;
  spec.learner = &ls;
  Replayd__V1__PlanRequest plan = REPLAYD__V1__PLAN_REQUEST__INIT;
  plan.spec = &spec;
  plan.fpga_part = "u250";
  plan.gpu_profiles.data = (uint8_t *)"\0\0\xff"; /* bytes: anything goes */
  plan.gpu_profiles.len = 3;
  wire_t w;
  w.n = protobuf_c_message_pack(&plan.base, w.b);
  expect_ok(&replayd__v1__plan_request__descriptor, &w);
  /* Empty messages, of a type with fields and of one without. */
  w.n = 0;
  expect_ok(&replayd__v1__plan_request__descriptor, &w);
  expect_ok(&replayd__v1__list_workloads_request__descriptor, &w);
  /* An empty string. */
  put_str(&w, 1, "");
  expect_ok(&replayd__v1__workload_ref__descriptor, &w);
}

static void test_nul_named_by_path(void **state) {
  (void)state;
  wire_t w, f0, f1, spec;
  /* WorkloadRef.id = "a\0b". */
  w.n = 0;
  put_ld(&w, 1, "a\0b", 3);
  expect_bad(&replayd__v1__workload_ref__descriptor, &w, "id contains a NUL byte (at byte 1 of 3)");
  /* A NUL first and last. */
  w.n = 0;
  put_ld(&w, 1, "\0ab", 3);
  expect_bad(&replayd__v1__workload_ref__descriptor, &w, "id contains a NUL byte");
  w.n = 0;
  put_ld(&w, 1, "ab\0", 3);
  expect_bad(&replayd__v1__workload_ref__descriptor, &w, "id contains a NUL byte");
  /* PlanRequest.spec.fields[1].name: the second element of a repeated field. */
  field_msg(&f0, "obs", 3);
  field_msg(&f1, "a\0b", 3);
  spec.n = 0;
  put_str(&spec, 1, "cartpole");
  put_msg(&spec, 2, &f0);
  put_msg(&spec, 2, &f1);
  w.n = 0;
  put_msg(&w, 1, &spec);
  expect_bad(&replayd__v1__plan_request__descriptor, &w, "spec.fields[1].name contains a NUL byte");
  /* The same spec registered (its own type at the top). */
  expect_bad(&replayd__v1__workload_spec__descriptor, &spec, "fields[1].name contains a NUL byte");
  /* A name with a NUL and control characters (the case). */
  spec.n = 0;
  put_ld(&spec, 1, "a\0b\x1b[31m\n", 9);
  expect_bad(&replayd__v1__workload_spec__descriptor, &spec, "name contains a NUL byte");
  /* fpga_part after the spec. */
  w.n = 0;
  put_msg(&w, 1, &f0); /* a Field where a spec goes: decodes as a spec all the same */
  put_ld(&w, 3, "u250\0x", 6);
  expect_bad(&replayd__v1__plan_request__descriptor, &w, "fpga_part contains a NUL byte");
  /* spec.learner.algorithm, behind packed repeated fields and a double. */
  wire_t ls;
  ls.n = 0;
  uint8_t hidden[] = {64, 64, 0x80, 0x01};
  put_ld(&ls, 2, hidden, sizeof hidden);
  put_tag(&ls, 6, 1);
  put_bytes(&ls, "\0\0\0\0\0\0\xf0\x3f", 8);
  put_ld(&ls, 1, "dq\0n", 4);
  spec.n = 0;
  put_msg(&spec, 20, &ls);
  w.n = 0;
  put_msg(&w, 1, &spec);
  expect_bad(&replayd__v1__plan_request__descriptor, &w, "spec.learner.algorithm contains a NUL");
  /* The workload_id of every data request. */
  const ProtobufCMessageDescriptor *with_id[] = {
      &replayd__v1__insert_request__descriptor, &replayd__v1__sample_request__descriptor,
      &replayd__v1__update_priorities_request__descriptor,
      &replayd__v1__train_step_request__descriptor, &replayd__v1__get_weights_request__descriptor};
  for (size_t i = 0; i < sizeof with_id / sizeof with_id[0]; i++) {
    w.n = 0;
    put_ld(&w, 1, "0123\0", 5);
    expect_bad(with_id[i], &w, "workload_id contains a NUL byte");
  }
}

static void test_utf8(void **state) {
  (void)state;
  static const struct {
    const char *s;
    size_t n;
    int ok;
  } cases[] = {
      {"plain", 5, 1},
      {"\xc2\x80", 2, 1},             /* U+0080 */
      {"\xdf\xbf", 2, 1},             /* U+07FF */
      {"\xe0\xa0\x80", 3, 1},         /* U+0800 */
      {"\xed\x9f\xbf", 3, 1},         /* U+D7FF */
      {"\xee\x80\x80", 3, 1},         /* U+E000 */
      {"\xef\xbf\xbf", 3, 1},         /* U+FFFF */
      {"\xf0\x90\x80\x80", 4, 1},     /* U+10000 */
      {"\xf4\x8f\xbf\xbf", 4, 1},     /* U+10FFFF */
      {"\x80", 1, 0},                 /* a lone continuation byte */
      {"\xc0\x80", 2, 0},             /* overlong NUL */
      {"\xc1\xbf", 2, 0},             /* overlong */
      {"\xe0\x9f\xbf", 3, 0},         /* overlong */
      {"\xed\xa0\x80", 3, 0},         /* a surrogate, U+D800 */
      {"\xed\xbf\xbf", 3, 0},         /* U+DFFF */
      {"\xf0\x8f\xbf\xbf", 4, 0},     /* overlong */
      {"\xf4\x90\x80\x80", 4, 0},     /* U+110000 */
      {"\xf5\x80\x80\x80", 4, 0},
      {"\xff", 1, 0},
      {"ab\xc3", 3, 0},               /* cut at the end */
      {"\xe6\x97", 2, 0},
      {"\xf0\x9f\x8e", 3, 0},
      {"\xc3\x28", 2, 0},             /* a continuation byte missing */
      {"\xe6\x97\x28", 3, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    wire_t w;
    w.n = 0;
    put_ld(&w, 1, cases[i].s, cases[i].n);
    char msg[RD_ERROR_MSG_MAX];
    int rc = check(&replayd__v1__workload_spec__descriptor, w.b, w.n, msg, sizeof msg);
    if (cases[i].ok && rc != RD_OK) fail_msg("case %zu refused: %s", i, msg);
    if (!cases[i].ok && (rc == RD_OK || strstr(msg, "name is not valid UTF-8") == NULL))
      fail_msg("case %zu: \"%s\"", i, msg);
  }
}

static void test_length_bound(void **state) {
  (void)state;
  wire_t *w = malloc(sizeof *w);
  char *s = malloc(RD_PB_STRING_MAX + 1);
  assert_non_null(w);
  assert_non_null(s);
  memset(s, 'x', RD_PB_STRING_MAX + 1);
  w->n = 0;
  put_ld(w, 1, s, RD_PB_STRING_MAX);
  expect_ok(&replayd__v1__workload_ref__descriptor, w);
  w->n = 0;
  put_ld(w, 1, s, RD_PB_STRING_MAX + 1);
  expect_bad(&replayd__v1__workload_ref__descriptor, w, "id is 65537 bytes; a string may have "
             "at most 65536");
  /* Bytes fields have no such bound here (their RPCs bound them). */
  w->n = 0;
  put_ld(w, 1, s, RD_PB_STRING_MAX + 1);
  expect_ok(&replayd__v1__import_profiles_request__descriptor, w);
  free(s);
  free(w);
}

/* ---- Wire bytes ---- */

static void test_undecodable(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *d = &replayd__v1__sample_request__descriptor;
  static const struct {
    const char *bytes;
    size_t n;
    const char *why;
  } cases[] = {
      {"\x80", 1, "a field tag is cut off"},
      {"\x8a\x80\x80\x80\x80\x00", 6, "longer than 5 bytes"},
      {"\x10", 1, "a varint is cut off"},
      {"\x10\x80\x80", 3, "a varint is cut off"},
      {"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "longer than 10 bytes"},
      {"\x19\x01\x02\x03", 4, "a 64-bit value is cut off"},
      {"\x1d\x01\x02", 3, "a 32-bit value is cut off"},
      {"\x0a", 1, "a length prefix is cut off"},
      {"\x0a\x80", 2, "a length prefix is cut off"},
      {"\x0a\x05" "abcd", 6, "a length runs past the end"},
      {"\x0a\xff\xff\xff\xff\x0f", 6, "a length runs past the end"},
      {"\x0a\x80\x80\x80\x80\x80\x01", 7, "longer than 5 bytes"}, /* a 6-byte length */
      {"\x0b\x0c", 2, "a group"},
      {"\x0c", 1, "a group"},
      {"\x0e", 1, "no wire type"},
      {"\x0f", 1, "no wire type"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    wire_t w;
    w.n = 0;
    put_bytes(&w, cases[i].bytes, cases[i].n);
    char msg[RD_ERROR_MSG_MAX];
    if (check(d, w.b, w.n, msg, sizeof msg) == RD_OK) fail_msg("case %zu accepted", i);
    if (strstr(msg, "request is not a decodable replayd.v1.SampleRequest") == NULL ||
        strstr(msg, cases[i].why) == NULL)
      fail_msg("case %zu: \"%s\" does not say \"%s\"", i, msg, cases[i].why);
    /* protobuf-c refuses every one of them too. */
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, w.n, w.b);
    if (m != NULL) fail_msg("case %zu: protobuf-c unpacked it", i);
  }
  /* Inside a nested message: the path of the message says where. */
  wire_t spec, w;
  spec.n = 0;
  put_str(&spec, 1, "ok");
  put_bytes(&spec, "\x10\x80", 2);
  w.n = 0;
  put_msg(&w, 1, &spec);
  expect_bad(&replayd__v1__plan_request__descriptor, &w,
             "a varint is cut off or longer than 10 bytes at byte 7 in spec");
}

static void test_unknown_and_skipped_fields(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *d = &replayd__v1__insert_request__descriptor;
  wire_t w;
  /* Unknown fields of every wire type (a NUL in an unknown length-delimited
   * field is not a string: unpack keeps it as unknown bytes), bytes with
   * NULs, packed doubles, then the string: still found. */
  w.n = 0;
  put_tag(&w, 99, 0);
  put_varint(&w, UINT64_MAX);
  put_tag(&w, 100, 1);
  put_bytes(&w, "\0\0\0\0\0\0\0\0", 8);
  put_tag(&w, 101, 5);
  put_bytes(&w, "\0\0\0\0", 4);
  put_ld(&w, 102, "x\0y", 3);
  put_tag(&w, 536870911, 2); /* the largest field number */
  put_varint(&w, 1);
  put_byte(&w, 0);
  wire_t rows;
  rows.n = 0;
  put_tag(&rows, 1, 0);
  put_varint(&rows, 2);
  put_ld(&rows, 2, "\0\0\0\0", 4);
  put_ld(&rows, 2, "\xff\xfe", 2);
  put_msg(&w, 2, &rows);
  put_ld(&w, 3, "\0\0\0\0\0\0\xf0\x3f\0\0\0\0\0\0\0\x40", 16); /* packed doubles */
  expect_ok(d, &w);
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, w.n, w.b);
  assert_non_null(m);
  protobuf_c_message_free_unpacked(m, NULL);
  put_ld(&w, 1, "id\0", 3);
  expect_bad(d, &w, "workload_id contains a NUL byte");
  /* A string field sent with another wire type holds no string: not ours
   * to refuse, and unpack refuses it. */
  w.n = 0;
  put_tag(&w, 1, 0);
  put_varint(&w, 7);
  expect_ok(d, &w);
  assert_null(protobuf_c_message_unpack(d, NULL, w.n, w.b));
  /* Tag 0 is not a field: unknown, as unpack takes it. */
  w.n = 0;
  put_tag(&w, 0, 2);
  put_varint(&w, 1);
  put_byte(&w, 0);
  expect_ok(d, &w);
}

/* Where protobuf-c reads the wire more loosely than the specification,
 * the walk reads it the same way: otherwise a string unpack fills in
 * could hide from the check. */
static void test_agrees_with_unpack(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *d = &replayd__v1__workload_ref__descriptor;
  /* A 5-byte length whose bits past 32 are lost: 3 + 2^32 reads as 3. */
  static const uint8_t wrapped[] = {0x0a, 0x83, 0x80, 0x80, 0x80, 0x10, 'a', 0, 'b'};
  wire_t w;
  w.n = 0;
  put_bytes(&w, wrapped, sizeof wrapped);
  expect_bad(d, &w, "id contains a NUL byte");
  Replayd__V1__WorkloadRef *ref = replayd__v1__workload_ref__unpack(NULL, w.n, w.b);
  if (ref != NULL) { /* this protobuf-c reads it: and cuts the string */
    assert_string_equal(ref->id, "a");
    replayd__v1__workload_ref__free_unpacked(ref, NULL);
  }
  /* A tag of 5 bytes whose high bits are lost: field 1 + 2^29 is not a
   * field, and unpack does not fill id from it. */
  static const uint8_t high_tag[] = {0x8a, 0x80, 0x80, 0x80, 0x10, 0x03, 'a', 0, 'b'};
  w.n = 0;
  put_bytes(&w, high_tag, sizeof high_tag);
  expect_ok(d, &w);
  ref = replayd__v1__workload_ref__unpack(NULL, w.n, w.b);
  if (ref != NULL) {
    assert_string_equal(ref->id, "");
    replayd__v1__workload_ref__free_unpacked(ref, NULL);
  }
  /* Field 1 in a non-minimal 5-byte tag is field 1. */
  static const uint8_t long_tag[] = {0x8a, 0x80, 0x80, 0x80, 0x00, 0x03, 'a', 0, 'b'};
  w.n = 0;
  put_bytes(&w, long_tag, sizeof long_tag);
  expect_bad(d, &w, "id contains a NUL byte");
  /* The last of a repeated singular string is the one unpack keeps; both
   * are checked. */
  w.n = 0;
  put_ld(&w, 1, "a\0", 2);
  put_str(&w, 1, "ok");
  expect_bad(d, &w, "id contains a NUL byte");
}

static void test_depth_bound(void **state) {
  (void)state;
  /* Nesting follows the descriptors, and replayd's requests nest 3 deep
   * at most; a request type that nests without end is walked only to
   * RD_PB_MAX_DEPTH. Built from PlanRequest's spec field: a descriptor
   * whose message field refers to itself. */
  static ProtobufCFieldDescriptor fd;
  static ProtobufCMessageDescriptor self;
  static const ProtobufCIntRange ranges[] = {{1, 0}, {0, 1}};
  fd = replayd__v1__plan_request__descriptor.fields[0];
  fd.descriptor = &self;
  self = replayd__v1__plan_request__descriptor;
  self.n_fields = 1;
  self.fields = &fd;
  self.n_field_ranges = 1;
  self.field_ranges = ranges;
  wire_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  assert_non_null(a);
  assert_non_null(b);
  a->n = 0;
  for (int level = 0; level < RD_PB_MAX_DEPTH; level++) {
    b->n = 0;
    put_msg(b, 1, a);
    *a = *b;
  }
  expect_ok(&self, a);
  b->n = 0;
  put_msg(b, 1, a);
  expect_bad(&self, b, "messages nested too deep");
  free(a);
  free(b);
}

/* ---- Garbage ---- */

/* Every string of an unpacked message, recursively, is valid UTF-8 up to
 * its NUL (the walk refused anything else it could see). */
static int strings_clean(const ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *base = (const char *)m + f->offset;
    size_t count = 1;
    const void *const *elems = (const void *const *)base;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      count = *(const size_t *)((const char *)m + f->quantifier_offset);
      elems = *(const void *const *const *)base;
    }
    for (size_t k = 0; k < count; k++) {
      if (f->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = elems[k];
        if (s == NULL) continue;
        /* Re-check the unpacked text alone: valid UTF-8, no NUL inside. */
        wire_t w;
        w.n = 0;
        put_str(&w, 1, s);
        if (rd_pb_check(&replayd__v1__workload_ref__descriptor, w.b, w.n, NULL) != RD_OK)
          return 0;
      } else if (f->type == PROTOBUF_C_TYPE_MESSAGE && elems[k] != NULL) {
        if (!strings_clean(elems[k])) return 0;
      }
    }
  }
  return 1;
}

/* 1 if the walk passed the bytes and unpack took them. */
static int fuzz_one(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t n,
                    size_t *refused) {
  int took = 0;
  uint8_t *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, b, n);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_pb_check(d, copy, n, &err);
  if (rc != RD_OK) {
    assert_int_equal(rc, RD_EINVAL);
    assert_true(err.msg[0] != '\0');
    (*refused)++;
  } else {
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, copy);
    if (m != NULL) {
      if (!strings_clean(m)) fail_msg("a string the walk passed is not clean");
      protobuf_c_message_free_unpacked(m, NULL);
      took = 1;
    }
  }
  free(copy);
  return took;
}

static void test_garbage(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *types[] = {
      &replayd__v1__plan_request__descriptor, &replayd__v1__workload_spec__descriptor,
      &replayd__v1__insert_request__descriptor, &replayd__v1__sample_request__descriptor};
  /* Seeds, one valid message of each type, with strings at every depth. */
  wire_t *seeds = calloc(4, sizeof *seeds), *f0 = malloc(sizeof *f0), *ls = malloc(sizeof *ls);
  assert_non_null(seeds);
  assert_non_null(f0);
  assert_non_null(ls);
  field_msg(f0, "obs", 3);
  ls->n = 0;
  put_str(ls, 1, "dqn");
  put_ld(ls, 2, "\x40\x40", 2);
  put_str(ls, 5, "relu");
  wire_t *spec = &seeds[1];
  put_str(spec, 1, "w\xc3\xa9");
  put_msg(spec, 2, f0);
  put_msg(spec, 2, f0);
  put_msg(spec, 20, ls);
  put_msg(&seeds[0], 1, spec);
  put_str(&seeds[0], 3, "u250");
  wire_t *rows = f0; /* its bytes are in the spec now: reused */
  rows->n = 0;
  put_tag(rows, 1, 0);
  put_varint(rows, 1);
  put_ld(rows, 2, "\0\0\x80\x3f", 4);
  put_str(&seeds[2], 1, "0123456789abcdef0123456789abcdef");
  put_msg(&seeds[2], 2, rows);
  put_ld(&seeds[2], 3, "\0\0\0\0\0\0\xf0\x3f", 8);
  put_str(&seeds[3], 1, "0123456789abcdef0123456789abcdef");
  put_tag(&seeds[3], 2, 0);
  put_varint(&seeds[3], 32);
  for (int t = 0; t < 4; t++) expect_ok(types[t], &seeds[t]);
  uint64_t rng = 20;
  size_t refused = 0, runs = 0, unpacked = 0;
  uint8_t buf[512];
  for (int i = 0; i < 200000; i++) {
    int t = (int)(rd_splitmix64(&rng) % 4);
    const ProtobufCMessageDescriptor *d = types[t];
    const wire_t *seed = &seeds[t];
    size_t n;
    if (i % 4 == 0) { /* random bytes */
      n = rd_splitmix64(&rng) % 64;
      for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rd_splitmix64(&rng);
    } else { /* a mutated seed: flip, cut, insert */
      n = seed->n;
      memcpy(buf, seed->b, n);
      int edits = 1 + (int)(rd_splitmix64(&rng) % 3);
      for (int e = 0; e < edits && n > 0; e++) {
        uint64_t r = rd_splitmix64(&rng);
        size_t at = (r >> 8) % n;
        switch (r % 8) {
        case 0: buf[at] = (uint8_t)(r >> 40); break;                 /* any byte */
        case 1: buf[at] ^= (uint8_t)(1u << ((r >> 40) % 8)); break;  /* one bit */
        case 2: n = at; break;                                       /* cut */
        case 3:                                                      /* insert */
          if (n < sizeof buf) {
            memmove(buf + at + 1, buf + at, n - at);
            buf[at] = (uint8_t)(r >> 40);
            n++;
          }
          break;
        case 4: buf[at] = 0; break;                                  /* a NUL */
        default: buf[at] = (uint8_t)(' ' + (r >> 40) % 95); break;   /* printable */
        }
      }
    }
    unpacked += fuzz_one(d, buf, n, &refused);
    runs++;
  }
  /* Both outcomes, often: the mutations reach past the first bytes. */
  assert_true(refused > runs / 10);
  assert_true(unpacked > runs / 10);
  free(seeds);
  free(f0);
  free(ls);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_valid_requests_pass),
         cmocka_unit_test(test_nul_named_by_path),
         cmocka_unit_test(test_utf8),
         cmocka_unit_test(test_length_bound),
         cmocka_unit_test(test_undecodable),
         cmocka_unit_test(test_unknown_and_skipped_fields),
         cmocka_unit_test(test_agrees_with_unpack),
         cmocka_unit_test(test_depth_bound),
         cmocka_unit_test(test_garbage))
