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
 *
 * Rows of different lengths (a ragged cache: sentences that joined the
 * batch at different steps) each use their own: row r of len_r ≤ len
 * positions appends at len_r, scores its len_r + 1 positions — the ones
 * past them come out -inf, so the softmax gives them exactly 0 and the
 * row's probabilities are those it has alone — and reads len_r + 1 values;
 * KvPositions(table, positions) is the position lookup Gather(table,
 * Range(len, len + n)) with each row's positions offset to start at len_r.
 * Every per-row product is the one the row makes alone, so a row's results
 * are bit for bit those of the row alone.
 *
 * Inputs the rows of one source share (tolk_kv_cache_share: the encoder's
 * keys and values, [sources, heads, len, head_dim]) are read by
 *
 *   KvSharedScores(q, keys)     q · (scale · K)ᵀ with each row's source's K;
 *   KvSharedContext(probs, V)   probs · V with each row's source's V.
 */
#include <math.h>
#include <string.h>

#include "../core/pool.h"
#include "../kern/kern.h"
#include "matmul.h"
#include "nn_cpu.h"
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

/* Each row's own length: row_len[r], or len for every row. */
static int64_t own_len(const int64_t *row_len, int64_t r, int64_t len) { return row_len ? row_len[r] : len; }

/* The run's per-row lengths, checking that a ragged run adds one position. */
static tolk_status ragged_lengths(struct op_ctx *c, int64_t n, const int64_t **row_len) {
  int64_t rows, len;
  tolk_status st = op_kv_rows(c, &rows, &len, row_len);
  if (st) return st;
  if (*row_len && n != 1)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "a cache whose rows differ in length takes one new position per step, not %lld",
                   (long long)n);
  return TOLK_OK;
}

/* n positions of one block's keys x [n, hd] into d as the graph's
 * Transpose(0,1,3,2) and Mul by the scale made them: d[i * ld + t]. */
static void keys_t_block(float *d, int64_t ld, const float *x, int64_t n, int64_t hd, float scale) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t i = 0; i < hd; i++) d[i * ld + t] = x[t * hd + i] * scale;
}

struct append_job {
  const float *src;
  float *buf, *kt; /* either may be NULL: that form is not kept */
  int64_t len, n, heads, hd, cap;
  const int64_t *row_len;
  float scale;
};

static void append_range(void *arg, int64_t begin, int64_t end) {
  const struct append_job *j = arg;
  const int64_t n = j->n, hd = j->hd, cap = j->cap;
  for (int64_t bh = begin; bh < end; bh++) {
    const int64_t at = own_len(j->row_len, bh / j->heads, j->len);
    const float *x = j->src + bh * n * hd;
    if (j->buf) memcpy(j->buf + (bh * cap + at) * hd, x, (size_t)(n * hd) * sizeof *x);
    if (j->kt) keys_t_block(j->kt + bh * hd * cap + at, cap, x, n, hd, j->scale);
  }
}

/* The blocks go to the pool: a step's transposed keys put one float in
 * each of hd lines per block, 512 blocks a layer at 64 rows of opus-mt,
 * and that was 4 % of a beam search's time on the calling thread alone. */
static tolk_status kv_append_run(struct op_ctx *c) {
  const struct op_kv_node *k = c->state;
  const struct tensor *past = op_in(c, 0), *nw = op_in(c, 1);
  tolk_status st = check_pair(c, past, nw);
  const int64_t *row_len = NULL;
  if (!st) st = ragged_lengths(c, nw->dims[2], &row_len);
  if (st) return st;
  struct append_job j = {.src = nw->data, .len = past->dims[2], .n = nw->dims[2], .heads = nw->dims[1],
                         .hd = nw->dims[3], .row_len = row_len};
  st = op_kv_write(c, k->pair, j.len + j.n, &j.buf, &j.cap);
  if (st) return st;
  j.kt = op_kv_keys_t(c, k->pair, &j.scale);
  op_parallel_for(c, nw->dims[0] * j.heads, 8, append_range, &j);
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
  int64_t m, len, hd, cap, heads, n;
  const int64_t *row_len; /* ragged: each row's past length, else NULL */
  bool scores;
  struct tolk_pool *inner;
  const int32_t *source; /* shared inputs: the block row each row reads, else NULL (its own) */
};

