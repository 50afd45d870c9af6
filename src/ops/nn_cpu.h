/*
 * nn_cpu.h — the pure compute kernels behind the reduce, softmax, norm, conv
 * and pool operator families (CTranslate2's ops/<op> vs <op>_cpu split: the
 * family files parse attributes, check shapes and dispatch; these functions
 * only compute). They touch no executor state, so unit tests call them
 * directly and compare each fast path with its plain reference.
 *
 * Conventions: tensors are dense row-major; "rows" are contiguous runs;
 * functions taking [begin, end) compute that slice of their output so the
 * family files can split work over the thread pool.
 */
#ifndef TOLK_NN_CPU_H
#define TOLK_NN_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/ir.h"

struct tolk_pool;

/* ================================================================ reduce */

enum nn_reduce {
  NN_R_SUM,
  NN_R_MEAN,
  NN_R_MAX,
  NN_R_MIN,
  NN_R_PROD,
  NN_R_L1,
  NN_R_L2,
  NN_R_LOGSUM,
  NN_R_LOGSUMEXP,
  NN_R_SUMSQ
};

/* A reduction in canonical form: the input shape with size-1 dims dropped and
 * adjacent dims of the same kind (kept / reduced) merged. When at most one
 * run of reduced dims is left the problem is [o, r, i] (fast paths);
 * otherwise `general` is set and the kernels walk the merged dims. */
struct nn_rshape {
  int rank;
  int64_t dims[IR_MAX_RANK];
  bool red[IR_MAX_RANK];
  int64_t n_out, n_red; /* products of the kept and of the reduced dims */
  bool general;
  int64_t o, r, i;      /* valid when !general */
};

/* `red[d]` marks the dims of the rank-`rank` shape `dims` to reduce. */
void nn_rshape_init(struct nn_rshape *s, int rank, const int64_t *dims, const bool *red);

/* Computes outputs [begin, end) (flat, in kept-dim order) of reduction `op`
 * of x. n_red must be >= 1 (the family file fills empty reductions with the
 * identity). Float accumulates in double; int64 in int64 (wrapping), with
 * MEAN truncating and L2/LOGSUM/LOGSUMEXP computed in double. `ref` forces
 * the general strided walk, the reference the fast paths are tested
 * against. */
void nn_reduce_f32(enum nn_reduce op, const struct nn_rshape *s, const float *x, float *y,
                   int64_t begin, int64_t end, bool ref);
void nn_reduce_f64(enum nn_reduce op, const struct nn_rshape *s, const double *x,
                   double *y, int64_t begin, int64_t end, bool ref);
void nn_reduce_i64(enum nn_reduce op, const struct nn_rshape *s, const int64_t *x,
                   int64_t *y, int64_t begin, int64_t end, bool ref);

/* ArgMax (is_max) / ArgMin over the middle axis of x viewed as [o, a, i] (a >=
 * 1), writing y[j] for flat outputs j in [begin, end) of [o, i]. Ties go to
 * the first index, or the last with `last`. */
void nn_argext_f32(bool is_max, bool last, const float *x, int64_t o, int64_t a, int64_t i,
                   int64_t *y, int64_t begin, int64_t end);
void nn_argext_f64(bool is_max, bool last, const double *x, int64_t o, int64_t a,
                   int64_t i, int64_t *y, int64_t begin, int64_t end);
void nn_argext_i64(bool is_max, bool last, const int64_t *x, int64_t o, int64_t a,
                   int64_t i, int64_t *y, int64_t begin, int64_t end);

/* ================================================================ softmax */

enum nn_softmax { NN_SOFTMAX, NN_LOGSOFTMAX, NN_HARDMAX };

/* Softmax-family over the middle axis of x viewed as [o, a, i], for outer
 * indices [o_begin, o_end). i == 1 takes the contiguous-row fast path.
 * Numerically stable (the row max is subtracted); sums in double. */
void nn_softmax_f32(enum nn_softmax op, const float *x, float *y, int64_t a, int64_t i,
                    int64_t o_begin, int64_t o_end);
