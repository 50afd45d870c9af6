/*
 * sgemm_impl.h — the contract between the GEMM driver (sgemm.c: dispatch,
 * packing, blocking, threading) and the per-ISA micro-kernels
 * (sgemm_scalar.c, x86/sgemm_avx2.c, x86/sgemm_avx512.c). A micro-kernel
 * computes one register tile of C; everything else is ISA-independent.
 * Internal to src/kern/.
 */
#ifndef TOLK_SGEMM_IMPL_H
#define TOLK_SGEMM_IMPL_H

#include <stdint.h>

#include "kern.h"

/* Bounds on the ISAs' blocking, sizing the driver's per-thread buffers. */
#define SGEMM_MAX_NR 32
#define SGEMM_MAX_KC 256
#define SGEMM_MAX_MC 96
/* Columns of B packed per block when B is not prepacked (a multiple of every
 * NR): KC × NC floats, 256 KiB, stay in L2 while the row blocks go by. */
#define SGEMM_NC 256
/* Columns per call of the row-streaming small-m kernel (a multiple of every
 * vector width): its MR × ROWS_NC sums, 6 KiB, stay in L1. */
#define SGEMM_ROWS_NC 256

/* C[0:mr, 0:nr] = alpha * A[0:mr, 0:kc] * B[0:kc, 0:NR] + beta * C, where
 * A(i, p) is a[i * rs_a + p * cs_a], row p of B is the NR floats at
 * b + p * rs_b (rs_b = NR for a packed panel; B's own row stride when it is
 * read in place), and beta == 0 means C is write-only. All NR columns of B
 * are read: those past nr must be readable (finite values keep it fast) but
 * do not reach C. 1 ≤ mr ≤ MR, 1 ≤ nr ≤ NR, kc ≥ 1. */
typedef void (*sgemm_tile_fn)(int64_t mr, int64_t nr, int64_t kc, const float *a,
                              int64_t rs_a, int64_t cs_a, const float *b, int64_t rs_b,
                              float *c, int64_t ldc, float alpha, float beta);

/* C[0:mr, 0:nc] = alpha * A[0:mr, 0:k] * B[0:k, 0:nc] + beta * C with B read
 * in place (row p at b + p * rs_b, only its first nc floats touched), for
 * mr ≤ MR and nc ≤ SGEMM_ROWS_NC; A as for the tile. */
typedef void (*sgemm_rows_fn)(int64_t mr, int64_t nc, int64_t k, const float *a,
                              int64_t rs_a, int64_t cs_a, const float *b, int64_t rs_b,
                              float *c, int64_t ldc, float alpha, float beta);

/* out[0:n] = (q[i] - zp) * scale for n 8-bit codes (signed or not), n a
 * multiple of the vector width: the floats a code panel stands for. */
typedef void (*sgemm_dq_fn)(const uint8_t *q, int64_t n, bool is_signed, int32_t zp, float scale,
                            float *out);

/* out[0:n] = the floats of n bfloat16 values (their bits shifted up), n a
 * multiple of the vector width: exact. */
typedef void (*sgemm_bf16_fn)(const uint16_t *q, int64_t n, float *out);

/* Packed panels as sgemm_few_rows_fn reads them: from b (row pc of the
 * first), one panel every `stride` elements, of floats, bfloat16 or 8-bit
 * codes standing for (q - zp) * scale; SGEMM_C8's are int8 codes with zp 0,
 * stored so (q - zp fit in int8, kern_sgemm_pack_b_q8), which saves a
 * subtraction per element. */
enum { SGEMM_F32, SGEMM_BF16, SGEMM_S8, SGEMM_U8, SGEMM_C8 };
/* The kind of a panel of codes, signed or not, with zero point zp. */
static inline int sgemm_code_kind(bool is_signed, int32_t zp) {
  return !is_signed ? SGEMM_U8 : zp ? SGEMM_S8 : SGEMM_C8;
}
struct sgemm_panels {
  const void *b;
  int64_t stride;
  int kind;
  int32_t zp;
  float scale;
};

/* Rows 1 ≤ rows ≤ SGEMM_FEW_ROWS of C against sgemm_few_panels(rows)
 * consecutive panels, kc rows each, the last panel's first nr_last columns
 * stored: C = alpha * sums + beta * C, bit for bit what the tile gives panel
 * by panel (sgemm_tmpl.h). */
#define SGEMM_FEW_ROWS 3
static inline int sgemm_few_panels(int rows) { return rows == 1 ? 4 : rows == 2 ? 3 : 2; }
typedef void (*sgemm_few_rows_fn)(int rows, int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                  const struct sgemm_panels *pp, float *c, int64_t ldc, int64_t nr_last,
                                  float alpha, float beta);

