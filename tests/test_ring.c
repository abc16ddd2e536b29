/* test_ring.c - the bounded FIFO of common/rd_ring.h: order, wrap-around,
 * and full and empty refused without a change. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "rd_ring.h"
#include "rdt_main.h"

static void test_fifo_wraps(void **state) {
  (void)state;
  rd_ring_t r;
  assert_int_equal(rd_ring_init(&r, 3), RD_OK);
  uint32_t x = 77;
  assert_int_equal(rd_ring_pop(&r, &x), RD_EEMPTY);
  assert_int_equal(rd_ring_peek(&r, &x), RD_EEMPTY);
  assert_int_equal(x, 77);
  /* Many rounds through 3 places: values come out in the order they went in. */
  uint32_t next_in = 0, next_out = 0;
  for (int round = 0; round < 50; round++) {
    while (rd_ring_len(&r) < 3) assert_int_equal(rd_ring_push(&r, next_in++), RD_OK);
    assert_int_equal(rd_ring_push(&r, 999), RD_ETOOBIG); /* full: unchanged */
    assert_int_equal(rd_ring_len(&r), 3);
    int take = 1 + round % 3;
    for (int k = 0; k < take; k++) {
      assert_int_equal(rd_ring_peek(&r, &x), RD_OK);
      assert_int_equal(x, next_out);
      assert_int_equal(rd_ring_pop(&r, &x), RD_OK);
      assert_int_equal(x, next_out++);
    }
  }
  while (rd_ring_len(&r) > 0) {
    assert_int_equal(rd_ring_pop(&r, &x), RD_OK);
    assert_int_equal(x, next_out++);
  }
  assert_int_equal(next_out, next_in);
  rd_ring_free(&r);
  rd_ring_free(&r); /* idempotent */
}

static void test_init_refuses_zero(void **state) {
  (void)state;
  rd_ring_t r;
  assert_int_equal(rd_ring_init(&r, 0), RD_EINVAL);
  assert_int_equal(rd_ring_len(&r), 0);
  uint32_t x;
  assert_int_equal(rd_ring_push(&r, 1), RD_ETOOBIG);
  assert_int_equal(rd_ring_pop(&r, &x), RD_EEMPTY);
  rd_ring_free(&r);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_fifo_wraps),
         cmocka_unit_test(test_init_refuses_zero))
