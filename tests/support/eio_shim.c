/* eio_shim.c - an LD_PRELOAD library that makes a directory's storage fail
 * with EIO, for the daemon's generic I/O-error test
 * (tests/integration/test_durability_eio.py).
 *
 * Why a shim: this machine's kernel has no device-mapper (no `error`
 * target, no /dev/mapper/control), no null_blk or scsi_debug and no
 * modprobe. A loop device can be made to fail by shrinking its size limit,
 * but the kernel then also fails the file system's metadata and directory
 * reads past the new end (with ENOMEM from the buffer cache, not EIO), and
 * the allocator places the daemon's blocks where the test cannot choose,
 * so the failure is neither generic EIO nor repeatable.
 *
 * Environment: RD_EIO_PREFIX, a directory; RD_EIO_FLAG, a file. While the
 * flag file exists, fsync and fdatasync of a file or directory under the
 * prefix fail with EIO (the error a device gives back at writeback); if
 * the flag file's first byte is 'w', write and pwrite there fail with EIO
 * as well. If it is 'd', only pwrite to a file opened with O_DIRECT there
 * fails, with EINVAL: a file system that states a direct-I/O alignment and
 * then refuses the write (the journal must fall back to the page cache).
 * Every other call goes through unchanged.
 */
#undef _FILE_OFFSET_BITS /* pwrite and pwrite64 both defined here, under their own names */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* 0: off; 1: syncs fail; 2: syncs and writes fail; 3: direct writes refused. */
static int mode(void) {
  const char *flag = getenv("RD_EIO_FLAG");
  if (flag == NULL) return 0;
  FILE *f = fopen(flag, "re");
  if (f == NULL) return 0;
  int c = fgetc(f);
  fclose(f);
  return c == 'w' ? 2 : c == 'd' ? 3 : 1;
}

/* fd names a file or directory under RD_EIO_PREFIX. */
static int under_prefix(int fd) {
  const char *prefix = getenv("RD_EIO_PREFIX");
  if (prefix == NULL || prefix[0] == '\0') return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  size_t k = strlen(prefix);
  return strncmp(path, prefix, k) == 0 && (path[k] == '/' || path[k] == '\0');
}

static int fails(int fd, int at_least) {
  int m = mode();
  if (m < at_least || m == 3) return 0;
  int saved = errno;
  int r = under_prefix(fd);
  errno = saved;
  return r;
}

static int (*real_fsync)(int), (*real_fdatasync)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);

__attribute__((constructor)) static void resolve(void) {
  real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = (ssize_t(*)(int, const void *, size_t, off64_t))dlsym(RTLD_NEXT, "pwrite64");
}

#define FAIL_IF(cond) \
  do {                \
    if (cond) {       \
      errno = EIO;    \
      return -1;      \
    }                 \
  } while (0)

int fsync(int fd) {
  FAIL_IF(fails(fd, 1));
  return real_fsync(fd);
}

int fdatasync(int fd) {
  FAIL_IF(fails(fd, 1));
  return real_fdatasync(fd);
}

ssize_t write(int fd, const void *buf, size_t len) {
  FAIL_IF(fd > 2 && fails(fd, 2));
  return real_write(fd, buf, len);
}

/* Mode 3: fd is under the prefix and open with O_DIRECT. */
static int direct_refused(int fd) {
  if (mode() != 3) return 0;
  int saved = errno;
  int fl = fcntl(fd, F_GETFL);
  int r = fl >= 0 && (fl & O_DIRECT) && under_prefix(fd);
  errno = saved;
  return r;
}

#define REFUSE_DIRECT(fd) \
  do {                    \
    if (direct_refused(fd)) { \
      errno = EINVAL;     \
      return -1;          \
    }                     \
  } while (0)

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) {
  FAIL_IF(fails(fd, 2));
  REFUSE_DIRECT(fd);
  return real_pwrite(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off) {
  FAIL_IF(fails(fd, 2));
  REFUSE_DIRECT(fd);
  return real_pwrite64(fd, buf, len, off);
}
