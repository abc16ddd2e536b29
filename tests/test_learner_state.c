/* test_learner_state.c - a learner's whole training state saved and loaded
 * (learner.h rd_learner_state_*, nn.h rd_mlp_state_*): a learner that
 * loads another's state and gets the same batches trains bit-identically
 * to it (DQN and DDPG, Polyak and hard targets, Adam mid-way); every
 * damaged or mismatched state is refused and changes nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner.h"
#include "learner_rows.h"
#include "rdt_learner.h"
#include "rdt_main.h"

static void dqn(rd_learner_config_t *c, uint64_t seed, uint32_t period) {
  rdt_dqn_config(c, 4, 2, 2, (const uint32_t[]){16, 8});
  c->max_batch = 64;
  c->seed = seed;
  c->target_period = period;
}

static void ddpg(rd_learner_config_t *c, uint64_t seed) {
  rdt_ddpg_config(c, 3, 2, 1, (const uint32_t[]){16}, 2, (const uint32_t[]){16, 8});
  c->max_batch = 64;
  c->seed = seed;
}

static void make(rd_learner_t *l, const rd_learner_config_t *c) {
  rd_error_t e;
  if (rd_learner_init(l, c, &e) != RD_OK) fail_msg("init: %s", e.msg);
}

static void steps(rd_learner_t *l, int n, uint32_t seed0, float *td_out) {
  for (int i = 0; i < n; i++) {
    rows_t r;
    rows(&r, &l->config, 32, seed0 + (uint32_t)i);
    rd_error_t e;
    float td[64];
    int rc = rd_learner_step(l, &r.b, td, NULL, &e);
    if (rc != RD_OK && rc != RD_ERANGE) fail_msg("step: %s", e.msg);
    if (td_out) memcpy(td_out, td, 32 * sizeof(float));
  }
}

/* Every parameter, moment and count of two learners. */
static void assert_same(const rd_learner_t *a, const rd_learner_t *b) {
  assert_int_equal(a->n_nets, b->n_nets);
  assert_int_equal(a->steps, b->steps);
  for (int i = 0; i < a->n_nets; i++) {
    const rd_mlp_t *x = &a->net[i], *y = &b->net[i];
    assert_int_equal(x->n_params, y->n_params);
    assert_memory_equal(x->params, y->params, x->n_params * sizeof(float));
    assert_int_equal(x->trainable, y->trainable);
    if (x->trainable) {
      assert_int_equal(x->adam_t, y->adam_t);
      assert_memory_equal(x->adam_m, y->adam_m, x->n_params * sizeof(float));
      assert_memory_equal(x->adam_v, y->adam_v, x->n_params * sizeof(float));
    }
  }
}

static uint8_t *save(const rd_learner_t *l, size_t *len) {
  *len = rd_learner_state_bytes(l);
  uint8_t *buf = malloc(*len);
  size_t w = 0;
  rd_error_t e;
  if (rd_learner_state_save(l, buf, *len, &w, &e) != RD_OK) fail_msg("save: %s", e.msg);
  assert_int_equal(w, *len);
  return buf;
}

/* a trains 23 steps, b (another seed) loads a's state; then both train on
 * the same batches and stay bit-identical, |delta| included. */
static void resume_case(const rd_learner_config_t *ca, const rd_learner_config_t *cb) {
  rd_learner_t a, b;
  make(&a, ca);
  make(&b, cb);
  steps(&a, 23, 100, NULL);
  size_t len;
  uint8_t *buf = save(&a, &len);
  rd_error_t e;
  assert_int_equal(rd_learner_state_check(&b, buf, len, &e), RD_OK);
  assert_int_equal(rd_learner_state_load(&b, buf, len, &e), RD_OK);
  assert_same(&a, &b);
  for (int i = 0; i < 9; i++) {
    float ta[32], tb[32];
    steps(&a, 1, 500 + (uint32_t)i, ta);
    steps(&b, 1, 500 + (uint32_t)i, tb);
    assert_memory_equal(ta, tb, sizeof ta);
  }
  assert_same(&a, &b);
  free(buf);
  rd_learner_free(&a);
  rd_learner_free(&b);
}

