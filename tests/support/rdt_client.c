/* rdt_client.c - client-side schema builders (rdt_client.h). */
#include "rdt_client.h"

#include <stdio.h>
#include <string.h>

void rdt_client_field(rdc_field_t *f, const char *name, rdc_dtype_t dtype, uint32_t dim) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dtype = dtype;
  f->rank = dim ? 1 : 0;
  f->shape[0] = dim;
}
