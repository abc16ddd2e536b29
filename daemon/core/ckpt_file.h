/* ckpt_file.h - the checkpoint container: a versioned file of checksummed,
 * optionally compressed sections.
 *
 * One format for checkpoints, exports and imports (durable.h says what the
 * sections of a workload hold). Little-endian, laid out as:
 *
 *   header   64 bytes: magic "RPLYDCKP", u32 version (RD_CKPT_VERSION),
 *            u32 header bytes (64), u64 creation time (ns since the epoch),
 *            zero padding, u64 XXH3-64 of the 56 bytes before it
 *   section  48-byte header: u32 type, u32 aux (e.g. a field index),
 *            u32 flags (RD_CKPT_ZSTD), u32 0, u64 raw bytes, u64 stored
 *            bytes, u64 XXH3-64 of the stored bytes, u64 XXH3-64 of the
 *            40 header bytes before it; then the stored bytes
 *   ...
 *   end      a section of type RD_CKPT_END: aux = the number of sections
 *            before it, no data, and in place of the data hash a chain of
 *            every section header's hash (each hash seeds the next).
 *
 * Why this shape: every byte is covered by a checksum (the header's, a
 * section header's or its data's), so a flipped bit anywhere is found; a
 * file cut at any byte lacks its end section (or a section's bytes), so a
 * truncation is found; the chain in the end section finds a section
 * dropped or reordered by a copy gone wrong. Checksums are xxHash's XXH3
 * (libxxhash, Debian), compression zstd (libzstd, Debian), per section so
 * that a reader can take one section without the others. A reader checks
 * the file's structure at open and each section's data when it reads it.
 * (Only a fuzz build, FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, reads past
 * a checksum mismatch, so that a fuzzer reaches the parsers behind it.)
 *
 * Errors: RD_ESTORE for an I/O failure (the message carries strerror, e.g.
 * "No space left on device"), RD_EINVAL for a file that is not a valid
 * checkpoint (the message says what is wrong and where), RD_ENOMEM.
 */
#ifndef RD_CKPT_FILE_H
#define RD_CKPT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_le.h" /* rd_le_get32/64, rd_le_put32/64 for section payloads */

#define RD_CKPT_VERSION 1u
#define RD_CKPT_HEADER_BYTES 64u
#define RD_CKPT_SECTION_BYTES 48u
#define RD_CKPT_MAX_SECTIONS 4096u

enum { RD_CKPT_ZSTD = 1u << 0 }; /* section flags */
#define RD_CKPT_END 0xffffffffu  /* the end section's type */

/* Largest zstd level accepted (zstd's own maximum is 22; above 19 needs
 * far more memory for little gain). 0 = no compression. */
#define RD_CKPT_MAX_ZSTD_LEVEL 19

typedef struct {
  int fd;             /* the caller's; written sequentially from its current offset */
  int zstd_level;     /* 0: sections stored raw */
  uint32_t n;         /* sections written */
  uint64_t chain;     /* hash chain of section headers */
  uint64_t bytes;     /* written so far */
  void *zbuf;         /* compression scratch */
  size_t zcap;
} rd_ckpt_writer_t;

/* Write the file header to fd. RD_EINVAL (a bad level), RD_ESTORE. */
int rd_ckpt_writer_init(rd_ckpt_writer_t *w, int fd, int zstd_level, rd_error_t *err);
/* One section of len bytes, compressed when the writer compresses and that
 * makes it smaller. RD_ESTORE, RD_ENOMEM. */
int rd_ckpt_write_section(rd_ckpt_writer_t *w, uint32_t type, uint32_t aux, const void *data,
                          size_t len, rd_error_t *err);
/* The end section. The caller then fsyncs and renames (durable.c). */
int rd_ckpt_writer_finish(rd_ckpt_writer_t *w, rd_error_t *err);
void rd_ckpt_writer_free(rd_ckpt_writer_t *w);

typedef struct {
  uint32_t type, aux, flags;
  uint64_t raw_len, stored_len;
  uint64_t offset; /* of the stored bytes in the file */
  uint64_t hash;   /* of the stored bytes */
} rd_ckpt_section_t;

typedef struct {
  int fd;
  uint64_t size;
  uint32_t version;
  uint64_t created_ns;
  rd_ckpt_section_t *sec; /* every section but the end */
  uint32_t n;
} rd_ckpt_reader_t;

/* Read and check the header and every section header of the file on fd
 * (the caller's, read with pread): magic, version, header checksums,
 * bounds, the end section and its chain. Data is checked by
 * rd_ckpt_read_section. RD_EINVAL says what is wrong ("empty file", "not a
 * replayd checkpoint", "format version 7; this build reads 1", "truncated
 * in section 3", "checksum mismatch in the header of section 2"), RD_ESTORE,
 * RD_ENOMEM. */
int rd_ckpt_reader_open(rd_ckpt_reader_t *r, int fd, rd_error_t *err);
void rd_ckpt_reader_close(rd_ckpt_reader_t *r);

/* The first section of this type (and aux, unless aux is UINT32_MAX), or NULL. */
const rd_ckpt_section_t *rd_ckpt_find(const rd_ckpt_reader_t *r, uint32_t type, uint32_t aux);

/* Read section s into dst, which holds exactly s->raw_len bytes: its data
 * checksum verified, decompressed if it was compressed (to exactly raw_len
 * bytes). RD_EINVAL (checksum mismatch, a bad zstd frame), RD_ESTORE,
 * RD_ENOMEM. */
int rd_ckpt_read_section(const rd_ckpt_reader_t *r, const rd_ckpt_section_t *s, void *dst,
                         rd_error_t *err);

/* A stored checksum that differs from the one computed: always 0 in a fuzz
 * build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), which reads on so that
 * a fuzzer reaches the parsers behind the checksums. The checkpoint reader
 * and the journal's share it. */
static inline int rd_sum_differs(uint64_t stored, uint64_t computed) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  (void)stored;
  (void)computed;
  return 0;
#else
  return stored != computed;
#endif
}

#endif
