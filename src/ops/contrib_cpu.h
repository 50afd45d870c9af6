/*
 * contrib_cpu.h — the pure compute kernels behind the com.microsoft operators
 * ONNX Runtime writes into transformer graphs (contrib.c, contrib_norm.c,
 * attention.c): GELU variants, (skip) layer normalisation rows and the
 * attention core. They touch no executor state, so tests call them directly
 * and compare with plain references; the operator files check shapes,
 * allocate and split work over the pool.
 *
 * Formulas follow ORT's CPU kernels (onnxruntime/contrib_ops/cpu/): the same
 * mask conventions (0/1 masks become 0 / mask_filter_value added to the
 * scores), the same softmax, the same normalisation statistics.
 */
#ifndef TOLK_CONTRIB_CPU_H
#define TOLK_CONTRIB_CPU_H

#include <stdbool.h>
#include <stdint.h>

/* ----------------------------------------------------------- activations */

enum cx_act {
  CX_GELU,       /* 0.5 x (1 + erf(x / sqrt 2)) */
  CX_FAST_GELU,  /* 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))) */
  CX_QUICK_GELU  /* x * sigmoid(alpha x) */
};

/* y[i] = act(x[i] + bias[i % bias_n]) for i in [begin, end); bias may be
 * NULL. alpha is used by CX_QUICK_GELU only. y may alias x. */
void cx_act_f32(enum cx_act act, const float *x, const float *bias, int64_t bias_n, float alpha,
                float *y, int64_t begin, int64_t end);

/* ---------------------------------------------------------- normalisation */

/* rows × n: s = x + skip + bias (skip repeats every skip_numel elements; skip
 * and bias may be NULL), then
 *   layer norm:  y = (s - mean) / sqrt(var + eps) * gamma + beta
 *   simplified:  y = s / sqrt(mean(s^2) + eps) * gamma        (RMS norm)
 * Optional outputs (NULL: not wanted): sum = s, mean and inv_std per row
 * (simplified writes mean 0). beta may be NULL. Statistics in double. */
struct cx_norm {
  const float *x, *skip, *bias, *gamma, *beta;
  int64_t skip_numel, n;
  float eps;
  bool simplified;
  float *y, *sum, *mean, *inv_std;
};

/* Rows [begin, end). */
void cx_norm_rows(const struct cx_norm *p, int64_t begin, int64_t end);

/* -------------------------------------------------------------- attention */

/* Scaled dot-product attention of B×N heads:
 *   scores = scale * Q K^T + attn_bias + mask;  probs = softmax(scores);
 *   out[b, s, n*Hv + h] = (probs V)[s, h]
 * q is [B, N, S, H], k is [B, N, T, H], v is [B, N, T, Hv] (dense). mask is
 * an additive [B, S, T] or NULL; attn_bias is [B or 1, N or 1, S, T] or
 * NULL (bias_b / bias_n false when that dim is 1). scores is scratch of
 * B*N*S*T floats. */
struct cx_attn {
  int64_t B, N, S, T, H, Hv;
  const float *q, *k, *v, *mask, *attn_bias;
  bool bias_b, bias_n;
  float scale;
  float *out, *scores;
};

/* Heads [begin, end) of the B*N (b-major). */
void cx_attn_heads(const struct cx_attn *a, int64_t begin, int64_t end);

/* Mask forms of ORT's mask_index / key_padding_mask (int32). */
enum cx_mask_kind {
  CX_MASK_NONE,
  CX_MASK_LEN,       /* [B]: valid length (right padding) */
  CX_MASK_LEN_START, /* [2B]: end positions, then start positions */
  CX_MASK_2D,        /* [B, T]: 1 keep, 0 mask */
  CX_MASK_3D         /* [B, S, T] */
};

/* Fills mask [B, S, T]: 0 where attending is allowed, filter where the
 * int32 mask forbids it; then, when causal, adds filter where t > past + s. */
void cx_attn_mask(enum cx_mask_kind kind, const int32_t *m, int64_t B, int64_t S, int64_t T,
                  bool causal, int64_t past, float filter, float *mask);

#endif /* TOLK_CONTRIB_CPU_H */