static void kv_range(void *arg, int64_t begin, int64_t end) {
  const struct kv_job *j = arg;
  for (int64_t bh = begin; bh < end; bh++) {
    int64_t at = j->source ? (int64_t)j->source[bh / j->heads] * j->heads + bh % j->heads : bh;
    const float *kv = j->cache + at * j->cap * j->hd;
    /* The positions this row holds: all len, or its own + the new ones. */
    int64_t used = j->row_len ? j->row_len[bh / j->heads] + j->n : j->len;
    if (j->scores) {
      float *o = j->out + bh * j->m * j->len;
      kern_sgemm(false, false, j->m, used, j->hd, 1.0f, j->x + bh * j->m * j->hd, j->hd, kv, j->cap,
                 0.0f, o, j->len, j->inner);
      for (int64_t i = 0; i < j->m; i++)
        for (int64_t t = used; t < j->len; t++) o[i * j->len + t] = -INFINITY;
    } else {
      kern_sgemm(false, false, j->m, j->hd, used, 1.0f, j->x + bh * j->m * j->len, j->len, kv, j->hd,
                 0.0f, j->out + bh * j->m * j->hd, j->hd, j->inner);
    }
  }
}

/* KvScores and KvContext: x is [rows, heads, m, inner] with inner = hd for
 * scores, len + n for the context. Checks the operands of pair `pair` and
 * fills j (all but out) and the output's dims. */
static tolk_status attend_setup(struct op_ctx *c, uint32_t pair, bool scores, const struct tensor *x,
                                const struct tensor *past, const struct tensor *nw, struct kv_job *j,
                                int64_t dims[4]) {
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
  const int64_t *row_len = NULL;
  tolk_status rs = ragged_lengths(c, nw->dims[2], &row_len);
  if (rs) return rs;
  int64_t cap;
  const float *cache = op_kv_read(c, pair, scores, len, &cap);
  if (!cache) return c->err->status;
  dims[0] = x->dims[0], dims[1] = x->dims[1], dims[2] = x->dims[2], dims[3] = scores ? len : hd;
  *j = (struct kv_job){x->data, cache, NULL, x->dims[2], len, hd, cap, x->dims[1], nw->dims[2],
                       row_len, scores, c->pool, NULL};
  return TOLK_OK;
}

/* Makes the output of `dims` and runs j over its rows × heads blocks into
 * it: a task per block when they are small, else each product split by the
 * GEMM. */
static tolk_status attend_run(struct op_ctx *c, struct kv_job *j, const int64_t dims[4]) {
  struct tensor *o = op_output(c, 0, TOLK_FLOAT, 4, dims);
  if (!o) return c->err->status;
  j->out = o->data;
  int64_t blocks = dims[0] * j->heads;
  if (blocks > 0 && j->m > 0)
    mm_split(c, blocks, 2.0 * (double)j->m * (double)j->len * (double)j->hd, kv_range, j, &j->inner);
  return TOLK_OK;
}

static tolk_status attend(struct op_ctx *c, bool scores) {
  const struct op_kv_node *k = c->state;
  const struct tensor *x = op_in(c, 0);
  struct kv_job j;
  int64_t dims[4];
  tolk_status st = attend_setup(c, k->pair, scores, x, op_in(c, 1), op_in(c, 2), &j, dims);
  return st ? st : attend_run(c, &j, dims);
}

static tolk_status kv_scores_run(struct op_ctx *c) { return attend(c, true); }
static tolk_status kv_context_run(struct op_ctx *c) { return attend(c, false); }

/* The shared keys [blocks, len, hd] transposed and scaled, [blocks, hd, len]. */
struct transpose_job {
  const float *src;
  float *dst;
  int64_t len, hd;
  float scale;
};

/* The least a transposing task takes: handing 8 heads of a short source
 * (8 × 19 × 64 floats, a batch-1 step) to the second thread cost more than
 * the copy, 3 µs of each cross-attention's 20 (Zen 2). */
#define TRANSPOSE_TASK_FLOATS 32768

static void transpose_range(void *arg, int64_t begin, int64_t end) {
  const struct transpose_job *j = arg;
  for (int64_t b = begin; b < end; b++)
    keys_t_block(j->dst + b * j->len * j->hd, j->len, j->src + b * j->len * j->hd, j->len, j->hd, j->scale);
}

