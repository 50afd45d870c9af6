/*
 * kern.h — dense compute kernels used by several operator families. Each has a
 * plain scalar reference (`_ref`) that tests compare the dispatched fast path
 * against. The fast path is picked once at run time from the CPU's features
 * (AVX-512, AVX2+FMA, scalar); TOLK_ISA=avx512|avx2|scalar in the environment
 * forces one (an ISA the CPU lacks falls back to the best it has).
 *
 * GEMM comes in two forms: kern_sgemm() takes B as it lies in memory and
 * packs it piecewise on the fly (for activations × activations; with m ≤ the
 * register tile's height, 6, it streams B by rows in place instead), and
 * kern_sgemm_packed() takes B packed once by kern_sgemm_pack_b() (for constant
 * weights, packed at session creation). Both split the work over n (and over
 * m when n is narrow) on the pool; with m ≤ 6 (a decoder step, a small beam)
 * the packed form streams B exactly once, front to back. Results do not
 * depend on the thread count, nor on m: every path sums k in the same blocks
 * with the same FMA chains, so a row of C comes out bit for bit the same
 * computed alone or among other rows (a sentence translates the same in any
 * batch), and zero columns appended to A (with any finite rows of B) leave C
 * unchanged (a padded batch).
 */
#ifndef TOLK_KERN_H
#define TOLK_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

struct tolk_pool;

/* ------------------------------------------------------------ dispatch */

enum kern_isa {
  KERN_ISA_SCALAR = 0, /* portable C: baseline ISA only (SSE2 on x86-64) */
  KERN_ISA_AVX2 = 1,   /* AVX2 + FMA */
  KERN_ISA_AVX512 = 2  /* AVX-512 F/BW/DQ/VL */
};

/* The ISA the dispatched kernels use: TOLK_ISA's when set and supported,
 * otherwise the best this CPU supports. Decided on first use. */
enum kern_isa kern_isa_active(void);
/* Whether this build and this CPU can run `isa`. */
bool kern_isa_supported(enum kern_isa isa);
/* "scalar", "avx2" or "avx512". */
const char *kern_isa_name(enum kern_isa isa);
/* For tests and benchmarks: makes later calls use `isa`. Returns false (and
 * changes nothing) when it is not supported. Not safe while other threads
 * run kernels. */
bool kern_isa_force(enum kern_isa isa);

/* ---------------------------------------------------------------- sgemm */

/* C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is m×k (A is k×m
 * when trans_a), op(B) is k×n (B is n×k when trans_b). lda/ldb/ldc are row
 * strides in elements. beta == 0 means C is write-only (NaNs in it are
 * ignored). pool may be NULL. */
void kern_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                float *c, int64_t ldc, struct tolk_pool *pool);
void kern_sgemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int64_t ldc);

/* op(B) (k×n) repacked into column panels of the register tile's width, each
 * panel's k rows contiguous, for the ISA active when it was packed. Opaque;
 * immutable once made, so any number of threads may use one at a time. */
struct kern_packed_b;

/* Packs op(B) (B is k×n floats, or n×k when trans_b, row stride ldb in
 * elements). b need not be aligned for float: it is read bytewise, so
 * weights left misaligned in a model's mapping pack without a staging copy.
 * On success *out owns a copy (the caller frees it with kern_packed_b_free;
 * b is not referenced afterwards). Fails with TOLK_ERR_LIMIT when the size
 * overflows and TOLK_ERR_NO_MEMORY when allocation fails. */
tolk_status kern_sgemm_pack_b(bool trans_b, int64_t k, int64_t n, const void *b,
                              int64_t ldb, struct kern_packed_b **out, tolk_error *err);
/* The same for an op(B) given as 8-bit codes (int8 when is_signed, else
 * uint8; k×n or n×k bytes, row stride ldb) standing for (q - zp) * scale,
 * DequantizeLinear's per-tensor form: the codes are packed, a quarter of the
 * floats' memory, and kern_sgemm_packed() dequantizes each piece of a panel
 * as it reaches it, to exactly the floats kern_sgemm_pack_b() would hold for
 * the dequantized matrix, so C comes out bit for bit the same. The price is
 * that work per use: slower where B is reused across many rows, faster where
 * a few rows stream B from memory (a decoder step's LM head). A zero point
 * outside the codes' range fails with TOLK_ERR_INVALID_ARGUMENT. */
