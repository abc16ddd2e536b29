/* hugemem.h - large host arrays on transparent huge pages.
 *
 * A random access into an array of many MiB (a sum tree's low levels, a
 * table's rows gathered at random) lands on a different 4 KiB page almost
 * every time: a TLB miss, and once the learner has run between two sampler
 * bursts, a page walk that misses the caches too. An array of at least
 * RD_HUGE_PAGE bytes therefore gets a mapping of its own on a 2 MiB
 * boundary with MADV_HUGEPAGE: the kernel's THP mode "madvise" (Debian's
 * default) uses huge pages only where asked. Not from malloc: memory the
 * heap hands back has usually been touched already, as 4 KiB pages, and
 * the advice does not change pages that exist. Where THP is off or no huge
 * page is free, the same mapping runs on 4 KiB pages.
 *
 * The mapping is not touched here: pages fault in on first write, 2 MiB at
 * a time where huge pages are given.
 */
#ifndef RD_HUGEMEM_H
#define RD_HUGEMEM_H

#include <stddef.h>

#define RD_HUGE_PAGE ((size_t)2 << 20)

/* A fresh zeroed mapping of `bytes` starting on a 2 MiB boundary, or NULL
 * if the system refuses it. */
void *rd_huge_map(size_t bytes);
/* Unmaps what rd_huge_map(bytes) returned (NULL: nothing). */
void rd_huge_unmap(void *mem, size_t bytes);

#endif
