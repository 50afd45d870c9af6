/*
 * nn_avx2.h — the AVX2 + FMA row kernels of nn_avx2.c and the check that
 * picks them. Callers use them only when nn_use_avx2() is true; the portable
 * kernels in norm_cpu.c / softmax_cpu.c are the fallback and the references'
 * peers in tests.
 */
#ifndef TOLK_NN_AVX2_H
#define TOLK_NN_AVX2_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include "../kern/kern.h"
#define NN_HAVE_AVX2 1

/* True when the dispatched ISA (kern_isa_active: the CPU's best, or
 * TOLK_ISA) includes AVX2 + FMA. */
static inline bool nn_use_avx2(void) { return kern_isa_active() >= KERN_ISA_AVX2; }

/* As nn_layernorm_f32 / nn_rmsnorm_f32 (nn_cpu.h). */
void nn_layernorm_f32_avx2(const float *x, float *y, int64_t rows, int64_t n,
                           const float *scale, const float *bias, float eps, float *mean,
                           float *inv_std);
void nn_rmsnorm_f32_avx2(const float *x, float *y, int64_t rows, int64_t n,
                         const float *scale, float eps);
/* Softmax (or LogSoftmax) of one contiguous row of n >= 1 floats. */
void nn_softmax_row_f32_avx2(bool log_softmax, const float *x, float *y, int64_t n);
#else
#define NN_HAVE_AVX2 0
static inline bool nn_use_avx2(void) { return false; }
#endif

#endif /* TOLK_NN_AVX2_H */