tolk_status kern_sgemm_pack_b_q8(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                 bool is_signed, float scale, int32_t zp,
                                 struct kern_packed_b **out, tolk_error *err);
/* The same for op(B) rounded to bfloat16 (B given as floats, as for
 * kern_sgemm_pack_b), to nearest even: half the floats' memory, and
 * kern_sgemm_packed() widens each piece of a panel as it reaches it, so C
 * comes out bit for bit as kern_sgemm_pack_b() of the rounded matrix gives
 * it. A is not rounded: products and sums stay fp32. For a few rows that
 * stream B from memory (a decoder step) it halves the bytes read. */
tolk_status kern_sgemm_pack_b_bf16(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                   struct kern_packed_b **out, tolk_error *err);
/* Told of each stretch of B a packer has read for the last time, in order,
 * every byte once: matmul_pack.c gives back the pages of a B that lies in a
 * file mapping as the packing goes, so that a tied 133 MB LM head is not
 * resident twice, as the model's bytes and as its packed copy, until the
 * session is made (it set the load's peak RSS). */
typedef void (*kern_read_fn)(const void *p, size_t n);
/* kern_sgemm_pack_b (bf16 false) or kern_sgemm_pack_b_bf16 (true), calling
 * read (may be NULL) after each panel when trans_b, whose panels take B's
 * rows front to back, else once at the end. */
tolk_status kern_sgemm_pack_b_read(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb, bool bf16,
                                   kern_read_fn read, struct kern_packed_b **out, tolk_error *err);
/* NULL is a no-op. */
void kern_packed_b_free(struct kern_packed_b *pb);
/* Memory for packed weights (bytes > 0), 64-byte aligned, released by
 * kern_free_weights; from 256 KiB up on 2 MiB pages where the kernel grants
 * them (a hint), for weights a product streams from memory on every use
 * (weights.c). NULL when out of memory. */
void *kern_alloc_weights(size_t bytes);
/* NULL is a no-op. */
void kern_free_weights(void *p);
/* Address space the shared huge-page slabs hold now (tests). */
size_t kern_weights_slab_bytes(void);
/* Bytes the packed copy holds (for memory statistics). */
size_t kern_packed_b_bytes(const struct kern_packed_b *pb);
/* Column j of a B packed as floats (kern_sgemm_pack_b_read, bf16 false)
 * into out[0..k): the very floats op(B) had there. False, nothing written,
 * for bfloat16 or 8-bit packings, or j outside [0, n). */
bool kern_packed_b_column(const struct kern_packed_b *pb, int64_t j, float *out);

/* As kern_sgemm() with B = the packed matrix; n and k must be the ones it was
 * packed with (a programmer error otherwise). */
void kern_sgemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const struct kern_packed_b *b,
                       float beta, float *c, int64_t ldc, struct tolk_pool *pool);
/* C = A·B + bias (A m×k, bias n floats): each element's sum rounded as
 * kern_sgemm_packed leaves it, then the bias added — bit for bit MatMul
 * followed by Add, without the second pass over C (added per tile while it
 * is in cache). */
void kern_sgemm_packed_bias(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                            const struct kern_packed_b *b, const float *bias, float *c, int64_t ldc,
                            struct tolk_pool *pool);

/* ------------------------------------------------ bfloat16 dot products */

/* op(B) rounded to bfloat16 and packed in pairs along k (B as for
 * kern_sgemm_pack_b; read as for kern_sgemm_pack_b_read). kern_sgemm_packed
 * and kern_sgemm_packed_bias then round A to bfloat16 too and take the
 * products in pairs as AVX512-BF16's VDPBF16PS does (bf16dot.h gives the
 * arithmetic exactly): twice the products an instruction of fp32 FMAs, half
 * the weight memory, C off the fp32 product by both operands' rounding.
 * The same bits on every CPU. */
tolk_status kern_sgemm_pack_b_bf16dot(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                      kern_read_fn read, struct kern_packed_b **out, tolk_error *err);
/* Whether those products run on AVX512-BF16 here: the CPU has it, the build
 * took -mavx512bf16 and the active ISA is AVX-512 (TOLK_ISA=avx2 turns it
 * off). Elsewhere they run in portable C, bit for bit the same and many
 * times slower: a session refuses the option there (tolk.h). */
