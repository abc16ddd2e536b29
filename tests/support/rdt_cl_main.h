/* rdt_cl_main.h - the main() of a client test program whose arguments
 * are the programs it runs (the built ones, as tests/meson.build passes
 * them):
 *
 *   RDT_CL_MAIN("REPLAYD REPLAYCTL", (&replayd_path, &replayctl_path),
 *               group_setup, group_teardown,
 *               cmocka_unit_test(test_a), cmocka_unit_test(test_b))
 *
 * stores argv[1], argv[2], ... where the parenthesised list says, then
 * runs the tests as one group, as RDT_MAIN (rdt_main.h) does. With fewer
 * arguments than the list names it prints "usage: PROG REPLAYD REPLAYCTL"
 * and exits 2. Include after <cmocka.h>.
 */
#ifndef RDT_CL_MAIN_H
#define RDT_CL_MAIN_H

#include <stddef.h>
#include <stdio.h>

/* argv[1..n] into *progs[0..n-1]: 0, or -1 with the usage on stderr. */
static inline int rdt_cl_progs(int argc, char **argv, const char *usage, const char **progs[],
                               size_t n) {
  if (argc < (int)n + 1) {
    fprintf(stderr, "usage: %s %s\n", argv[0], usage);
    return -1;
  }
  for (size_t i = 0; i < n; i++) *progs[i] = argv[i + 1];
  return 0;
}

#define RDT_CL_LIST(...) __VA_ARGS__

#define RDT_CL_MAIN(usage, progs, setup, teardown, ...)                                  \
  int main(int argc, char **argv) {                                                      \
    const char **progs_[] = {RDT_CL_LIST progs};                                         \
    if (rdt_cl_progs(argc, argv, usage, progs_, sizeof progs_ / sizeof *progs_) != 0)   \
      return 2;                                                                          \
    const struct CMUnitTest tests[] = {__VA_ARGS__};                                     \
    return cmocka_run_group_tests(tests, setup, teardown);                               \
  }

#endif
