/* rdt_client.h - schema builders for tests and benches that talk to a
 * daemon through the C client (clients/c/replayd_client.h).
 *
 * Contract: the builders overwrite what they are given and allocate nothing.
 */
#ifndef RDT_CLIENT_H
#define RDT_CLIENT_H

#include <stdint.h>

#include "replayd_client.h"

/* A field of dtype: a scalar when dim is 0, else a vector of dim. */
void rdt_client_field(rdc_field_t *f, const char *name, rdc_dtype_t dtype, uint32_t dim);

#endif
