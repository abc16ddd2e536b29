/* rd_nn_spec.h - a multilayer perceptron's shape and its flat weight format.
 *
 * Device-independent: the CPU learner (backends/cpu/nn.h), other backends'
 * learners and the actors that run a policy all agree on this description
 * and on one byte format for the weights, so a learner's weights can be
 * shipped to an actor (GetWeights) and loaded into the same forward pass
 * without any other library (papers/001 §II-A1: each actor runs the policy
 * network's inference itself).
 *
 * A network of L layers maps sizes[0] inputs to sizes[L] outputs; layer l
 * (0-based) computes a_{l+1} = act[l](W_l a_l + b_l) with W_l of shape
 * [sizes[l+1] x sizes[l]] (out x in, row-major) and b_l of sizes[l+1].
 *
 * Flat weight format, version 1 (all fields little-endian, no padding):
 *
 *   offset  size        field
 *   0       u32         magic 0x4E4E4452 (the bytes "RDNN")
 *   4       u32         version = 1
 *   8       u32         L, the number of layers, 1..RD_NN_MAX_LAYERS
 *   12      u32[L+1]    sizes: input, hidden..., output; each 1..RD_NN_MAX_UNITS
 *   ..      u32[L]      act[l]: 0 identity, 1 relu, 2 tanh
 *   ..      f32[...]    for l = 0..L-1: W_l row-major [out x in], then b_l [out]
 *
 * The parameter block is exactly the in-memory layout rd_nn_spec_offset
 * describes, so a learner that keeps its parameters in one array in that
 * layout serializes with one copy. The whole network holds at most
 * RD_NN_MAX_PARAMS floats (256 MiB), which bounds what a parser allocates.
 *
 * Non-finite weights (NaN, +-inf) are refused both ways: a learner that has
 * diverged must not ship weights that turn every actor's actions into NaN,
 * and an actor must be able to trust that a parsed set is usable.
 */
#ifndef RD_NN_SPEC_H
#define RD_NN_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#define RD_NN_MAX_LAYERS 16
#define RD_NN_MAX_UNITS 65536u
#define RD_NN_MAX_PARAMS (1u << 26) /* floats over all layers */
#define RD_NN_FLAT_MAGIC 0x4E4E4452u /* "RDNN" read as a little-endian u32 */
#define RD_NN_FLAT_VERSION 1u

typedef enum {
  RD_NN_IDENTITY = 0,
  RD_NN_RELU = 1,
  RD_NN_TANH = 2,
} rd_nn_act_t;

typedef struct {
  uint32_t n_layers;                    /* L, 1..RD_NN_MAX_LAYERS */
  uint32_t sizes[RD_NN_MAX_LAYERS + 1]; /* sizes[0] input ... sizes[L] output */
  rd_nn_act_t act[RD_NN_MAX_LAYERS];    /* activation of layer l's output */
} rd_nn_spec_t;

/* "identity", "relu", "tanh", or "invalid". */
const char *rd_nn_act_name(rd_nn_act_t a);

/* RD_EINVAL with a message naming the bad layer or size. */
int rd_nn_spec_validate(const rd_nn_spec_t *s, rd_error_t *err);

/* Number of float parameters of a valid spec (0 if s is invalid). */
size_t rd_nn_spec_params(const rd_nn_spec_t *s);

/* Offset, in floats, of W_l in the parameter block of a valid spec; b_l
 * starts sizes[l+1] * sizes[l] floats later. l == n_layers gives the total. */
size_t rd_nn_spec_offset(const rd_nn_spec_t *s, uint32_t l);

/* Largest layer width (input included) of a valid spec. */
uint32_t rd_nn_spec_max_width(const rd_nn_spec_t *s);

/* 1 if a and b describe the same network (layers, sizes, activations). */
int rd_nn_spec_equal(const rd_nn_spec_t *a, const rd_nn_spec_t *b);

/* Bytes of the flat format for s: header plus parameters (0 if invalid). */
size_t rd_nn_flat_bytes(const rd_nn_spec_t *s);

/* Serialize s and its parameters (rd_nn_spec_params(s) floats in the layout
 * above) into buf. *written (may be NULL) receives rd_nn_flat_bytes(s).
 * Errors: RD_EINVAL (invalid spec, non-finite parameter: the message names
 * layer and index), RD_ETOOBIG (cap too small). Nothing is written on error. */
int rd_nn_flat_write(const rd_nn_spec_t *s, const float *params, void *buf, size_t cap,
                     size_t *written, rd_error_t *err);

/* Parse and validate a flat buffer of exactly len bytes. On success *spec
 * receives the network and, if params is not NULL, the parameters are
 * copied there (max_params floats available). Every malformed input is
 * RD_EINVAL with a message: short header, bad magic, unknown version,
 * layer count, sizes, activation codes, too many parameters, truncated or
 * trailing bytes, non-finite weights. RD_ETOOBIG if max_params is too small.
 * Nothing is written on error. */
int rd_nn_flat_parse(const void *buf, size_t len, rd_nn_spec_t *spec, float *params,
                     size_t max_params, rd_error_t *err);

/* Load a flat buffer into params only if it describes the network want:
 * rd_nn_flat_parse's errors, or RD_EINVAL "flat weights describe a
 * different network"; the header is checked before any parameter is
 * copied, so nothing is written on error. What every learner backend's
 * policy load does first. */
int rd_nn_flat_load(const void *buf, size_t len, const rd_nn_spec_t *want, float *params,
                    size_t max_params, rd_error_t *err);

#endif