struct sgemm_ukr {
  enum kern_isa isa;
  int mr, nr; /* register tile: mr rows × nr columns of C */
  int kc;     /* k block: a kc × nr panel of B stays in L1 */
  int mc;     /* row block: an mc × kc block of A stays in L2 (multiple of mr) */
  sgemm_tile_fn tile;
  sgemm_rows_fn rows;
  sgemm_dq_fn dq;
  sgemm_bf16_fn bf16;
  sgemm_few_rows_fn few_rows;
};

/* A packed op(B) (kern.h), in one of its forms. */
struct kern_packed_b {
  const struct sgemm_ukr *u;
  int64_t k, n;
  float *data;    /* ceil(n / NR) panels of k × NR */
  uint8_t *codes; /* or the same as 8-bit codes (kern_sgemm_pack_b_q8) */
  uint16_t *bf16; /* or as bfloat16 (kern_sgemm_pack_b_bf16) */
  /* or as bfloat16 pairs along k for the dot-product GEMM (bf16dot.c):
   * ceil(n / BF16DOT_NR) panels of ceil(k / 2) × BF16DOT_NR pairs */
  uint32_t *pairs;
  bool is_signed;
  int32_t zp;
  float scale;
  size_t bytes;
};

/* A packer's reports to its kern_read_fn (kern.h): B's bytes, n rows
 * (trans_b) or k rows of ldb floats, the last one's used part only, each
 * once and in order — a panel's rows as the panel is done when B is read by
 * rows, else all at the end. */
struct b_reads {
  kern_read_fn read;
  const unsigned char *b;
  bool trans_b;
  int64_t n, ldb;
  size_t total, done;
};

static inline struct b_reads b_reads_start(kern_read_fn read, const void *b, bool trans_b, int64_t k, int64_t n,
                                           int64_t ldb) {
  const int64_t rows = trans_b ? n : k, used = trans_b ? k : n;
  struct b_reads r = {read, b, trans_b, n, ldb, 0, 0};
  r.total = rows > 0 ? ((size_t)(rows - 1) * (size_t)ldb + (size_t)used) * sizeof(float) : 0;
  return r;
}

/* Columns [0, upto) of op(B) are packed. */
static inline void b_reads_panel(struct b_reads *r, int64_t upto) {
  if (!r->read || !r->trans_b) return;
  const size_t end = upto == r->n ? r->total : (size_t)(upto * r->ldb) * sizeof(float);
  r->read(r->b + r->done, end - r->done);
  r->done = end;
}

static inline void b_reads_end(struct b_reads *r) {
  if (r->read && r->done < r->total) r->read(r->b + r->done, r->total - r->done);
}

/* A GEMM's task grid: row tasks × panel tasks, task t taking rows
 * [t % row_tasks * rows_per_task, +rows_per_task) and panels
 * [t / row_tasks * panels_per_task, +panels_per_task), both cut at the end. */
struct gemm_grid {
  int64_t panels; /* ceil(n / nr) */
  int64_t panels_per_task, rows_per_task, row_tasks;
  int64_t tasks;
};

/* The grid for m × n × k with mr × nr tiles on `threads`: tasks of ~64
 * kflop at least, 2 a thread (4 at a single tile height), rows split in whole
 * tiles only where the panels are too few to go round, a task's panels a
 * whole number of `group`s (1: any). */
struct gemm_grid kern_gemm_grid(int64_t m, int64_t n, int64_t k, int64_t mr, int64_t nr, int64_t group,
                                int64_t threads);

/* This thread's scratch buffer: 64-byte aligned, at least `bytes`, kept for
 * its next GEMM (grown when asked for more, its contents then lost) and freed
 * when the thread exits; NULL when out of memory. One per thread, shared by
 * the GEMMs, which never hold it across calls. */
void *kern_thread_buf(size_t bytes);

/* bf16dot.c: kern_sgemm_packed's product for a B of pairs. */
void kern_bf16dot_run(bool trans_a, int64_t m, float alpha, const float *a, int64_t lda,
                      const struct kern_packed_b *b, float beta, const float *bias, float *c, int64_t ldc,
                      struct tolk_pool *pool);

extern const struct sgemm_ukr kern_sgemm_ukr_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const struct sgemm_ukr kern_sgemm_ukr_avx2;
extern const struct sgemm_ukr kern_sgemm_ukr_avx512;
#endif

#endif /* TOLK_SGEMM_IMPL_H */