static void test_resume_bit_identical(void **state) {
  (void)state;
  rd_learner_config_t a, b;
  dqn(&a, 1, 0);
  dqn(&b, 99, 0);
  resume_case(&a, &b); /* Polyak targets */
  dqn(&a, 1, 5);
  dqn(&b, 2, 5);
  resume_case(&a, &b); /* hard copy every 5 steps: the step count matters */
  ddpg(&a, 3);
  ddpg(&b, 4);
  resume_case(&a, &b);
}

static void test_refused_changes_nothing(void **state) {
  (void)state;
  rd_learner_config_t ca, cb, cc;
  dqn(&ca, 1, 0);
  dqn(&cb, 7, 0);
  ddpg(&cc, 1);
  rd_learner_t a, b, d;
  make(&a, &ca);
  make(&b, &cb);
  make(&d, &cc);
  steps(&a, 5, 1, NULL);
  size_t len;
  uint8_t *buf = save(&a, &len);
  size_t blen;
  uint8_t *before = save(&b, &blen);
  rd_error_t e;
  /* Another algorithm. */
  assert_int_equal(rd_learner_state_load(&d, buf, len, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "DQN"));
  /* Truncated, one byte more, a flipped magic. */
  assert_int_equal(rd_learner_state_load(&b, buf, len - 1, &e), RD_EINVAL);
  uint8_t *longer = calloc(1, len + 1);
  memcpy(longer, buf, len);
  assert_int_equal(rd_learner_state_load(&b, longer, len + 1, &e), RD_EINVAL);
  free(longer);
  buf[0] ^= 1;
  assert_int_equal(rd_learner_state_load(&b, buf, len, &e), RD_EINVAL);
  buf[0] ^= 1;
  /* A NaN second moment: the online network's last float (its state
   * follows the learner's 24-byte header and its own 8-byte length). */
  float nan = NAN, keep;
  size_t at = 24 + 8 + rd_mlp_state_bytes(&a.net[0]) - 4;
  memcpy(&keep, buf + at, 4);
  memcpy(buf + at, &nan, 4);
  assert_int_equal(rd_learner_state_load(&b, buf, len, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "second moment"));
  memcpy(buf + at, &keep, 4);
  /* A NaN weight in the target network (the last float of all). */
  memcpy(&keep, buf + len - 4, 4);
  memcpy(buf + len - 4, &nan, 4);
  assert_int_equal(rd_learner_state_load(&b, buf, len, &e), RD_EINVAL);
  memcpy(buf + len - 4, &keep, 4);
  /* Another shape. */
  rd_learner_config_t cw = cb;
  cw.hidden[0] = 17;
  rd_learner_t w;
  make(&w, &cw);
  size_t wlen;
  uint8_t *wbuf = save(&w, &wlen);
  assert_int_equal(rd_learner_state_load(&b, wbuf, wlen, &e), RD_EINVAL);
  size_t alen;
  uint8_t *after = save(&b, &alen);
  assert_int_equal(alen, blen);
  assert_memory_equal(before, after, blen);
  free(after);
  free(wbuf);
  free(before);
  free(buf);
  rd_learner_free(&w);
  rd_learner_free(&a);
  rd_learner_free(&b);
  rd_learner_free(&d);
}

