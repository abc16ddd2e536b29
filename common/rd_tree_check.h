/* rd_tree_check.h - validation of sum-tree batches, shared by every
 * backend's host code so that a bad batch gets the same error and message
 * whichever device the tree lives on. Each returns RD_OK or the first
 * problem (RD_ERANGE / RD_EEMPTY) with a message; none changes anything. */
#ifndef RD_TREE_CHECK_H
#define RD_TREE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tree's shape (RD_EINVAL): fanout a power of two in [RD_ST_MIN_FANOUT,
 * RD_ST_MAX_FANOUT], capacity in [1, RD_ST_MAX_CAPACITY] (rd_tree_step.h). */
int rd_tree_check_shape(uint32_t capacity, uint32_t fanout, rd_error_t *err);

/* Every position < capacity. */
int rd_tree_check_positions(size_t n, const uint32_t *positions, uint32_t capacity,
                            rd_error_t *err);
/* Every value <= max_leaf (so the total of capacity leaves stays < 2^63). */
int rd_tree_check_values(size_t n, const uint64_t *values, uint64_t max_leaf, uint32_t capacity,
                         rd_error_t *err);
/* An update batch: rd_tree_check_positions, then rd_tree_check_values (the
 * same errors), in one pass over both arrays when the batch is valid. */
int rd_tree_check_update(size_t n, const uint32_t *positions, const uint64_t *values,
                         uint64_t max_leaf, uint32_t capacity, rd_error_t *err);
/* [first, first + n) lies inside the capacity. */
int rd_tree_check_range(uint32_t first, size_t n, uint32_t capacity, rd_error_t *err);
/* total > 0 and every target < total. */
int rd_tree_check_targets(size_t n, const uint64_t *targets, uint64_t total, rd_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
