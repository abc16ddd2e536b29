/* rdt_dir.h - scratch directories for tests and benches.
 *
 * Contract: rdt_tmpdir makes a new, empty directory /tmp/rdt_<tag>.XXXXXX
 * (mkdtemp) and writes its path into buf; rdt_rmtree removes a directory
 * and everything under it, read-only subfolders included. Both return 0
 * or -1 and print nothing.
 */
#ifndef RDT_DIR_H
#define RDT_DIR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int rdt_tmpdir(char *buf, size_t len, const char *tag);
int rdt_rmtree(const char *dir);

/* "<dir>/<name>" (not created), in one of four buffers used in turn: the
 * result stays valid through the next three calls. */
const char *rdt_path(const char *dir, const char *name);

#ifdef __cplusplus
}
#endif

#endif
