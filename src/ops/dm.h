/*
 * dm.h — helpers shared by the data-movement operator families (shape.c,
 * copy.c, index.c, sort.c): reading small integer tensors (shapes, axes,
 * pads), normalising axes, loading and storing one element of any numeric
 * dtype as a double, and the strided copy engine most layout operators
 * reduce to (Transpose, Slice, Expand, Tile, Concat, Split, DepthToSpace).
 *
 * Those operators move bytes, not numbers: they work on the element size, so
 * every fixed-size dtype (complex and 16-bit floats included) goes through the
 * same code. Strings have no fixed size in the runtime's tensors and are
 * reported as unsupported.
 */
#ifndef TOLK_OPS_DM_H
#define TOLK_OPS_DM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op.h"

/* Tile doubles the rank (one dim for the repeat, one for the data). */
#define DM_MAX_RANK (2 * IR_MAX_RANK)

/* op_output() as a status: *out receives the tensor. */
static inline tolk_status dm_output(struct op_ctx *c, size_t i, int32_t dtype, int rank,
                                    const int64_t *dims, struct tensor **out) {
  *out = op_output(c, i, dtype, rank, dims);
  if (*out) return TOLK_OK;
  return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
}

/* Byte size of one element for a byte-moving kernel; 0 when the dtype has no
 * fixed size (strings) or is unknown. */
size_t dm_esize(int32_t dtype);

/* Like dm_esize(), but fails the op with a message naming `what` (e.g.
 * "input 0") when the dtype cannot be moved bytewise. */
tolk_status dm_need_esize(struct op_ctx *c, const struct tensor *t, const char *what,
                          size_t *esize);

/* True for the dtypes ONNX allows in index/shape tensors (int32, int64). */
bool dm_is_index_dtype(int32_t dtype);

/* Element i of an int32 or int64 tensor (the caller checked the dtype). */
static inline int64_t dm_index_at(const struct tensor *t, int64_t i) {
  return t->dtype == TOLK_INT32 ? ((const int32_t *)t->data)[i]
                                : ((const int64_t *)t->data)[i];
}

/* Reads a rank-0 or rank-1 int32/int64 tensor into out[0..*n). Fails naming
 * `what` on another dtype, a higher rank or more than `cap` values. */
tolk_status dm_read_ints(struct op_ctx *c, const struct tensor *t, const char *what,
                         int64_t *out, int64_t cap, int64_t *n);

/* Reads a single integer (rank 0, or rank 1 with one element) of an
 * int32/int64 tensor. */
tolk_status dm_read_int_scalar(struct op_ctx *c, const struct tensor *t, const char *what,
                               int64_t *out);

/* Copies an INTS attribute into out[0..*n) (at most `cap`); *n = -1 when the
 * attribute is absent. Fails on a wrong attribute type or too many values. */
tolk_status dm_attr_ints(const struct ir_node *node, const char *name, int64_t *out,
                         int64_t cap, int64_t *n, tolk_error *err);

/* Normalises an axis in [-rank, rank) to [0, rank); fails naming `what`. */
tolk_status dm_axis(struct op_ctx *c, int64_t axis, int rank, const char *what, int *out);

/* Row-major element strides of a dense tensor. */
void dm_dense_strides(int rank, const int64_t *dims, int64_t *strides);

/* True for dtypes dm_get_f64()/dm_set_f64() handle: the real numeric types
 * and bool. */
bool dm_is_numeric(int32_t dtype);

/* Element i of a numeric tensor buffer as a double (exact except for 64-bit
 * integers beyond 2^53). */
double dm_get_f64(int32_t dtype, const void *data, int64_t i);
/* Stores v into element i, converting as a C cast would (float16/bfloat16 are
 * rounded to nearest even; bool stores v != 0). */
void dm_set_f64(int32_t dtype, void *data, int64_t i, double v);

float dm_f16_to_f32(uint16_t h);
uint16_t dm_f32_to_f16(float f);
float dm_bf16_to_f32(uint16_t h);
uint16_t dm_f32_to_bf16(float f);

/* memcpy of n bytes, split over the pool when it is large. Safe for n == 0
 * with NULL pointers. */
void dm_memcpy(struct op_ctx *c, void *dst, const void *src, size_t n);

/* Writes `count` copies of the esize-byte element `elem` into dst. */
void dm_fill(struct op_ctx *c, void *dst, const void *elem, size_t esize, int64_t count);

/* Allocates output `out_i` with `t`'s dtype and the given shape and copies
 * t's bytes into it (Reshape, Flatten, Squeeze, Identity…). The element
 * counts must match (the caller checked). */
tolk_status dm_copy_reshaped(struct op_ctx *c, size_t out_i, const struct tensor *t,
                             int rank, const int64_t *dims);

/* A strided copy: for every index vector i over dims,
 *   dst[sum i_k * dst_st[k]] = src[sum i_k * src_st[k]]
 * with strides in elements. src strides may be zero (broadcast) or negative
 * (reversed slices); the pointers given to dm_strided() are those of element
 * (0, …, 0). */
struct dm_copy {
  int rank;
  int64_t dims[DM_MAX_RANK];
  int64_t dst_st[DM_MAX_RANK];
  int64_t src_st[DM_MAX_RANK];
};

/* Runs the copy, merging contiguous dims and using memcpy for contiguous
 * rows; large copies are split over the pool. */
void dm_strided(struct op_ctx *c, const struct dm_copy *plan, void *dst, const void *src,
                size_t esize);

/* A plan that writes the dense output of `rank`/`dims` from a source with the
 * given element strides. */
void dm_plan_dense_dst(struct dm_copy *p, int rank, const int64_t *dims,
                       const int64_t *src_st);

#endif /* TOLK_OPS_DM_H */