void nn_softmax_f64(enum nn_softmax op, const double *x, double *y, int64_t a, int64_t i,
                    int64_t o_begin, int64_t o_end);
/* The reference: one element at a time, all arithmetic in double. */
void nn_softmax_f32_ref(enum nn_softmax op, const float *x, float *y, int64_t o, int64_t a,
                        int64_t i);

/* ================================================================ norm */

/* Layer normalisation of `rows` contiguous rows of n: y = (x - mean) *
 * inv_std * scale + bias with inv_std = 1 / sqrt(var + eps), var the biased
 * variance. scale has n entries; bias (n entries) may be NULL; mean and
 * inv_std (one per row) may be NULL. Statistics are computed in double by two
 * passes over the row. */
void nn_layernorm_f32(const float *x, float *y, int64_t rows, int64_t n, const float *scale,
                      const float *bias, float eps, float *mean, float *inv_std);
void nn_layernorm_f32_ref(const float *x, float *y, int64_t rows, int64_t n,
                          const float *scale, const float *bias, float eps, float *mean,
                          float *inv_std);
void nn_layernorm_f64(const double *x, double *y, int64_t rows, int64_t n,
                      const double *scale, const double *bias, double eps, double *mean,
                      double *inv_std);

/* RMS normalisation of contiguous rows: y = x / sqrt(mean(x^2) + eps) *
 * scale, mean(x^2) in double. */
void nn_rmsnorm_f32(const float *x, float *y, int64_t rows, int64_t n, const float *scale,
                    float eps);

/* Mean and biased variance of n floats (two passes in double). */
void nn_moments_f32(const float *x, int64_t n, double *mean, double *var);
void nn_moments_f64(const double *x, int64_t n, double *mean, double *var);

/* ================================================================ conv / pool geometry */

#define NN_MAX_SPATIAL (IR_MAX_RANK - 2)

enum nn_auto_pad { NN_PAD_NOTSET, NN_PAD_SAME_UPPER, NN_PAD_SAME_LOWER, NN_PAD_VALID };

/* The spatial geometry of a sliding-window op. */
struct nn_window {
  int nsp;                          /* number of spatial dims */
  int64_t in[NN_MAX_SPATIAL];       /* input extent */
  int64_t out[NN_MAX_SPATIAL];      /* output extent */
  int64_t k[NN_MAX_SPATIAL];        /* kernel extent */
  int64_t stride[NN_MAX_SPATIAL];
  int64_t dil[NN_MAX_SPATIAL];
  int64_t pad0[NN_MAX_SPATIAL];     /* padding before (may be negative for ConvTranspose) */
  int64_t pad1[NN_MAX_SPATIAL];     /* padding after */
};

/* Fills out[] and (for auto_pad SAME_*) pad0/pad1 from in/k/stride/dil and
 * explicit pads, as Conv and the pools do: NOTSET: floor((in + pads - ek) /
 * s) + 1, or with ceil_mode ceil(...) + 1 less one when the last window would
 * start in the end padding; SAME_*: ceil(in / s) with the total padding split
 * (the odd one at the end for UPPER, at the start for LOWER); VALID: no
 * padding. ek = (k - 1) * dil + 1. Returns false when an output extent would
 * be < 1 or on overflow. */
bool nn_window_out(struct nn_window *w, enum nn_auto_pad auto_pad, bool ceil_mode);

/* Output extent of ConvTranspose from explicit pads and output_padding:
 * s * (in - 1) + out_pad + ek - pad0 - pad1. */
int64_t nn_convt_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t out_pad,
                     int64_t pad0, int64_t pad1);

static inline int64_t nn_window_numel(const int64_t *ext, int nsp) {
  int64_t n = 1;
  for (int d = 0; d < nsp; d++) n *= ext[d];
  return n;
}

/* ================================================================ conv */

/* im2col for one image's `channels` channels (x: channels × prod(in)):
 * writes rows (c, kernel offset) and columns [p0, p1) of the output
 * positions into col (row stride ldc). Out-of-bounds taps are 0. */
