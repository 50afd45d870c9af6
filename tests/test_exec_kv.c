/*
 * test_exec_kv.c — the key/value cache kept in place (src/exec/kv.c,
 * src/ops/kv_cache.c) against the graph run as written, on marian-tiny's
 * decoder_with_past (fp32 and int8): bit-identical logits, and cache
 * contents identical to the present outputs, step after step, through a beam
 * reorder that repeats and swaps rows, a batch that shrinks, and a cache
 * that grows past its first capacity; with the encoder keys/values given
 * per row, or once per source (tolk_kv_cache_share) while the rows reorder;
 * with the keys kept as written and transposed, or transposed only
 * (kv_keys_transposed_only: tolk_kv_cache_get then refuses them); each
 * attention's scores, mask, softmax and context as the one node of
 * src/exec/fuse_kv_attention.c (any opt level but none) and as four (none),
 * the residual Add + LayerNorm pairs as SkipLayerNormalization (BASIC:
 * exec_optimize_kv_ir); and the misuse errors.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "testutil.h"
#include "tolk.h"

enum { LAYERS = 2, KINDS = 4, STEPS = 40, PAD = 4268 };
static const char *const kinds[KINDS] = {"decoder.key", "decoder.value", "encoder.key", "encoder.value"};

struct dec {
  tolk_session *first, *plain, *kv;
  tolk_model *m_enc, *m_first, *m_past;
  tolk_session *enc;
};

static tolk_session *open_s(const char *dir, const char *file, int kv, bool opt_none, bool keys_only,
                            tolk_model **m) {
  char path[1024];
  snprintf(path, sizeof path, "%s/marian-tiny/%s", dir, file);
  tolk_error err;
  tolk_session_params sp = tolk_session_default_params();
  sp.threads = 2;
  sp.kv_cache = kv;
  sp.kv_keys_transposed_only = keys_only;
  if (opt_none) sp.opt_level = TOLK_OPT_NONE;
  tolk_session *s = NULL;
  if (m && !*m) CHECK_MSG(tolk_model_load(path, tolk_model_default_params(), m, &err) == TOLK_OK, "%s", err.message);
  if (*m) CHECK_MSG(tolk_session_create(*m, sp, &s, &err) == TOLK_OK, "%s: %s", file, err.message);
  return s;
}

static tolk_tensor *ids_tensor(const int64_t *v, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  tolk_tensor *t = NULL;
  tolk_error err;
  tolk_tensor_create(TOLK_INT64, 2, dims, v, (size_t)(rows * cols) * sizeof *v, &t, &err);
  return t;
}

/* Rows keep[0..n) of t (first dimension). */
static tolk_tensor *gather(const tolk_tensor *t, const int32_t *keep, size_t n) {
  int64_t dims[TOLK_MAX_RANK];
  int rank = tolk_tensor_rank(t);
  memcpy(dims, tolk_tensor_dims(t), (size_t)rank * sizeof *dims);
  size_t row = tolk_tensor_nbytes(t) / (size_t)dims[0];
  dims[0] = (int64_t)n;
  tolk_tensor *o = NULL;
  tolk_error err;
  tolk_tensor_create(tolk_tensor_dtype(t), rank, dims, NULL, 0, &o, &err);
  for (size_t i = 0; i < n; i++)
    memcpy((char *)tolk_tensor_data(o) + i * row, (const char *)tolk_tensor_data(t) + (size_t)keep[i] * row, row);
  return o;
}

static float max_diff(const tolk_tensor *a, const tolk_tensor *b) {
  if (tolk_tensor_nbytes(a) != tolk_tensor_nbytes(b)) return INFINITY;
  const float *x = tolk_tensor_data(a), *y = tolk_tensor_data(b);
  float m = 0;
  for (size_t i = 0; i < tolk_tensor_nbytes(a) / 4; i++) m = fmaxf(m, fabsf(x[i] - y[i]));
  return m;
}

/* Nodes of the session's main graph that run `def`. */
static int count_def(const tolk_session *s, const struct op_def *def) {
  int n = 0;
  for (uint32_t k = 0; k < s->graphs[0]->n_nodes; k++) n += s->graphs[0]->nodes[k].def == def;
  return n;
}

/* Nodes of the session's main graph that run an op of this type. */
static int count_op(const tolk_session *s, const char *op_type) {
  int n = 0;
  for (uint32_t k = 0; k < s->graphs[0]->n_nodes; k++) n += !strcmp(s->graphs[0]->nodes[k].def->op_type, op_type);
  return n;
}

