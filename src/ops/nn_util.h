/*
 * nn_util.h — helpers shared by the reduce, softmax, norm, conv and pool
 * operator families: attribute readers that validate as they read, axis
 * normalisation, and float16/bfloat16 staging (those dtypes are computed in
 * fp32: each input is widened into scratch, the fp32 kernel runs, and the
 * result is narrowed into the output with round-to-nearest-even).
 *
 * Everything here is op glue (it may call op_scratch/op_fail); the pure
 * kernels that tests compare against their references live in nn_cpu.h.
 */
#ifndef TOLK_NN_UTIL_H
#define TOLK_NN_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/half.h"
#include "nn_cpu.h"
#include "op.h"

/* The status op_fail() recorded on c (for returning after a helper that
 * reported NULL/-1). */
static inline tolk_status nn_status(const struct op_ctx *c) {
  return c->err && c->err->status != TOLK_OK ? c->err->status : TOLK_ERR_INTERNAL;
}

/* Reads the INTS attribute `name` of `node` into out[0..max). Returns the
 * count, or -1 when the attribute is absent; -2 (with err set) when it has
 * more than `max` entries or is not an INTS attribute. */
int nn_attr_ints(const struct ir_node *node, const char *name, int64_t *out, int max,
                 tolk_error *err);

/* Maps axis in [-rank, rank) to [0, rank). False when out of range. */
bool nn_axis(int64_t axis, int rank, int *out);

/* True for float, double, float16, bfloat16. */
bool nn_is_float(int32_t dtype);

/* fp16/bf16 <-> fp32 element conversions (src/core/half.h). */
static inline float nn_h2f(uint16_t h) { return tolk_f16_to_f32(h); }
static inline uint16_t nn_f2h(float f) { return tolk_f32_to_f16(f); }
static inline float nn_bf2f(uint16_t h) { return tolk_bf16_to_f32(h); }
static inline uint16_t nn_f2bf(float f) { return tolk_f32_to_bf16(f); }

/* Returns t's elements as fp32: t->data itself for float tensors, else a
 * converted copy (from float16, bfloat16 or double) in run scratch. NULL with
 * c->err set when scratch runs out or the dtype is not one of those. */
const float *nn_in_f32(struct op_ctx *c, const struct tensor *t);

/* Where an fp32 kernel should write output `out`: out->data for float
 * outputs, else run scratch of out->numel floats that nn_out_f32_finish()
 * narrows into out. NULL with c->err set on failure. */
float *nn_out_f32(struct op_ctx *c, struct tensor *out);
void nn_out_f32_finish(struct tensor *out, const float *buf);

/* The same for double: nn_in_f64 widens float, float16 and bfloat16 inputs
 * exactly; nn_out_f64_finish rounds into the output's dtype. */
const double *nn_in_f64(struct op_ctx *c, const struct tensor *t);
double *nn_out_f64(struct op_ctx *c, struct tensor *out);
void nn_out_f64_finish(struct tensor *out, const double *buf);

/* Reads element i of a numeric tensor as double / int64 (for small side
 * inputs such as axes or scales, never for bulk data). */
double nn_get_f64(const struct tensor *t, int64_t i);
int64_t nn_get_i64(const struct tensor *t, int64_t i);

/* Parses the axes of a reduction-like op given as an INT64/INT32 tensor `t`
 * (may be NULL) into out[] normalised and checked for range and duplicates.
 * Returns the count (0 for an absent or empty tensor), -1 with c->err set on
 * a bad axis. */
int nn_axes_from_tensor(struct op_ctx *c, const struct tensor *t, int rank, int *out);

/* Reads the sliding-window attributes shared by Conv, ConvTranspose and the
 * pools — auto_pad, strides, pads and (when `dilations_allowed`) dilations —
 * for an input of spatial extent in[0..nsp) and a kernel k[0..nsp), into w
 * (pads explicit or 0; w->out is left for nn_window_out). Checks counts and
 * signs; errors name the attribute. */
tolk_status nn_window_attrs(struct op_ctx *c, int nsp, const int64_t *in, const int64_t *k,
                            bool dilations_allowed, struct nn_window *w,
                            enum nn_auto_pad *auto_pad);

#endif /* TOLK_NN_UTIL_H */
