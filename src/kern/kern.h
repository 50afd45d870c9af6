/*
 * kern.h — dense compute kernels used by several operator families. Each has a
 * plain scalar reference (`_ref`) that tests compare the dispatched fast path
 * against. The fast path is picked once at run time from the CPU's features
 * (AVX-512, AVX2+FMA, scalar); TOLK_ISA=avx512|avx2|scalar in the environment
 * forces one.
 */
#ifndef TOLK_KERN_H
#define TOLK_KERN_H

#include <stdbool.h>
#include <stdint.h>

struct tolk_pool;

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

#endif /* TOLK_KERN_H */
