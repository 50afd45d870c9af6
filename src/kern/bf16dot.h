/*
 * bf16dot.h — the contract between the bfloat16 dot-product GEMM's driver
 * (bf16dot.c: packing, threading, the portable tier) and its AVX512-BF16
 * tier (x86/bf16dot_avx512bf16.c). Internal to src/kern/.
 *
 * The arithmetic, on every tier: A and B are rounded to bfloat16 as
 * VCVTNEPS2BF16 rounds (to nearest even; a float below the normal range
 * becomes a zero of its sign, a NaN a quiet NaN), and k is taken in pairs,
 * each output's sum one chain over them from +0: for pair p, the product of
 * elements 2p + 1 is added first, then that of 2p, each addition rounded to
 * nearest even with the product exact, as VDPBF16PS does; a denormal result
 * becomes a zero of its sign, a denormal input counts as zero. An odd k has a
 * zero pair element after the last. Then C = alpha * sum (+ beta * C, one
 * fused rounding), then + bias.
 */
#ifndef TOLK_BF16DOT_H
#define TOLK_BF16DOT_H

#include <stdbool.h>
#include <stdint.h>

/* Columns a packed panel holds: two 16-lane vectors. */
#define BF16DOT_NR 32
/* Rows of C a tile computes at most: 16 accumulators of the 32 zmm. */
#define BF16DOT_MR 8

/* Whether this build has the AVX512-BF16 tier (the compiler took
 * -mavx512bf16); the caller checks the CPU. */
bool kern_bf16dot_avx512bf16_built(void);

/* pairs[0 .. (k + 1) / 2) = x[0 .. k) rounded as above, element 2p in the
 * low half of pair p, a zero after an odd k's last. */
void kern_bf16dot_round_avx512bf16(const float *x, int64_t k, uint32_t *pairs);

/* C[0:mr, 0:nv] as the header says, for 1 ≤ mr ≤ MR and 1 ≤ nv ≤ NR: A's row
 * i is the kp pairs at a + i * rs_a, the panel kp rows of NR pairs (pair p
 * of column x at b[p * NR + x]); bias NULL or nv floats. Meanwhile it
 * prefetches pf_rows rows of NR pairs from pf into L2 (the next panel's share:
 * a panel read from memory by the first of its row tiles alone took it at
 * half its speed). */
void kern_bf16dot_tile_avx512bf16(int mr, int64_t kp, const uint32_t *a, int64_t rs_a, const uint32_t *b,
                                  float *c, int64_t ldc, int nv, float alpha, float beta, const float *bias,
                                  const uint32_t *pf, int64_t pf_rows);

#endif /* TOLK_BF16DOT_H */
