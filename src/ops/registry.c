/*
 * registry.c — finds the operator def for a node. Families are searched in a
 * fixed order; within a family the first def whose opset range covers the
 * node wins.
 */
#include <string.h>

#include "op.h"

static const struct op_def *const families[] = {
    tolk_ops_elementwise, tolk_ops_activation, tolk_ops_cast,  tolk_ops_reduce,
    tolk_ops_softmax,     tolk_ops_norm,       tolk_ops_matmul, tolk_ops_conv,
    tolk_ops_pool,        tolk_ops_shape,      tolk_ops_index, tolk_ops_control,
    tolk_ops_quant,       tolk_ops_contrib,    tolk_ops_quant_matmul, tolk_ops_quant_conv, tolk_ops_copy,
    tolk_ops_contrib_norm, tolk_ops_attention,
    tolk_ops_sort, tolk_ops_resize,
};

const struct op_def *op_find(const char *domain, const char *op_type, int64_t opset) {
  if (strcmp(domain, "ai.onnx") == 0) domain = "";
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    for (const struct op_def *d = families[f]; d->op_type; d++) {
      if (strcmp(d->op_type, op_type) != 0 || strcmp(d->domain, domain) != 0) continue;
      if (opset >= d->since && (d->until == 0 || opset <= d->until)) return d;
    }
  }
  return NULL;
}