static void run_model(const char *dir, bool int8, bool shared, bool opt_none, bool keys_only) {
  const char *q = int8 ? "_quantized" : "";
  char f_enc[64], f_first[64], f_past[64];
  snprintf(f_enc, sizeof f_enc, "encoder_model%s.onnx", q);
  snprintf(f_first, sizeof f_first, "decoder_model%s.onnx", q);
  snprintf(f_past, sizeof f_past, "decoder_with_past_model%s.onnx", q);
  struct dec d = {0};
  d.enc = open_s(dir, f_enc, 0, false, false, &d.m_enc);
  d.first = open_s(dir, f_first, 0, false, false, &d.m_first);
  d.plain = open_s(dir, f_past, 0, false, false, &d.m_past);
  /* the same model: the rewrite leaves it alone */
  d.kv = open_s(dir, f_past, 1, opt_none, keys_only, &d.m_past);
  if (!d.enc || !d.first || !d.plain || !d.kv) return;
  /* Self-attention and encoder attention in each layer, fused or not. */
  int fused = opt_none ? 0 : LAYERS;
  CHECK_MSG(count_def(d.kv, &tolk_kv_attention_def) == fused &&
                count_def(d.kv, &tolk_kv_shared_attention_def) == fused &&
                count_def(d.kv, &tolk_kv_scores_def) == LAYERS - fused &&
                count_def(d.kv, &tolk_kv_shared_context_def) == LAYERS - fused,
            "int8 %d, opt none %d: %d + %d attentions fused, %d + %d scores nodes left", int8, opt_none,
            count_def(d.kv, &tolk_kv_attention_def), count_def(d.kv, &tolk_kv_shared_attention_def),
            count_def(d.kv, &tolk_kv_scores_def), count_def(d.kv, &tolk_kv_shared_scores_def));
  /* At BASIC a kv session also fuses each layer's three residual Add +
   * LayerNorm pairs and its x * Sigmoid(x) (exec_optimize_kv_ir); the plain
   * session, at BASIC too, runs them as written, and the logits below must
   * be its own bit for bit. */
  CHECK_MSG(count_op(d.kv, "SkipLayerNormalization") == (opt_none ? 0 : 3 * LAYERS) &&
                count_op(d.kv, "QuickGelu") == (opt_none ? 0 : LAYERS) &&
                count_op(d.kv, "LayerNormalization") == (opt_none ? 3 * LAYERS : 0),
            "int8 %d, opt none %d: %d SkipLayerNormalization, %d QuickGelu, %d LayerNormalization", int8, opt_none,
            count_op(d.kv, "SkipLayerNormalization"), count_op(d.kv, "QuickGelu"),
            count_op(d.kv, "LayerNormalization"));
  CHECK_MSG(count_op(d.plain, "SkipLayerNormalization") == 0 && count_op(d.plain, "LayerNormalization") == 3 * LAYERS,
            "the plain session's graph as written: %d LayerNormalization", count_op(d.plain, "LayerNormalization"));
  CHECK_MSG(tolk_session_kv_count(d.plain) == 0, "a plain session keeps no cache");
  CHECK_MSG(tolk_session_kv_count(d.kv) == 2 * LAYERS, "pairs found: %zu", tolk_session_kv_count(d.kv));
  CHECK_MSG(tolk_session_kv_shared_count(d.kv) == 2 * LAYERS, "shared inputs found: %zu",
            tolk_session_kv_shared_count(d.kv));
  for (size_t i = 0; i < tolk_session_kv_shared_count(d.kv); i++)
    CHECK_MSG(strstr(tolk_session_kv_shared_input(d.kv, i), ".encoder."), "%s", tolk_session_kv_shared_input(d.kv, i));
  /* Keys are read transposed only: with kv_keys_transposed_only the cache
   * keeps them only that way; values always as written. */
  for (uint32_t p = 0; p < d.kv->n_kv; p++) {
    bool key = strstr(tolk_session_kv_input(d.kv, p), ".key") != NULL;
    CHECK_MSG(d.kv->kv[p].keys_t == key && d.kv->kv[p].plain == (!key || !keys_only), "%s: keys_t %d, plain %d",
              tolk_session_kv_input(d.kv, p), d.kv->kv[p].keys_t, d.kv->kv[p].plain);
  }

  tolk_error err;
  int64_t rows = 2, src_len = 5;
  int64_t src[10] = {2, 310, 45, 7, 0, 2, 88, 0, PAD, PAD}; /* the second padded */
  int64_t mask_v[10] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  tolk_tensor *ids = ids_tensor(src, rows, src_len), *mask = ids_tensor(mask_v, rows, src_len), *hidden = NULL;
  const char *en[2] = {"input_ids", "attention_mask"};
  const tolk_tensor *ein[2] = {ids, mask};
  CHECK_MSG(tolk_session_run(d.enc, 2, en, ein, 1, NULL, &hidden, NULL, &err) == TOLK_OK, "%s", err.message);

  /* First step: logits and all presents. */
  char past_names[LAYERS * KINDS][64], present_names[LAYERS * KINDS][64];
  for (int i = 0; i < LAYERS * KINDS; i++) {
    snprintf(past_names[i], 64, "past_key_values.%d.%s", i / KINDS, kinds[i % KINDS]);
    snprintf(present_names[i], 64, "present.%d.%s", i / KINDS, kinds[i % KINDS]);
  }
  int64_t start[2] = {PAD, PAD}; /* Marian starts decoding with pad */
  tolk_tensor *tok = ids_tensor(start, rows, 1);
  const char *fn[3] = {"input_ids", "encoder_attention_mask", "encoder_hidden_states"};
  const tolk_tensor *fin[3] = {tok, mask, hidden};
  const char *fon[1 + LAYERS * KINDS];
  tolk_tensor *fo[1 + LAYERS * KINDS] = {0};
  fon[0] = "logits";
  for (int i = 0; i < LAYERS * KINDS; i++) fon[1 + i] = present_names[i];
  CHECK_MSG(tolk_session_run(d.first, 3, fn, fin, 1 + LAYERS * KINDS, fon, fo, NULL, &err) == TOLK_OK, "%s",
            err.message);
  tolk_tensor_free(tok);

  /* State of the plain path: every past tensor; of the kv path: the cache
   * plus the encoder keys/values. */
  tolk_tensor *past[LAYERS * KINDS], *enc_mask = gather(mask, (int32_t[]){0, 1}, 2);
  for (int i = 0; i < LAYERS * KINDS; i++) past[i] = fo[1 + i], fo[1 + i] = NULL;
  tolk_kv_cache *cache = NULL;
  CHECK_MSG(tolk_kv_cache_create(d.kv, rows, &cache, &err) == TOLK_OK, "%s", err.message);
  const char *set_names[2 * LAYERS];
  const tolk_tensor *set_vals[2 * LAYERS];
  for (int l = 0, n = 0; l < LAYERS; l++)
    for (int k = 0; k < 2; k++, n++) set_names[n] = past_names[l * KINDS + k], set_vals[n] = past[l * KINDS + k];
  CHECK_MSG(tolk_kv_cache_set(cache, 2 * LAYERS, set_names, set_vals, &err) == TOLK_OK, "%s", err.message);
  CHECK(tolk_kv_cache_length(cache) == 1);
  tolk_tensor_free(fo[0]);
  /* Shared: the kv path keeps the first step's encoder keys/values, one row
   * per source, whatever the rows become. */
  tolk_tensor *src_kv[LAYERS * KINDS] = {0};
  int32_t map[3] = {0, 1}; /* the source each row reads */
  if (shared) {
    CHECK(tolk_kv_cache_share(cache, (int32_t[]){0, 2}, 2, &err) == TOLK_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.message, "outside the 2 given"), "%s", err.message);
    CHECK_MSG(tolk_kv_cache_share(cache, (int32_t[]){0, 1}, 2, &err) == TOLK_OK, "%s", err.message);
    for (int i = 0; i < LAYERS * KINDS; i++)
      if (i % KINDS >= 2) src_kv[i] = gather(past[i], (int32_t[]){0, 1}, 2);
  }

  float worst = 0, worst_cache = 0;
  for (int step = 1; step <= STEPS && !tu_failures; step++) {
    int64_t *tv = malloc((size_t)rows * sizeof *tv);
    for (int64_t r = 0; r < rows; r++) tv[r] = 3 + (step * 7 + r * 13) % 50;
    tolk_tensor *t = ids_tensor(tv, rows, 1);
    free(tv);
    const char *pn[2 + LAYERS * KINDS];
    const tolk_tensor *pin[2 + LAYERS * KINDS];
    size_t np = 0, nk = 0;
    const char *kn[2 + 2 * LAYERS];
    const tolk_tensor *kin[2 + 2 * LAYERS];
    pn[np] = kn[nk] = "input_ids", pin[np++] = kin[nk++] = t;
    pn[np] = kn[nk] = "encoder_attention_mask", pin[np++] = kin[nk++] = enc_mask;
    for (int i = 0; i < LAYERS * KINDS; i++) {
      pn[np] = past_names[i], pin[np++] = past[i];
      if (i % KINDS >= 2) kn[nk] = past_names[i], kin[nk++] = shared ? src_kv[i] : past[i];
    }
    const char *pon[1 + 2 * LAYERS];
    tolk_tensor *po[1 + 2 * LAYERS] = {0}, *ko = NULL;
    pon[0] = "logits";
    for (int l = 0, n = 1; l < LAYERS; l++)
      for (int k = 0; k < 2; k++) pon[n++] = present_names[l * KINDS + k];
    CHECK_MSG(tolk_session_run(d.plain, np, pn, pin, 1 + 2 * LAYERS, pon, po, NULL, &err) == TOLK_OK,
              "plain step %d: %s", step, err.message);
    const char *lg = "logits";
    CHECK_MSG(tolk_session_run_kv(d.kv, cache, nk, kn, kin, 1, &lg, &ko, NULL, &err) == TOLK_OK,
              "kv step %d: %s", step, err.message);
    tolk_tensor_free(t);
    if (tu_failures) break;
    worst = fmaxf(worst, max_diff(po[0], ko));
    CHECK(tolk_kv_cache_length(cache) == step + 1);
    for (int l = 0, n = 1; l < LAYERS; l++)
      for (int k = 0; k < 2; k++, n++) {
        tolk_tensor *c = NULL;
        if (keys_only && k == 0) {
          CHECK(tolk_kv_cache_get(cache, past_names[l * KINDS + k], &c, &err) == TOLK_ERR_UNSUPPORTED && !c);
          CHECK_MSG(strstr(err.message, "only transposed"), "%s", err.message);
        } else {
          CHECK(tolk_kv_cache_get(cache, past_names[l * KINDS + k], &c, &err) == TOLK_OK);
          worst_cache = fmaxf(worst_cache, c ? max_diff(po[n], c) : INFINITY);
        }
        tolk_tensor_free(c);
        tolk_tensor_free(past[l * KINDS + k]);
        past[l * KINDS + k] = po[n];
      }
    tolk_tensor_free(po[0]);
    tolk_tensor_free(ko);
    /* Beam-like reorders and a shrinking batch on both paths. */
    int32_t expand[3] = {1, 0, 1}, swap[3] = {2, 0, 1}, drop[2] = {0, 2}, last[1] = {1};
    const int32_t *keep = NULL;
    size_t n = 0;
    if (step == 3) keep = expand, n = 3;
    if (step == 9) keep = swap, n = 3;
    if (step == 20) keep = drop, n = 2;
    if (step == 30) keep = last, n = 1;
    if (keep) {
      for (int i = 0; i < LAYERS * KINDS; i++) {
        tolk_tensor *g = gather(past[i], keep, n);
        tolk_tensor_free(past[i]);
        past[i] = g;
      }
      tolk_tensor *g = gather(enc_mask, keep, n);
      tolk_tensor_free(enc_mask);
      enc_mask = g;
      CHECK_MSG(tolk_kv_cache_select(cache, keep, n, &err) == TOLK_OK, "%s", err.message);
      int32_t was[3];
      memcpy(was, map, sizeof was);
      for (size_t i = 0; i < n; i++) map[i] = was[keep[i]];
      rows = (int64_t)n;
      CHECK(tolk_kv_cache_rows(cache) == rows);
    }
    if (shared && step == 15) {
      /* The two sources trade places in their tensors, in place, and each
       * row is told to read the other: the same values reach every row, so
       * the steps after stay bit-identical only if the cache drops the keys
       * it had transposed from the old contents. */
      for (int i = 0; i < LAYERS * KINDS; i++) {
        if (!src_kv[i]) continue;
        float *v = tolk_tensor_data(src_kv[i]);
        size_t half = (size_t)tolk_tensor_numel(src_kv[i]) / 2;
        for (size_t e = 0; e < half; e++) {
          float x = v[e];
          v[e] = v[half + e];
          v[half + e] = x;
        }
      }
      for (int64_t r = 0; r < rows; r++) map[r] = 1 - map[r];
      CHECK_MSG(tolk_kv_cache_share(cache, map, 2, &err) == TOLK_OK, "%s", err.message);
    }
  }
  printf("%s%s%s: %d steps, logits max |kv - plain| = %g, cache max |kv - present| = %g\n", int8 ? "int8" : "fp32",
         shared ? ", encoder side shared" : "", keys_only ? ", keys kept transposed only" : "", STEPS, worst,
         worst_cache);
  /* Bit-identical, not merely close: the cache kernels make the same GEMM
   * calls on the same operands, and int8 graphs (dynamic quantization turns
   * a last-bit difference into a whole quantization step) depend on it. */
  CHECK_MSG(worst == 0.0f, "logits differ by %g", worst);
  CHECK_MSG(worst_cache == 0.0f, "cache differs from the presents by %g", worst_cache);

  /* Misuse: clear errors, nothing run. */
  tolk_tensor *lo = NULL;
  const char *lg = "logits";
  CHECK(tolk_session_run(d.kv, 0, NULL, NULL, 1, &lg, &lo, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "tolk_session_run_kv") != NULL, "%s", err.message);
  const char *bad_in[1] = {past_names[0]};
  const tolk_tensor *bad_t[1] = {past[0]};
  CHECK(tolk_session_run_kv(d.kv, cache, 1, bad_in, bad_t, 1, &lg, &lo, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "kept in the key/value cache") != NULL, "%s", err.message);
  const char *bad_out[1] = {present_names[0]};
  CHECK(tolk_session_run_kv(d.kv, cache, 0, NULL, NULL, 1, bad_out, &lo, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "kept in the key/value cache") != NULL, "%s", err.message);
  tolk_kv_cache *other = NULL;
  CHECK(tolk_kv_cache_create(d.plain, 1, &other, &err) == TOLK_ERR_INVALID_ARGUMENT && !other);
  int32_t oob = 5;
  CHECK(tolk_kv_cache_select(cache, &oob, 1, &err) == TOLK_ERR_INVALID_ARGUMENT);
  if (shared) { /* a shared input with other rows than the sources stated */
    const char *sn[3] = {"input_ids", "encoder_attention_mask", past_names[2]};
    tolk_tensor *one = ids_tensor((int64_t[]){5}, 1, 1);
    const tolk_tensor *sv[3] = {one, enc_mask, past[2]};
    CHECK(tolk_session_run_kv(d.kv, cache, 3, sn, sv, 1, &lg, &lo, NULL, &err) == TOLK_ERR_SHAPE);
    CHECK_MSG(strstr(err.message, "shared by the cache's rows") && strstr(err.message, "expected 2 rows"), "%s",
              err.message);
    tolk_tensor_free(one);
  }
  { /* An encoder mask one position longer than the encoder's keys is
       refused by the inputs' dims before any node runs (so the fused
       attention's own mask check is a second line), the cache unchanged. */
    int64_t wide_v[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    int64_t n_rows = tolk_kv_cache_rows(cache);
    tolk_tensor *wide = ids_tensor(wide_v, n_rows, 6), *one = ids_tensor((int64_t[]){5, 5}, n_rows, 1);
    const char *wn[2 + 2 * LAYERS];
    const tolk_tensor *wv[2 + 2 * LAYERS];
    size_t nw = 0;
    wn[nw] = "input_ids", wv[nw++] = one;
    wn[nw] = "encoder_attention_mask", wv[nw++] = wide;
    for (int i = 0; i < LAYERS * KINDS; i++)
      if (i % KINDS >= 2) wn[nw] = past_names[i], wv[nw++] = shared ? src_kv[i] : past[i];
    int64_t len = tolk_kv_cache_length(cache);
    CHECK(tolk_session_run_kv(d.kv, cache, nw, wn, wv, 1, &lg, &lo, NULL, &err) == TOLK_ERR_SHAPE && !lo);
    CHECK_MSG(strstr(err.message, "encoder_sequence_length=6") && strstr(err.message, "encoder_attention_mask"), "%s",
              err.message);
    CHECK_MSG(tolk_kv_cache_length(cache) == len, "a failed step grew the cache: %lld -> %lld", (long long)len,
              (long long)tolk_kv_cache_length(cache));
    tolk_tensor_free(wide);
    tolk_tensor_free(one);
  }
  CHECK(lo == NULL);

  tolk_kv_cache_free(cache);
  for (int i = 0; i < LAYERS * KINDS; i++) tolk_tensor_free(past[i]), tolk_tensor_free(src_kv[i]);
  tolk_tensor_free(enc_mask);
  tolk_tensor_free(ids);
  tolk_tensor_free(mask);
  tolk_tensor_free(hidden);
  tolk_session_free(d.enc);
  tolk_session_free(d.first);
  tolk_session_free(d.plain);
  tolk_session_free(d.kv);
  tolk_model_free(d.m_enc);
  tolk_model_free(d.m_first);
  tolk_model_free(d.m_past);
}

int main(void) {
  const char *dir = tu_fixtures();
  for (int shared = 0; shared < 2; shared++)
    for (int opt_none = 0; opt_none < 2; opt_none++)
      for (int keys_only = 0; keys_only < 2; keys_only++) {
        run_model(dir, false, shared, opt_none, keys_only);
        run_model(dir, true, shared, opt_none, keys_only);
      }
  return tu_finish("exec_kv");
}