/* KvSharedScores(q, keys) and KvSharedContext(probs, values): the MatMul
 * of x [rows, heads, m, inner] by the block of each row's source in a
 * shared input [sources, heads, len, hd] — keys transposed and scaled
 * first, once per source rather than once per row. The GEMM per (row,
 * head) is the MatMul's, so results are bit-identical to the graph's.
 * Checks the operands and fills j (all but out) and the output's dims. */
static tolk_status shared_setup(struct op_ctx *c, const struct op_kv_node *k, bool scores, const struct tensor *x,
                                const struct tensor *kv, struct kv_job *j, int64_t dims[4]) {
  int64_t rows;
  const int32_t *source;
  tolk_status st = op_kv_sources(c, &rows, &source);
  if (st) return st;
  char a[96], b[96];
  if (x->dtype != TOLK_FLOAT || kv->dtype != TOLK_FLOAT || x->rank != 4 || kv->rank != 4 || x->dims[0] != rows ||
      x->dims[1] != kv->dims[1] || x->dims[3] != kv->dims[scores ? 3 : 2] || (!source && kv->dims[0] != rows))
    return op_fail(c, TOLK_ERR_SHAPE, "%s %s do not match the shared %s %s for %lld rows",
                   scores ? "queries" : "attention weights", shape_str(x, a, sizeof a), scores ? "keys" : "values",
                   shape_str(kv, b, sizeof b), (long long)rows);
  int64_t heads = kv->dims[1], len = kv->dims[2], hd = kv->dims[3];
  for (int64_t r = 0; source && r < rows; r++)
    if (source[r] < 0 || source[r] >= kv->dims[0])
      return op_fail(c, TOLK_ERR_SHAPE, "row %lld reads row %d of the shared %s %s", (long long)r, source[r],
                     scores ? "keys" : "values", shape_str(kv, b, sizeof b));
  const float *cache = kv->data;
  if (scores && kv->numel) {
    /* Kept by the cache from step to step while the sources hold: the
     * copy was a fortieth of a 16-sentence fp32 step (perf, Zen 2). */
    float *t = NULL;
    bool fill = true;
    tolk_status kst = op_kv_shared_keys_t(c, kv, k->scale, &t, &fill);
    if (kst) return kst;
    if (!t && !(t = op_scratch(c, (size_t)kv->numel * sizeof *t))) return c->err->status;
    if (fill) {
      struct transpose_job tj = {kv->data, t, len, hd, k->scale};
      op_parallel_for(c, kv->dims[0] * heads, 1 + TRANSPOSE_TASK_FLOATS / (len * hd + 1), transpose_range, &tj);
    }
    cache = t;
  }
  dims[0] = rows, dims[1] = heads, dims[2] = x->dims[2], dims[3] = scores ? len : hd;
  *j = (struct kv_job){x->data, cache, NULL, x->dims[2], len, hd, len, heads, 0, NULL, scores, c->pool, source};
  return TOLK_OK;
}

static tolk_status shared_attend(struct op_ctx *c, bool scores) {
  const struct tensor *x = op_in(c, 0);
  struct kv_job j;
  int64_t dims[4];
  tolk_status st = shared_setup(c, c->state, scores, x, op_in(c, 1), &j, dims);
  return st ? st : attend_run(c, &j, dims);
}

static tolk_status kv_shared_scores_run(struct op_ctx *c) { return shared_attend(c, true); }
static tolk_status kv_shared_context_run(struct op_ctx *c) { return shared_attend(c, false); }

/* ------------------------------------------------------------ fused attention
 *
 * KvAttention(q, past_k, new_k, mask, past_v, new_v) and
 * KvSharedAttention(q, keys, mask, values): Kv[Shared]Scores, the Add of the
 * attention mask, Softmax over the positions and Kv[Shared]Context as one
 * node (src/exec/fuse_kv_attention.c finds the four). A task takes whole
 * (row, head) blocks through all three steps while the block's scores are
 * in cache, where the four nodes were four passes over all blocks, each
 * with its threads' hand-off. Every step is the node's own arithmetic — the
 * same GEMM calls, the mask added as Add adds, the Softmax op's row kernel —
 * so results are bit for bit the four nodes'. */

/* The strides of a mask broadcast over scores [rows, heads, m, len] (0
 * along a dim of 1); false unless every dim is 1 or the scores'. */
