/*
 * x86/vmath_avx512.c — vmath.h's loops compiled with AVX-512 (CMake gives
 * *_avx512.c files those flags). Called only through the dispatch in
 * vmath.c, after the CPU check. The same C as every build, and ISO C mode
 * forbids contraction, so the results are the portable build's bits; only
 * the vector width changes (test_kern_vmath holds every tier to them).
 */
/* As in vmath_avx2.c: blends instead of branches, values unchanged. GCC's
 * generic tuning vectorises AVX-512 code in 256-bit halves; full width runs
 * the exp-based loops 1.3-1.8× faster on Zen 4, whose 512-bit operations
 * issue as one instruction where 256-bit code needs two. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#pragma GCC target("prefer-vector-width=512")
#endif

#include "../kern.h"
#include "../vmath.h"

#if defined(__x86_64__) && defined(__AVX512F__)
VM_LOOPS(avx512)
#endif