void nn_im2col_f32(const float *x, int64_t channels, const struct nn_window *w, int64_t p0,
                   int64_t p1, float *col, int64_t ldc);

/* col2im for ConvTranspose: adds col (channels*K rows × prod(in) columns, in
 * the geometry where `in` is the conv output and `out` the image) into y
 * (channels × prod(out)). Here w->in is the image (y) extent and w->out the
 * column-grid extent, i.e. the same window as the forward conv from y. */
void nn_col2im_f32(const float *col, int64_t channels, const struct nn_window *w, float *y);

/* Conv via im2col + kern_sgemm. x: n × c × in, wt: m × (c/group) × k, bias: m
 * or NULL, y: n × m × out. scratch holds `scratch_floats` floats (see
 * nn_conv_scratch); pool may be NULL. */
int64_t nn_conv_scratch(int64_t c, int64_t group, const struct nn_window *w);
void nn_conv_f32(const float *x, const float *wt, const float *bias, float *y, int64_t n,
                 int64_t c, int64_t m, int64_t group, const struct nn_window *w,
                 float *scratch, struct tolk_pool *pool);
/* Direct convolution, accumulating in double: the reference, and the double
 * path. */
void nn_conv_ref_f32(const float *x, const float *wt, const float *bias, float *y,
                     int64_t n, int64_t c, int64_t m, int64_t group,
                     const struct nn_window *w);
void nn_conv_ref_f64(const double *x, const double *wt, const double *bias, double *y,
                     int64_t n, int64_t c, int64_t m, int64_t group,
                     const struct nn_window *w);

/* ConvTranspose. x: n × c × xin, wt: c × (m/group) × k, y: n × m × yout.
 * The window `w` describes the forward conv from y to x: w->in = yout,
 * w->out = xin, pads as the ConvTranspose's pads. */
int64_t nn_convt_scratch(int64_t m, int64_t group, const struct nn_window *w);
void nn_convt_f32(const float *x, const float *wt, const float *bias, float *y, int64_t n,
                  int64_t c, int64_t m, int64_t group, const struct nn_window *w,
                  float *scratch, struct tolk_pool *pool);
void nn_convt_ref_f32(const float *x, const float *wt, const float *bias, float *y,
                      int64_t n, int64_t c, int64_t m, int64_t group,
                      const struct nn_window *w);
void nn_convt_ref_f64(const double *x, const double *wt, const double *bias, double *y,
                      int64_t n, int64_t c, int64_t m, int64_t group,
                      const struct nn_window *w);

/* ================================================================ pool */

enum nn_pool { NN_POOL_MAX, NN_POOL_AVG, NN_POOL_LP };

struct nn_pool_args {
  enum nn_pool kind;
  bool count_include_pad; /* AVG */
  double p;               /* LP */
  /* MAX: when non-NULL, receives the flat input index of each maximum
   * (including the plane offset `plane * prod(in)`), column-major within a
   * plane when storage_order is 1. */
  int64_t *indices;
  int storage_order;
};

/* Pools planes [p_begin, p_end) of x (planes × prod(w->in)) into y (planes ×
 * prod(w->out)). Taps outside the input are skipped; AVG divides by the
 * count of in-bounds taps, or with count_include_pad by the taps inside the
 * explicitly padded extent. A window with no in-bounds tap yields 0 (AVG/LP)
 * or the lowest value (MAX) with index -1. */
void nn_pool_f32(const struct nn_pool_args *a, const struct nn_window *w, const float *x,
                 float *y, int64_t p_begin, int64_t p_end);
void nn_pool_f64(const struct nn_pool_args *a, const struct nn_window *w, const double *x,
                 double *y, int64_t p_begin, int64_t p_end);
/* MAX only, for integer types staged to int64. */
void nn_pool_i64(const struct nn_pool_args *a, const struct nn_window *w, const int64_t *x,
                 int64_t *y, int64_t p_begin, int64_t p_end);

#endif /* TOLK_NN_CPU_H */