static bool mask_strides(const struct tensor *mask, const int64_t dims[4], int64_t st[4]) {
  if (mask->dtype != TOLK_FLOAT || mask->rank > 4) return false;
  int64_t stride = 1;
  for (int d = 3; d >= 0; d--) {
    int md = d - (4 - mask->rank);
    int64_t n = md >= 0 ? mask->dims[md] : 1;
    if (n != 1 && n != dims[d]) return false;
    st[d] = n == 1 ? 0 : stride;
    stride *= n;
  }
  return true;
}

struct attn_job {
  struct kv_job sc, cx; /* scores into s; the context from p */
  const float *mask;
  int64_t ms[4];        /* the mask's strides over [rows, heads, m, len] */
  float *s, *p;         /* [rows, heads, m, len]: masked scores, probabilities */
  struct tolk_pool *inner;
};

/* Rows [r0, r1) of all blocks' m × len scores: the mask added, then the
 * softmax into p. */
static void mask_softmax(const struct attn_job *a, int64_t r0, int64_t r1) {
  const int64_t m = a->sc.m, len = a->sc.len, heads = a->sc.heads;
  if (len == 0) return; /* as Softmax of an empty tensor: nothing to do */
  for (int64_t r = r0; r < r1; r++) {
    const int64_t bh = r / m;
    float *row = a->s + r * len;
    const float *mk = a->mask + bh / heads * a->ms[0] + bh % heads * a->ms[1] + r % m * a->ms[2];
    for (int64_t t = 0; t < len; t++) row[t] = row[t] + mk[t * a->ms[3]];
  }
  nn_softmax_f32(NN_SOFTMAX, a->s, a->p, len, 1, r0, r1);
}

static void attn_range(void *arg, int64_t begin, int64_t end) {
  const struct attn_job *a = arg;
  struct kv_job sc = a->sc, cx = a->cx;
  sc.inner = cx.inner = a->inner;
  for (int64_t bh = begin; bh < end; bh++) {
    kv_range(&sc, bh, bh + 1);
    mask_softmax(a, bh * sc.m, (bh + 1) * sc.m);
    kv_range(&cx, bh, bh + 1);
  }
}

/* Scratch for the scores and probabilities, and p as the tensor the
 * context step reads. */
static tolk_status attn_scratch(struct op_ctx *c, struct attn_job *a, const int64_t dims[4], struct tensor *probs) {
  size_t n = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]);
  a->s = op_scratch(c, (n ? n : 1) * sizeof(float));
  a->p = a->s ? op_scratch(c, (n ? n : 1) * sizeof(float)) : NULL;
  if (!a->p) return c->err->status;
  *probs = (struct tensor){TOLK_FLOAT, 4, {dims[0], dims[1], dims[2], dims[3]}, (int64_t)n, a->p, n * sizeof(float)};
  return TOLK_OK;
}

static tolk_status attention(struct op_ctx *c, struct attn_job *a, const struct tensor *mask, const int64_t sdims[4],
                             const int64_t odims[4]) {
  char m[96];
  if (!mask_strides(mask, sdims, a->ms))
    return op_fail(c, TOLK_ERR_SHAPE, "attention mask %s does not broadcast to the scores [%lld, %lld, %lld, %lld]",
                   shape_str(mask, m, sizeof m), (long long)sdims[0], (long long)sdims[1], (long long)sdims[2],
                   (long long)sdims[3]);
  a->mask = mask->data;
  struct tensor *o = op_output(c, 0, TOLK_FLOAT, 4, odims);
  if (!o) return c->err->status;
  a->cx.out = o->data;
  a->inner = c->pool;
  const int64_t blocks = sdims[0] * sdims[1];
  if (blocks > 0 && sdims[2] > 0)
    mm_split(c, blocks, 4.0 * (double)a->sc.m * (double)a->sc.len * (double)a->sc.hd, attn_range, a, &a->inner);
  return TOLK_OK;
}

static tolk_status kv_attention_run(struct op_ctx *c) {
  const struct op_kv_attention *k = c->state;
  struct attn_job a = {0};
  struct tensor probs;
  int64_t sdims[4] = {0}, odims[4] = {0};
  tolk_status st = attend_setup(c, k->keys.pair, true, op_in(c, 0), op_in(c, 1), op_in(c, 2), &a.sc, sdims);
  if (!st) st = attn_scratch(c, &a, sdims, &probs);
  a.sc.out = a.s;
  if (!st) st = attend_setup(c, k->values.pair, false, &probs, op_in(c, 4), op_in(c, 5), &a.cx, odims);
  return st ? st : attention(c, &a, op_in(c, 3), sdims, odims);
}

