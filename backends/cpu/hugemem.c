/* hugemem.c - huge-page mappings for large host arrays (hugemem.h). */
#include "hugemem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void *rd_huge_map(size_t bytes) {
  if (bytes == 0) return NULL;
  /* Map a huge page more than asked and keep the aligned part. */
  const size_t span = bytes + RD_HUGE_PAGE;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *mem = (char *)(((uintptr_t)raw + RD_HUGE_PAGE - 1) & ~(uintptr_t)(RD_HUGE_PAGE - 1));
  /* What is left past the array starts on a page boundary (munmap's rule);
   * rd_huge_unmap's munmap of `bytes` covers the array's last page. */
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t len = (bytes + page - 1) & ~(page - 1);
  const size_t head = (size_t)(mem - raw), tail = span - head - len;
  if (head) munmap(raw, head);
  if (tail) munmap(mem + len, tail);
#ifdef MADV_HUGEPAGE
  (void)madvise(mem, bytes, MADV_HUGEPAGE);
#endif
  return mem;
}

void rd_huge_unmap(void *mem, size_t bytes) {
  if (mem != NULL) munmap(mem, bytes);
}
