/* fuzz_scratch.c - a harness's scratch directory (fuzz_scratch.h). */
#define _GNU_SOURCE
#include "fuzz_scratch.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static void (*before_rm)(void);

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

static void remove_dir(void) {
  if (before_rm) before_rm();
  if (dir[0]) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_scratch(void) {
  if (dir[0]) return dir;
  snprintf(dir, sizeof dir, "/dev/shm/replayd-fuzz-XXXXXX");
  if (access("/dev/shm", W_OK) != 0 || mkdtemp(dir) == NULL) {
    snprintf(dir, sizeof dir, "/tmp/replayd-fuzz-XXXXXX");
    if (mkdtemp(dir) == NULL) abort();
  }
  atexit(remove_dir);
  return dir;
}

const char *fuzz_scratch_file(const char *name) {
  static char names[16][64], paths[16][128];
  static int n;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return paths[i];
  if (n == 16 || strlen(name) >= sizeof names[0]) abort();
  snprintf(names[n], sizeof names[n], "%s", name);
  snprintf(paths[n], sizeof paths[n], "%s/%s", fuzz_scratch(), name);
  return paths[n++];
}

void fuzz_scratch_on_exit(void (*fn)(void)) { before_rm = fn; }
