/*
 * kv_cache.c — the kernels that replace a decoder's self-attention cache
 * pattern when a session keeps its key/value cache in place (src/exec/kv.c
 * finds the pattern and rewires the nodes; see tolk_kv_cache in tolk.h).
 *
 * Exported decoders compute present = Concat(past, new) along the sequence
 * axis and feed it to the attention MatMuls (keys through Transpose and a
 * Mul by the scale), so every step copies the whole cache three times. Here
 * the cache is one buffer per (past, present) pair, [rows, heads, capacity,
 * head_dim], that only grows at its end:
 *
 *   KvAppend(past, new)         writes `new` after the `len` positions held;
 *   KvShape(past, new)          the shape Concat would have produced;
 *   KvScores(q, past, new)      q · (scale · K)ᵀ over all len + n positions;
 *   KvContext(probs, past, new) probs · V over all len + n positions.
 *
 * `past` is the engine-bound placeholder of the past input: only its shape
 * is read ([rows, heads, len, head_dim]); `new` gives n. KvAppend also
 * keeps the keys transposed and scaled (once per position, as the graph's
 * Transpose and Mul computed them) for KvScores.
 */
#include <string.h>

#include "../core/pool.h"
#include "../kern/kern.h"
#include "matmul.h"
#include "op.h"

/* Checks past [rows, heads, len, hd] and new [rows, heads, n, hd]. */
static tolk_status check_pair(struct op_ctx *c, const struct tensor *past,
                              const struct tensor *nw) {
  char a[96], b[96];
  if (past->rank != 4 || nw->rank != 4 || past->dtype != TOLK_FLOAT || nw->dtype != TOLK_FLOAT ||
      past->dims[0] != nw->dims[0] || past->dims[1] != nw->dims[1] || past->dims[3] != nw->dims[3])
    return op_fail(c, TOLK_ERR_SHAPE, "cached keys/values: past %s and new %s do not concatenate",
                   shape_str(past, a, sizeof a), shape_str(nw, b, sizeof b));
  return TOLK_OK;
}

static tolk_status kv_append_run(struct op_ctx *c) {
  const struct op_kv_node *k = c->state;
  const struct tensor *past = op_in(c, 0), *nw = op_in(c, 1);
  tolk_status st = check_pair(c, past, nw);
  if (st) return st;
  int64_t len = past->dims[2], n = nw->dims[2], hd = nw->dims[3], cap;
  float *buf = op_kv_write(c, k->pair, len + n, &cap);
  if (!buf) return c->err->status;
  const float *src = nw->data;
  int64_t blocks = nw->dims[0] * nw->dims[1];
  for (int64_t bh = 0; bh < blocks; bh++)
    memcpy(buf + (bh * cap + len) * hd, src + bh * n * hd, (size_t)(n * hd) * sizeof *buf);
  float scale;
  float *kt = op_kv_keys_t(c, k->pair, &scale);
  for (int64_t bh = 0; kt && bh < blocks; bh++) {
    float *d = kt + bh * hd * cap + len;
    const float *x = src + bh * n * hd;
    for (int64_t t = 0; t < n; t++)
      for (int64_t i = 0; i < hd; i++) d[i * cap + t] = x[t * hd + i] * scale; /* as the Mul did */
  }
  return TOLK_OK;
}

static tolk_status kv_shape_run(struct op_ctx *c) {
  const struct tensor *past = op_in(c, 0), *nw = op_in(c, 1);
  tolk_status st = check_pair(c, past, nw);
  if (st) return st;
  int64_t four = 4;
  struct tensor *o = op_output(c, 0, TOLK_INT64, 1, &four);
  if (!o) return c->err->status;
  int64_t *d = o->data;
  d[0] = past->dims[0];
  d[1] = past->dims[1];
  d[2] = past->dims[2] + nw->dims[2];
  d[3] = past->dims[3];
  return TOLK_OK;
}

