/* rd_tsan.h - OpenMP teams in a ThreadSanitizer build.
 *
 * Debian's libgomp is not built with -fsanitize=thread. Its team start and
 * closing barrier are futexes and atomics TSan never sees, so once the
 * thread pool is reused (every parallel region after a thread's first),
 * TSan reports the region's own fork and join as races: a worker reading
 * the shared-variable block its caller just wrote, the caller reading the
 * slots the team sampled or freeing the tree it walked. Nothing in user
 * code can state those edges early enough (the caller writes that block
 * inside the region's own prologue), and suppressing every report with a
 * libgomp frame would also hide races between a region and the daemon's
 * other threads.
 *
 * So a TSan build runs every parallel region with a team of one: the same
 * code and slicing (me = 0 of 1 takes the whole range), no pool threads.
 * TSan still checks the regions against every other thread (a sampler's
 * tree walk against a learner, say); what it cannot check, races between
 * the team's own threads, it could not have checked with libgomp anyway.
 * Release and ASan builds run the real team and their tests compare its
 * results with one thread's. Use as num_threads(RD_OMP_TEAM(n)). */
#ifndef RD_TSAN_H
#define RD_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define RD_OMP_TEAM(n) 1
#else
#define RD_OMP_TEAM(n) (n)
#endif

#endif
