/*
 * bf16.c — bfloat16 weights (tolk_session_params.bf16_weights, tolk.h): at
 * session creation every MatMul and Gemm still running as itself runs
 * tolk_matmul_bf16_def / tolk_gemm_bf16_def instead, which hold a constant
 * float B as bfloat16 (src/ops/matmul.c), or with products their
 * _bf16dot_ forms, which hold it as pairs for AVX512-BF16's dot products.
 * Nodes an earlier rewrite gave
 * another kernel keep it: the int8 LM head, the key/value cache's attention
 * products (whose B is not constant anyway).
 */
#include <string.h>

#include "exec.h"

void exec_bf16_rewrite(struct xgraph *xg, bool products) {
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    struct xnode *x = &xg->nodes[k];
    if (!x->def || x->def->domain[0]) continue;
    if (!strcmp(x->def->op_type, "MatMul"))
      x->def = products ? &tolk_matmul_bf16dot_def : &tolk_matmul_bf16_def;
    else if (!strcmp(x->def->op_type, "Gemm"))
      x->def = products ? &tolk_gemm_bf16dot_def : &tolk_gemm_bf16_def;
  }
}
