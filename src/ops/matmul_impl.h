/*
 * matmul_impl.h — what the files behind MatMul share: matmul_pack.c packs a
 * constant B at prepare and keeps the node's state; matmul.c (MatMul, Gemm
 * and the int8 MatMul) multiplies by it; matmul_subset.c (the LM head run
 * over a vocabulary shortlist's columns) gathers columns from the source it
 * was packed from and runs the same products on them. Internal to those
 * files; Einsum and the other families see only matmul.h.
 */
#ifndef TOLK_OPS_MATMUL_IMPL_H
#define TOLK_OPS_MATMUL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kern/igemm.h"
#include "../kern/kern.h"
#include "matmul.h"
#include "op.h"

/* ----------------------------------------------- packed B (matmul_pack.c) */

/* A constant B packed at prepare (MatMul: k×n; Gemm: op(B), k×n).
 *
 * Packed copies are shared by every node that packs the same initializer the
 * same way: the branches of Optimum's merged decoder (an If whose with-past
 * and without-past subgraphs both multiply by the outer graph's weights)
 * would otherwise hold two packed copies of every decoder weight. Entries
 * are keyed by shape, transpose and ISA, and by content: the initializers'
 * data pointers first, then equal bytes (a 64-bit hash, confirmed by
 * memcmp), so sessions on separate files holding the same weights (Marian's
 * decoder_model and decoder_with_past_model) share one packed copy.
 *
 * Why a source pointer never dangles: `srcs` lists exactly the data pointers
 * of the nodes holding the entry now (each with its count of holders), and a
 * session releases its nodes before it unmaps its model, so every pointer in
 * `srcs` is readable while it is listed. A source whose last holder goes is
 * dropped from the list even though the entry lives on for other holders;
 * an address reused by a later mapping therefore never matches by pointer,
 * and the memcmp always reads a live source. */
struct packed_src {
  const void *p;
  int holders;
  /* The session gave back p's file pages (mm_packed_src_dropped): a memcmp
   * that faults them in again gives them back too. */
  bool dropped;
};

/* A per-tensor DequantizeLinear in front of an int8/uint8 matrix. */
struct dq {
  float scale;
  int32_t zp;
};

/* How a float B is held. */
enum mm_form {
  MM_F32,  /* floats (a DequantizeLinear'd B: its codes) */
  MM_INT8, /* int8 with a scale per column, for kern_igemm_packed */
  MM_BF16, /* bfloat16 (a DequantizeLinear'd B: its codes, which are smaller) */
  MM_BF16DOT /* bfloat16 pairs for AVX512-BF16's products (a DequantizeLinear'd B: its codes) */
};

struct packed_entry {
  struct packed_entry *next; /* in the shared list */
  int refs;
  struct packed_src *srcs; /* n_srcs >= 1 while refs > 0 */
  int n_srcs, cap_srcs;
  uint64_t hash; /* of the source bytes */
  size_t nbytes; /* of the source */
  int32_t dtype;
  int64_t d0, d1; /* the initializer's dims */
  bool trans;     /* packed as its transpose */
  enum kern_isa isa;
  struct dq dq;   /* int8/uint8 sources: the dequantization packed */
  struct kern_packed_b *pb; /* NULL for an int8 entry */
  /* How pb holds op(B): MM_F32 floats (or a DequantizeLinear'd B's codes,
   * kern_sgemm_pack_b_q8), MM_BF16 bfloat16 (kern_sgemm_pack_b_bf16),
   * MM_BF16DOT bfloat16 pairs (kern_sgemm_pack_b_bf16dot); MM_INT8: qb
   * holds it quantized to int8 with a scale per column, for
   * kern_igemm_packed (tolk_matmul_int8_def), and no fp32 copy is kept. */
  enum mm_form form;
  /* mm_pack_b_codes: qb holds the initializer's own 8-bit codes as they are
   * (the MatMulInteger family's B); no col_scale. */
  bool igemm_codes;
  struct kern_igemm_b qb;
  float *col_scale; /* n entries */
};

/* A node's state: the entry, and the dtype and dims its input B has at run
 * time, to check that run() sees the tensor the entry was made from. */
struct mm_state {
  struct packed_entry *e;
  const void *src; /* the initializer data this node packed (in e->srcs) */
  size_t input;    /* the node's input it packed */
  int32_t dtype;
  int64_t d0, d1;
};

/* Packs node input 1 for kern_sgemm_packed (MM_INT8: kern_igemm_packed)
 * when it is a constant matrix, as op(B) with trans_b (Gemm's transB),
 * sharing an equal packed copy when there is one; leaves *state NULL
 * otherwise. Fails only for lack of memory. The state is the node's:
 * mm_release. */
tolk_status mm_pack_b(const struct ir_node *node, bool trans_b, enum mm_form form, void **state,
                      tolk_error *err);

/* The node's packed fp32 B when `b` is the tensor it was made from, else NULL. */
const struct kern_packed_b *mm_packed_for(const struct op_ctx *c, const struct tensor *b);

/* Quantizes op(B) to int8 with a scale per column into e->qb and
 * e->col_scale (matmul_pack.c says how); false when out of memory. read
 * (may be NULL) is told of src's bytes as they are done with, as the fp32
 * packers tell it (kern_read_fn). */
bool mm_quantize_cols(const void *src, const struct dq *dq, bool is_signed, bool trans, int64_t k, int64_t n,
                      int64_t ld, kern_read_fn read, struct packed_entry *e);

/* ---------------------------------------------------- products (matmul.c) */

/* y = A · op(B) [+ bias] for a B quantized to int8 per column (qb,
 * col_scale, n columns), each row of A quantized on its own; bias: n
 * floats added to each scaled row in the GEMM's epilogue, or NULL; y has
 * at least min_rank dims (leading ones: the rank a bias [1, n] gives Add). */
tolk_status mm_int8_product(struct op_ctx *c, const struct tensor *a, const struct kern_igemm_b *qb,
                            const float *col_scale, int64_t n, const float *bias, int min_rank);

/* dims (rank of them) with leading ones up to min_rank, as Add broadcasts
 * a product against a higher-rank [1, .., 1, n] bias; the new rank. */
int mm_widen_rank(int64_t *dims, int rank, int min_rank);

/* -------------------------------------------- shortlist (matmul_subset.c) */

/* The run of the head node when the run is restricted to a shortlist
 * (op_head_subset): A · B's columns in hs, [.., hs's n], plus bias (hs's n
 * floats) when not NULL, with at least min_rank dims (mm_widen_rank). */
tolk_status mm_head_cols_run(struct op_ctx *c, const struct op_head_subset *hs, const float *bias, int min_rank);

#endif /* TOLK_OPS_MATMUL_IMPL_H */