static tolk_status kv_shared_attention_run(struct op_ctx *c) {
  const struct op_kv_attention *k = c->state;
  struct attn_job a = {0};
  struct tensor probs;
  int64_t sdims[4] = {0}, odims[4] = {0};
  tolk_status st = shared_setup(c, &k->keys, true, op_in(c, 0), op_in(c, 1), &a.sc, sdims);
  if (!st) st = attn_scratch(c, &a, sdims, &probs);
  a.sc.out = a.s;
  if (!st) st = shared_setup(c, &k->values, false, &probs, op_in(c, 3), &a.cx, odims);
  return st ? st : attention(c, &a, op_in(c, 2), sdims, odims);
}

/* KvPositions(table, positions): rows of table [P, d] for positions [n]
 * (Range(len, len + n)) as [rows, n, d], row r's shifted to start at its
 * own length — the graph's Gather gave [n, d] for every row alike. */
static tolk_status kv_positions_run(struct op_ctx *c) {
  const struct tensor *table = op_in(c, 0), *pos = op_in(c, 1);
  char a[96], b[96];
  if (!table || !pos || table->rank != 2 || pos->rank != 1 || pos->dtype != TOLK_INT64)
    return op_fail(c, TOLK_ERR_SHAPE, "position lookup: table %s and positions %s, expected [P, d] and int64 [n]",
                   table ? shape_str(table, a, sizeof a) : "missing", pos ? shape_str(pos, b, sizeof b) : "missing");
  int64_t rows, len;
  const int64_t *row_len;
  tolk_status st = op_kv_rows(c, &rows, &len, &row_len);
  if (st) return st;
  int64_t n = pos->dims[0], d = table->dims[1];
  size_t es = op_dtype_size(table->dtype), line = (size_t)d * es;
  int64_t dims[3] = {rows, n, d};
  struct tensor *o = op_output(c, 0, table->dtype, 3, dims);
  if (!o) return c->err->status;
  const int64_t *p = pos->data;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t t = 0; t < n; t++) {
      int64_t at = p[t] - len + own_len(row_len, r, len);
      if (at < 0 || at >= table->dims[0])
        return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "position %lld of row %lld is outside the table's %lld positions",
                       (long long)at, (long long)r, (long long)table->dims[0]);
      memcpy((char *)o->data + (size_t)(r * n + t) * line, (const char *)table->data + (size_t)at * line, line);
    }
  return TOLK_OK;
}

/* Not in the registry: a model cannot name them; src/exec/kv.c sets them
 * on the nodes it rewires. */
const struct op_def tolk_kv_append_def = {"tolk.internal", "KvAppend", 1, 0, NULL, kv_append_run, NULL};
const struct op_def tolk_kv_shape_def = {"tolk.internal", "KvShape", 1, 0, NULL, kv_shape_run, NULL};
const struct op_def tolk_kv_scores_def = {"tolk.internal", "KvScores", 1, 0, NULL, kv_scores_run, NULL};
const struct op_def tolk_kv_context_def = {"tolk.internal", "KvContext", 1, 0, NULL, kv_context_run, NULL};
const struct op_def tolk_kv_positions_def = {"tolk.internal", "KvPositions", 1, 0, NULL, kv_positions_run,
                                             NULL, .unaligned_inputs = 1u << 0 /* the table, by memcpy */};
const struct op_def tolk_kv_shared_scores_def = {"tolk.internal", "KvSharedScores", 1, 0, NULL, kv_shared_scores_run,
                                                 NULL};
const struct op_def tolk_kv_shared_context_def = {"tolk.internal", "KvSharedContext", 1, 0, NULL,
                                                  kv_shared_context_run, NULL};
const struct op_def tolk_kv_attention_def = {"tolk.internal", "KvAttention", 1, 0, NULL, kv_attention_run, NULL};
const struct op_def tolk_kv_shared_attention_def = {"tolk.internal", "KvSharedAttention", 1, 0, NULL,
                                                    kv_shared_attention_run, NULL};
