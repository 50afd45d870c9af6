/*
 * matmul.h — what the matmul family's files (matmul.c: MatMul and Gemm;
 * einsum.c: Einsum) share: one batched-GEMM entry point over every dtype the
 * family accepts, so Einsum's contraction runs on the same kernels as MatMul.
 * Internal to src/ops/.
 */
#ifndef TOLK_OPS_MATMUL_H
#define TOLK_OPS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op.h"

/* float, double, float16, bfloat16, int32, int64, uint32, uint64. */
bool mm_dtype_ok(int32_t dtype);

/* The batch of a batched product: for every index vector t over dims, the
 * product t reads A at a + sum t_d * a_st[d] and B at b + sum t_d * b_st[d]
 * (element strides; 0 where that operand is broadcast) and writes C densely
 * at c + (flat t) * m * n. rank 0 is a single product. */
struct mm_batch {
  int rank;
  int64_t dims[IR_MAX_RANK];
  int64_t a_st[IR_MAX_RANK], b_st[IR_MAX_RANK];
};

/* numpy.matmul's broadcast of the batch dims of A and B (rank >= 1; all but
 * the last two dims of each) into bt, for products of m×k elements of A and
 * k×n of B, and the result's dims into ydims (IR_MAX_RANK entries) and
 * *yrank: the batch dims, then m unless A is 1-D, then n unless B is 1-D.
 * False when the batch dims do not broadcast. */
bool mm_broadcast(const struct tensor *a, const struct tensor *b, int64_t m, int64_t n, int64_t k,
                  struct mm_batch *bt, int64_t *ydims, int *yrank);

/* The element offsets into A and B of product t of the batch. */
void mm_batch_offsets(const struct mm_batch *bt, int64_t t, int64_t *ao, int64_t *bo);

/* Runs fn(arg, ...) over `batch` products of `flops` each as MatMul does:
 * many small ones one per task with *inner (the pool each product's GEMM may
 * use, read by fn) set to NULL, else all in this thread with *inner left. */
void mm_split(struct op_ctx *c, int64_t batch, double flops, op_range_fn fn, void *arg,
              struct tolk_pool **inner);

/* C[t] (m×n) = A[t] (m×k) · B[t] (k×n) over the batch, all row-major and
 * dense, for dtype float (kern_sgemm), double (double accumulation) or an
 * integer type (two's-complement wraparound, as numpy). float16/bfloat16 are
 * the caller's to stage through float. Splits the batch over the pool when
 * each product is small, else gives the pool to each product. */
void mm_batched(struct op_ctx *c, int32_t dtype, const struct mm_batch *bt, int64_t m,
                int64_t n, int64_t k, const void *a, const void *b, void *out);

/* The MatMulInteger family's constant B — node input b_idx, a 2-D int8 or
 * uint8 initializer no caller can override — packed once for
 * kern_igemm_packed and shared by every node, in every session, that packs
 * the same bytes (matmul_pack.c): Marian's decoder_model and
 * decoder_with_past_model hold the same decoder weights. *state stays NULL
 * when B is not such a constant; fails only for lack of memory. */
struct kern_igemm_b;
tolk_status mm_pack_b_codes(const struct ir_node *node, size_t b_idx, void **state, tolk_error *err);
/* That packed B when `b` has the dtype and shape it was packed from, else NULL. */
const struct kern_igemm_b *mm_packed_codes(const void *state, const struct tensor *b);

/* op_def.release, packed_input and packed_src_dropped of every node whose
 * state mm_pack_b or mm_pack_b_codes made. */
void mm_release(void *state);
bool mm_packed_input(const void *state, size_t input, struct tensor *shape);
bool mm_packed_src_dropped(const void *state, const void *data);

/* A state holding the fp32 copy some MatMul or Gemm packed from all of
 * `table` (an initializer) as op(B) = tableᵀ: column j of the copy is row j
 * of the table, the same floats. NULL when no node packed it that way (or
 * memory ran out). Released with mm_release; mm_state_packed gives the copy. */
void *mm_rows_acquire(const struct ir_value *table);
struct kern_packed_b;
const struct kern_packed_b *mm_state_packed(const void *state);

/* The packed copies of constant MatMul/Gemm inputs alive now, across all
 * sessions (shared by content; matmul_pack.c): how many, and their bytes.
 * For tests and diagnostics; either pointer may be NULL. */
void op_packed_stats(size_t *entries, size_t *bytes);

/* Einsum (einsum.c). */
tolk_status einsum_prepare(const struct ir_node *node, int64_t opset, void **state,
                           tolk_error *err);
tolk_status einsum_run(struct op_ctx *c);
void einsum_release(void *state);

#endif /* TOLK_OPS_MATMUL_H */