/* A network's state: trainable and inference-only do not mix. */
static void test_mlp_state(void **state) {
  (void)state;
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  rd_nn_spec_t s = {2, {3, 5, 2}, {RD_NN_RELU, RD_NN_IDENTITY}};
  c.spec = s;
  rd_mlp_t t, i;
  rd_error_t e;
  assert_int_equal(rd_mlp_init(&t, &c, &e), RD_OK);
  c.inference_only = 1;
  assert_int_equal(rd_mlp_init(&i, &c, &e), RD_OK);
  size_t n = rd_mlp_state_bytes(&t);
  uint8_t *buf = malloc(n);
  assert_int_equal(rd_mlp_state_save(&t, buf, n, NULL, &e), RD_OK);
  assert_int_equal(rd_mlp_state_save(&t, buf, n - 1, NULL, &e), RD_ETOOBIG);
  assert_int_equal(rd_mlp_state_load(&i, buf, n, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "trainable"));
  assert_int_equal(rd_mlp_state_load(&t, buf, n, &e), RD_OK);
  free(buf);
  rd_mlp_free(&t);
  rd_mlp_free(&i);
}

/* A's networks as the arrays of learner.h's rd_learner_state_*_arrays,
 * pointing into l itself (as a device backend points them into its host
 * copies). */
static void arrays_of(rd_learner_t *l, rd_learner_state_arrays_t *a) {
  memset(a, 0, sizeof *a);
  for (int k = 0; k < l->n_nets; k++) {
    a->params[k] = l->net[k].params;
    if (l->net[k].trainable) {
      a->adam_m[k] = l->net[k].adam_m;
      a->adam_v[k] = l->net[k].adam_v;
      a->adam_t[k] = l->net[k].adam_t;
    }
  }
  a->steps = l->steps;
}

/* The device backends' path (the GPU learner's host side, the FPGA
 * learner's): state saved from arrays is the learner's own bytes; loaded
 * into arrays, it is the learner's state again; a damaged buffer or a
 * missing array is refused and no array changes. */
static void arrays_case(const rd_learner_config_t *c) {
  rd_learner_t a, b;
  make(&a, c);
  make(&b, c);
  steps(&a, 9, 40, NULL);
  size_t la, lx;
  uint8_t *sa = save(&a, &la);
  uint8_t *sx = malloc(la);
  assert_non_null(sx);
  rd_learner_state_arrays_t arr;
  arrays_of(&a, &arr);
  rd_error_t e;
  assert_int_equal(rd_learner_state_bytes_for(c), la);
  assert_int_equal(rd_learner_state_save_arrays(c, &arr, sx, la, &lx, &e), RD_OK);
  assert_int_equal(lx, la);
  assert_memory_equal(sx, sa, la);
  /* Into b's arrays: b becomes a. */
  uint8_t *sb0 = save(&b, &lx);
  arrays_of(&b, &arr);
  sx[0] ^= 0x40; /* not a learner's state */
  assert_int_not_equal(rd_learner_state_load_arrays(c, sx, la, &arr, &e), RD_OK);
  assert_int_equal(rd_learner_state_load_arrays(c, sa, la - 8, &arr, &e), RD_EINVAL);
  rd_learner_state_arrays_t missing = arr;
  missing.adam_v[0] = NULL;
  assert_int_equal(rd_learner_state_load_arrays(c, sa, la, &missing, &e), RD_EINVAL);
  uint8_t *sb1 = save(&b, &lx);
  assert_memory_equal(sb1, sb0, lx); /* unchanged */
  assert_int_equal(rd_learner_state_load_arrays(c, sa, la, &arr, &e), RD_OK);
  b.steps = arr.steps; /* the counts come back by value */
  for (int k = 0; k < b.n_nets; k++)
    if (b.net[k].trainable) b.net[k].adam_t = arr.adam_t[k];
  assert_same(&a, &b);
  free(sa);
  free(sx);
  free(sb0);
  free(sb1);
  rd_learner_free(&a);
  rd_learner_free(&b);
}

static void test_state_arrays(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn(&c, 7, 4);
  arrays_case(&c);
  ddpg(&c, 9);
  arrays_case(&c);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_resume_bit_identical),
         cmocka_unit_test(test_refused_changes_nothing),
         cmocka_unit_test(test_mlp_state),
         cmocka_unit_test(test_state_arrays))
