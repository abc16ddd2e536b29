/* fuzz_config.c - the configuration a file and a command line control.
 *
 * Input: byte 0 even: the rest is a config file (rd_config_load_file);
 * odd: the rest is argv, its arguments separated by NUL bytes
 * (rd_config_parse_args, which may also read --config files it names).
 * A failing parse must leave the configuration as it was.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "fuzz_scratch.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *path = fuzz_scratch_file("fuzz.conf");
  rd_config_t c, before;
  rd_config_defaults(&c);
  before = c;
  rd_error_t err;
  rd_error_clear(&err);
  int rc;
  if ((data[0] & 1) == 0) {
    FILE *f = fopen(path, "w");
    if (f == NULL) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    rc = rd_config_load_file(&c, path, &err);
  } else {
    char *buf = malloc(size); /* the bytes, NUL-terminated */
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    char *argv[MAX_ARGS + 1] = {"replayd"};
    int argc = 1;
    for (char *p = buf; p < buf + size - 1 && argc < MAX_ARGS; p += strlen(p) + 1)
      argv[argc++] = p;
    argv[argc] = NULL;
    int help, version;
    rc = rd_config_parse_args(&c, argc, argv, &help, &version, &err);
    free(buf);
  }
  if (rc != RD_OK && memcmp(&c, &before, sizeof c) != 0) __builtin_trap(); /* changed nothing */
  if (rc != RD_OK && err.msg[0] == '\0') __builtin_trap(); /* says why */
  return 0;
}