bool kern_bf16dot_fast(void);
/* The reference: C (m×n, ldc) from float A (m×k, lda) and B (k×n, ldb), one
 * element at a time, bias NULL or n floats. */
void kern_bf16dot_ref(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, const float *bias, float *c, int64_t ldc);
/* For tests: true runs the products in portable C even where AVX512-BF16 is.
 * Not safe while other threads run kernels. */
void kern_bf16dot_force_portable(bool on);

/* ---------------------------------------------------------------- vmath
 * Fast float functions (vmath.h has the method and error bounds), used by
 * the elementwise operators and the translator's log-softmax. */
enum kern_vm_fn { KERN_VM_EXP, KERN_VM_SIGMOID, KERN_VM_TANH, KERN_VM_ERF, KERN_VM_GELU, KERN_VM_GELU_TANH };

/* y[i] = f(x[i]) for n floats (y may be x), on the best ISA available. */
void kern_vm_f32(enum kern_vm_fn f, int64_t n, float *y, const float *x);
/* The same at the baseline ISA: bit-identical results, for tests. */
void kern_vm_f32_portable(enum kern_vm_fn f, int64_t n, float *y, const float *x);

/* y = x - max(x) - log Σ exp(x - max(x)) over a row of n floats (y may be
 * x), the log-softmax transformers' search takes of each row of logits:
 * exps as kern_vm_f32's, summed in double in a fixed order, so every ISA
 * gives the same bits. A row of -Inf only is copied unchanged. */
void kern_log_softmax_f32(int64_t n, float *y, const float *x);
/* The same at the baseline ISA, for tests. */
void kern_log_softmax_f32_portable(int64_t n, float *y, const float *x);

/* kern_log_softmax_f32's two constants without its output: it writes y[i] =
 * (x[i] - *mx) - lse, lse the value returned (both 0 for a row with nothing
 * above -Inf), so a caller that reads the log-probs once can make them as it
 * reads, bit for bit. */
float kern_log_softmax_terms_f32(int64_t n, const float *x, float *mx);
float kern_log_softmax_terms_f32_portable(int64_t n, const float *x, float *mx);

/* The first g = from, from + 8, … with g + 8 ≤ n such that some element of
 * x[g .. g + 8) has ((x - mx) - lse) + add > thr, NaN never; the first g
 * past the whole groups when none has: where a beam search's scan of a row
 * of log-probs plus its running score next finds a group that can enter its
 * list of candidates, thr being the list's last. */
int64_t kern_next_group_above_f32(int64_t n, const float *x, int64_t from, float mx, float lse, float add,
                                  float thr);
int64_t kern_next_group_above_f32_portable(int64_t n, const float *x, int64_t from, float mx, float lse,
                                           float add, float thr);

/* The first index of the largest of x[0..n), as the scan `best = 0; best =
 * i where x[i] > x[best]` gives it on every row: NaN is never taken, but
 * x[0] stays when it is NaN or nothing is above -Inf; 0 when n ≤ 1. */
int64_t kern_argmax_f32(int64_t n, const float *x);
/* The same at the baseline ISA, for tests. */
int64_t kern_argmax_f32_portable(int64_t n, const float *x);

/* kern_argmax_f32's index, and *clear = 1 when the row has no NaN, its
 * largest is finite (or the row all -Inf), and no element before the index
 * lies within `margin` below the largest (x - max ≥ -margin, as float):
 * then subtracting any one constant c from every element, as a log-softmax
 * does, leaves the index the scan's over x - c whenever margin covers c's
 * rounding (search.c). */
int64_t kern_argmax_near_f32(int64_t n, const float *x, float margin, int *clear);
int64_t kern_argmax_near_f32_portable(int64_t n, const float *x, float margin, int *clear);

/* The smallest and largest of x[0..n), NaN passed over: *mn = FLT_MAX and
 * *mx = -FLT_MAX when nothing else is there. Where an extreme is a zero,
 * which zero (+0 or -0) is unspecified. */
void kern_minmax_f32(int64_t n, const float *x, float *mn, float *mx);
void kern_minmax_f32_portable(int64_t n, const float *x, float *mn, float *mx);

/* float16 ⇄ float for n elements (F16C when available), as half.h rounds. */
void kern_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
void kern_f32_to_f16(const float *src, uint16_t *dst, int64_t n);

#endif /* TOLK_KERN_H */