/* Per (row, head) block: the same kern_sgemm call, on the same operands,
 * as the MatMul it replaces made per batch entry (mm_batched), so results
 * are bit-identical to the graph run as written — which keeps int8 graphs,
 * whose dynamic quantization magnifies any rounding difference, identical
 * too. Scores read the cache's transposed keys, row stride cap, where the
 * graph read a fresh [hd, len] copy. */
struct kv_job {
  const float *x;     /* queries [m, hd] or weights [m, len] per block */
  const float *cache; /* keys [hd, cap] or values [cap, hd] per block */
  float *out;
  int64_t m, len, hd, cap;
  bool scores;
  struct tolk_pool *inner;
};

static void kv_range(void *arg, int64_t begin, int64_t end) {
  const struct kv_job *j = arg;
  for (int64_t bh = begin; bh < end; bh++) {
    const float *kv = j->cache + bh * j->cap * j->hd;
    if (j->scores)
      kern_sgemm(false, false, j->m, j->len, j->hd, 1.0f, j->x + bh * j->m * j->hd, j->hd, kv,
                 j->cap, 0.0f, j->out + bh * j->m * j->len, j->len, j->inner);
    else
      kern_sgemm(false, false, j->m, j->hd, j->len, 1.0f, j->x + bh * j->m * j->len, j->len, kv,
                 j->hd, 0.0f, j->out + bh * j->m * j->hd, j->hd, j->inner);
  }
}

/* KvScores and KvContext: x is [rows, heads, m, inner] with inner = hd for
 * scores, len + n for the context. */
static tolk_status attend(struct op_ctx *c, bool scores) {
  const struct op_kv_node *k = c->state;
  const struct tensor *x = op_in(c, 0), *past = op_in(c, 1), *nw = op_in(c, 2);
  tolk_status st = check_pair(c, past, nw);
  if (st) return st;
  int64_t len = past->dims[2] + nw->dims[2], hd = past->dims[3];
  int64_t inner = scores ? hd : len;
  char a[96];
  if (x->dtype != TOLK_FLOAT || x->rank != 4 || x->dims[0] != past->dims[0] ||
      x->dims[1] != past->dims[1] || x->dims[3] != inner)
    return op_fail(c, TOLK_ERR_SHAPE, "%s %s does not match the cached %s of %lld positions",
                   scores ? "queries" : "attention weights", shape_str(x, a, sizeof a),
                   scores ? "keys" : "values", (long long)len);
  int64_t cap;
  const float *cache = op_kv_read(c, k->pair, scores, len, &cap);
  if (!cache) return c->err->status;
  int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2], scores ? len : hd};
  struct tensor *o = op_output(c, 0, TOLK_FLOAT, 4, dims);
  if (!o) return c->err->status;
  struct kv_job j = {x->data, cache, o->data, x->dims[2], len, hd, cap, scores, c->pool};
  int64_t blocks = x->dims[0] * x->dims[1];
  if (blocks <= 0 || x->dims[2] <= 0) return TOLK_OK;
  mm_split(c, blocks, 2.0 * (double)x->dims[2] * (double)len * (double)hd, kv_range, &j, &j.inner);
  return TOLK_OK;
}

static tolk_status kv_scores_run(struct op_ctx *c) { return attend(c, true); }
static tolk_status kv_context_run(struct op_ctx *c) { return attend(c, false); }

/* Not in the registry: a model cannot name them; src/exec/kv.c sets them
 * on the nodes it rewires. */
const struct op_def tolk_kv_append_def = {"tolk.internal", "KvAppend", 1, 0, NULL, kv_append_run, NULL};
const struct op_def tolk_kv_shape_def = {"tolk.internal", "KvShape", 1, 0, NULL, kv_shape_run, NULL};
const struct op_def tolk_kv_scores_def = {"tolk.internal", "KvScores", 1, 0, NULL, kv_scores_run, NULL};
const struct op_def tolk_kv_context_def = {"tolk.internal", "KvContext", 1, 0, NULL, kv_context_run, NULL};
