/* fuzz_scratch.h - a harness's scratch directory: made once, in /dev/shm
 * when there is one (a store's fsync costs nothing there), removed with
 * everything in it when the harness exits. */
#ifndef RD_FUZZ_SCRATCH_H
#define RD_FUZZ_SCRATCH_H

/* The directory (created on the first call; aborts if it cannot be). */
const char *fuzz_scratch(void);

/* DIR/name in the directory; the same string for the same name, kept for
 * the process (at most 16 names, each under 64 bytes). */
const char *fuzz_scratch_file(const char *name);

/* Run before the directory is removed at exit (close a store in it). */
void fuzz_scratch_on_exit(void (*fn)(void));

#endif
