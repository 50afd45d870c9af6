/*
 * contrib_cpu.c — the kernels of contrib_cpu.h: GELU variants, (skip) layer
 * normalisation rows, attention masks and the per-head attention core on
 * kern_sgemm.
 */
#include "contrib_cpu.h"

#include <math.h>
#include <string.h>

#include "kern/kern.h"

/* Gelu, QuickGelu and FastGelu through vmath's vectorised GELU, sigmoid
 * and tanh — the kernels of tolk's own Gelu, Sigmoid and Tanh — a block at
 * a time. A scalar erff/expf per element made the fused node slower than
 * the nodes it replaces (tolk optimize's QuickGelu for Marian's
 * x·Sigmoid(x): 14 % of an int8 encoder run); now QuickGelu with alpha 1
 * computes bit for bit what Sigmoid then Mul did. FastGelu computes as
 * ORT's kernel does, 0.5·x·(1 + tanh(x·(√(2/π) + 0.044715·√(2/π)·x²))):
 * through vmath's tanh, [64, 3072] takes 0.48 ms where the eight nodes it
 * replaces take 0.62 (medians, one thread, Zen 2); vmath's tanh GELU,
 * exact in the far negative tail where 1 + tanh cancels, took 0.82, and
 * the scalar tanhf before it 4.9. */
void cx_act_f32(enum cx_act act, const float *x, const float *bias, int64_t bias_n, float alpha,
                float *y, int64_t begin, int64_t end) {
  enum { BLOCK = 256 };
  float v[BLOCK], s[BLOCK];
  int64_t bi = bias ? begin % bias_n : 0;
  for (int64_t i = begin; i < end; i += BLOCK) {
    int64_t n = end - i < BLOCK ? end - i : BLOCK;
    for (int64_t j = 0; j < n; j++) {
      v[j] = x[i + j];
      if (bias) {
        v[j] += bias[bi];
        if (++bi == bias_n) bi = 0;
      }
    }
    if (act == CX_GELU) {
      kern_vm_f32(KERN_VM_GELU, n, y + i, v);
      continue;
    }
    if (act == CX_FAST_GELU) {
      for (int64_t j = 0; j < n; j++) s[j] = v[j] * (0.7978845608028654f + 0.035677408136300125f * v[j] * v[j]);
      kern_vm_f32(KERN_VM_TANH, n, s, s);
      for (int64_t j = 0; j < n; j++) y[i + j] = 0.5f * v[j] * (1.0f + s[j]);
      continue;
    }
    for (int64_t j = 0; j < n; j++) s[j] = alpha * v[j];
    kern_vm_f32(KERN_VM_SIGMOID, n, s, s);
    for (int64_t j = 0; j < n; j++) y[i + j] = v[j] * s[j];
  }
}

void cx_norm_rows(const struct cx_norm *p, int64_t begin, int64_t end) {
  int64_t n = p->n;
  for (int64_t r = begin; r < end; r++) {
    const float *x = p->x + r * n;
    const float *skip = p->skip ? p->skip + (r * n) % p->skip_numel : NULL;
    float *y = p->y + r * n;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
      float v = x[i];
      if (skip) v += skip[i];
      if (p->bias) v += p->bias[i];
      if (p->sum) p->sum[r * n + i] = v;
      y[i] = v;
      sum += v;
      sq += (double)v * v;
    }
    double mean = 0, var;
    if (p->simplified) {
      var = n ? sq / (double)n : 0;
    } else {
      mean = n ? sum / (double)n : 0;
      /* Second pass for the variance: the one-pass formula loses digits when
       * the mean is large against the spread. */
      var = 0;
      for (int64_t i = 0; i < n; i++) var += ((double)y[i] - mean) * ((double)y[i] - mean);
      var = n ? var / (double)n : 0;
    }
    double inv = 1.0 / sqrt(var + (double)p->eps);
    if (p->mean) p->mean[r] = (float)mean;
    if (p->inv_std) p->inv_std[r] = (float)inv;
    float fm = (float)mean, fi = (float)inv;
    if (p->beta) {
      for (int64_t i = 0; i < n; i++) y[i] = (y[i] - fm) * fi * p->gamma[i] + p->beta[i];
    } else {
      for (int64_t i = 0; i < n; i++) y[i] = (y[i] - fm) * fi * p->gamma[i];
    }
  }
}

void cx_attn_mask(enum cx_mask_kind kind, const int32_t *m, int64_t B, int64_t S, int64_t T,
                  bool causal, int64_t past, float filter, float *mask) {
  for (int64_t b = 0; b < B; b++) {
    float *mb = mask + b * S * T;
    for (int64_t s = 0; s < S; s++) {
      float *row = mb + s * T;
      for (int64_t t = 0; t < T; t++) {
        bool keep = true;
        switch (kind) {
        case CX_MASK_NONE: break;
        case CX_MASK_LEN: keep = t < m[b]; break;
        case CX_MASK_LEN_START: keep = t < m[b] && t >= m[B + b]; break;
        case CX_MASK_2D: keep = m[b * T + t] > 0; break;
        case CX_MASK_3D: keep = m[(b * S + s) * T + t] > 0; break;
        }
        row[t] = keep ? 0.0f : filter;
        if (causal && t > past + s) row[t] += filter;
      }
    }
  }
}

static void softmax_row(float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  float sum = 0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - mx);
    sum += x[i];
  }
  float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void cx_attn_heads(const struct cx_attn *a, int64_t begin, int64_t end) {
  int64_t st = a->S * a->T;
  for (int64_t i = begin; i < end; i++) {
    int64_t b = i / a->N, n = i % a->N;
    float *sc = a->scores + i * st;
    float beta = 0.0f;
    if (a->attn_bias || a->mask) {
      if (a->attn_bias) {
        int64_t off = ((a->bias_b ? b * (a->bias_n ? a->N : 1) : 0) + (a->bias_n ? n : 0)) * st;
        memcpy(sc, a->attn_bias + off, (size_t)st * sizeof(float));
        if (a->mask)
          for (int64_t j = 0; j < st; j++) sc[j] += a->mask[b * st + j];
      } else {
        memcpy(sc, a->mask + b * st, (size_t)st * sizeof(float));
      }
      beta = 1.0f;
    }
    kern_sgemm(false, true, a->S, a->T, a->H, a->scale, a->q + i * a->S * a->H, a->H,
               a->k + i * a->T * a->H, a->H, beta, sc, a->T, NULL);
    for (int64_t s = 0; s < a->S; s++) softmax_row(sc + s * a->T, a->T);
    kern_sgemm(false, false, a->S, a->Hv, a->T, 1.0f, sc, a->T, a->v + i * a->T * a->Hv, a->Hv,
               0.0f, a->out + b * a->S * a->N * a->Hv + n * a->Hv, a->N * a->Hv, NULL);
  }
}
