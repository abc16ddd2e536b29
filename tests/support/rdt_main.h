/* rdt_main.h - the main() of a cmocka test program that runs its tests as
 * one group:
 *
 *   RDT_MAIN(group_setup, group_teardown,
 *            cmocka_unit_test(test_a), cmocka_unit_test(test_b))
 *
 * setup and teardown are cmocka group functions or NULL. The exit status is
 * cmocka's: the number of failed tests. Include after <cmocka.h>.
 */
#ifndef RDT_MAIN_H
#define RDT_MAIN_H

#define RDT_MAIN(setup, teardown, ...)                        \
  int main(void) {                                            \
    const struct CMUnitTest tests[] = {__VA_ARGS__};          \
    return cmocka_run_group_tests(tests, setup, teardown);    \
  }

#endif
