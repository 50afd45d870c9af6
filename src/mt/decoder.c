/*
 * decoder.c — drives Optimum's Marian graphs: the encoder once per batch,
 * then the decoder one token per step with its key/value cache. The first
 * step runs decoder_model.onnx (or the merged graph's no-cache branch), which
 * also returns the cross-attention keys/values of the encoder output; they are
 * kept for the whole batch, so they are computed once per sentence. Later
 * steps run decoder_with_past_model.onnx (or the merged graph's cache branch)
 * with the self-attention cache of the previous step.
 *
 * The self-attention cache is appended in place: decoder_with_past runs in
 * a session created with kv_cache (tolk.h), which keeps past keys/values in
 * one growing buffer per layer instead of copying them into new present
 * outputs every step. The merged graph (its cache pattern sits inside an If)
 * and exports whose pattern the engine does not recognise run as written,
 * handing the presents back each step.
 *
 * Rows can be reordered, repeated and dropped between steps
 * (mt_state_select): beams follow their parents, and finished sentences leave
 * the batch so it shrinks as it goes. The encoder-side tensors (mask, cross-
 * attention keys/values) are only gathered when the sentences in the batch
 * change, not when beams of one sentence swap places.
 *
 * With a vocabulary shortlist (vmap.c), a batch's candidates are computed
 * from its sources when it begins, and each decoder session's LM head is
 * restricted to them (src/exec/head.h: the candidates' rows of the
 * embedding gathered and packed once per batch and session). The step's
 * logits come back candidates-wide and are spread into a vocabulary-wide
 * buffer whose other entries stay -inf, so the search and its processors
 * work on vocabulary ids as without a shortlist.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../exec/head.h"
#include "mt.h"
#include "tolk.h"

enum { KV_DEC_K, KV_DEC_V, KV_ENC_K, KV_ENC_V, KV_KINDS };
static const char *const kv_kind[KV_KINDS] = {"decoder.key", "decoder.value", "encoder.key",
                                              "encoder.value"};

struct mt_model {
  tolk_model *enc_model, *first_model, *past_model; /* first == past for merged */
  tolk_session *encoder, *first, *past;
  bool merged;
  bool in_place; /* past keeps the self-attention cache (tolk_kv_cache) */
  bool shared;   /* in_place, and every encoder.* input is shared (one row per sentence) */
  int layers;
  int64_t vocab;
  int32_t pad;
  /* names: past_key_values.L.kind and present.L.kind */
  char (*past_names)[64];
  char (*present_names)[64];
  struct mt_vmap *vmap; /* NULL: the whole vocabulary every step */
};

struct mt_state {
  const struct mt_model *m;
  size_t rows;
  tolk_tensor *enc_hidden;
  struct mt_rows enc_mask;
  struct mt_rows *kv; /* layers × KV_KINDS; NULL before the first step */
  tolk_kv_cache *cache; /* in_place: the decoder.* kinds live here */
  int32_t *source;      /* the sentence of each row */
  /* shared: the row of the encoder.* tensors each row reads (enc_rows of
   * them, one per sentence held), as the cache was last told */
  int32_t *enc_row;
  size_t enc_rows;
  tolk_tensor *logits;  /* a view of logit_mem, the last step's */
  float *logit_mem;     /* logit_cells of room the steps write into */
  size_t logit_cells;
  size_t step;
  /* With a shortlist: the batch's candidates (sorted ids), the heads
   * restricted to them (made at the first step of each session), and the
   * vocabulary-wide logits, -inf but at candidates, for cap_rows rows. */
  int32_t *cand;
  size_t n_cand;
  struct exec_head_subset *head_first, *head_past;
  float *wide;
  size_t cap_rows;
};

static tolk_status open_session(const char *path, const tolk_translator_params *tp, bool kv,
                                tolk_model **model, tolk_session **out, tolk_error *err) {
  tolk_model_params mp = tolk_model_default_params();
  tolk_status st = tolk_model_load(path, mp, model, err);
  if (st) return st;
  tolk_session_params sp = tolk_session_default_params();
  sp.threads = tp->threads;
  sp.kv_cache = kv;
  /* Attention is all that reads a step's keys: held also as written, they
   * would only be copied at every beam reorder. */
  sp.kv_keys_transposed_only = kv;
  /* Each step of a sentence has a new past length, and each sentence its own
   * source length: most signatures never recur (tolk.h, plan_on_repeat). */
  sp.plan_on_repeat = 1;
  /* Only the decoders have an LM head; the encoder has nothing it fits. */
  sp.int8_lm_head = tp->int8_lm_head;
  sp.bf16_weights = tp->bf16;
  /* int8 graphs: each row (token) quantized on its own, so that a sentence
   * translates the same in any batch (tolk.h, quant_rows). */
  sp.quant_rows = 1;
  if (tp->opt_level != TOLK_OPT_NONE) sp.opt_level = (tolk_opt_level)tp->opt_level;
  st = tolk_session_create(*model, sp, out, err);
  if (st) tolk_error_prefix(err, "%s", path);
  return st;
}

/* Whether the pairs the engine keeps are exactly the layers' decoder.key
 * and decoder.value; if not (an export the pattern only partly fits), the
 * steps cannot leave those to the cache. */
static bool kv_pairs_match(const struct mt_model *m) {
  size_t n = tolk_session_kv_count(m->past);
  if (n != 2 * (size_t)m->layers) return false;
  for (size_t i = 0; i < n; i++) {
    const char *name = tolk_session_kv_input(m->past, i);
    bool found = false;
    for (int l = 0; l < m->layers && !found; l++)
      found = !strcmp(name, m->past_names[l * KV_KINDS + KV_DEC_K]) ||
              !strcmp(name, m->past_names[l * KV_KINDS + KV_DEC_V]);
    if (!found) return false;
  }
  return true;
}

/* Whether the past session shares every layer's encoder.key and
 * encoder.value (tolk_session_kv_shared_input): then a sentence's beams read
 * one copy of them. */
static bool encoder_shared(const struct mt_model *m) {
  size_t n = tolk_session_kv_shared_count(m->past), found = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = tolk_session_kv_shared_input(m->past, i);
    for (int l = 0; l < m->layers; l++)
      found += !strcmp(name, m->past_names[l * KV_KINDS + KV_ENC_K]) ||
               !strcmp(name, m->past_names[l * KV_KINDS + KV_ENC_V]);
  }
  return found == 2 * (size_t)m->layers;
}

/* Whether each decoder session has an LM head a shortlist can restrict: a
 * merged decoder keeps it inside its If branches, which it cannot. */
static tolk_status check_heads(const struct mt_model *m, const struct mt_files *files, tolk_error *err) {
  const tolk_session *ss[2] = {m->first, m->past};
  const char *paths[2] = {m->merged ? files->merged : files->decoder, files->decoder_past};
  for (int i = 0; i < (m->merged ? 1 : 2); i++) {
    struct exec_head_subset *h = NULL;
    int32_t id = m->pad;
    tolk_status st = exec_head_subset_create(ss[i], &id, 1, &h, err);
    exec_head_subset_free(h);
    if (st) {
      tolk_error_prefix(err, "vocabulary shortlist: %s", paths[i]);
      return st;
    }
  }
  return TOLK_OK;
}

const struct mt_vmap *mt_model_vmap(const struct mt_model *m) { return m->vmap; }

struct tolk_pool *mt_model_pool(const struct mt_model *m) { return exec_session_pool(m->past); }

tolk_status mt_model_open(const struct mt_files *files, const struct mt_config *cfg,
                          const tolk_translator_params *tp, struct mt_vmap *vmap,
                          struct mt_model **out, tolk_error *err) {
  *out = NULL;
  struct mt_model *m = calloc(1, sizeof *m);
  if (!m) {
    mt_vmap_free(vmap);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  }
  m->vmap = vmap;
  m->layers = cfg->decoder_layers;
  m->vocab = cfg->vocab_size;
  m->pad = cfg->pad >= 0 ? cfg->pad : cfg->eos;
  m->merged = !files->has_separate;
  m->past_names = calloc((size_t)m->layers * KV_KINDS, sizeof *m->past_names);
  m->present_names = calloc((size_t)m->layers * KV_KINDS, sizeof *m->present_names);
  tolk_status st = m->past_names && m->present_names
                       ? TOLK_OK
                       : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (int l = 0; l < m->layers && !st; l++)
    for (int k = 0; k < KV_KINDS; k++) {
      snprintf(m->past_names[l * KV_KINDS + k], 64, "past_key_values.%d.%s", l, kv_kind[k]);
      snprintf(m->present_names[l * KV_KINDS + k], 64, "present.%d.%s", l, kv_kind[k]);
    }
  if (!st) st = open_session(files->encoder, tp, false, &m->enc_model, &m->encoder, err);
  if (!st && m->merged) {
    st = open_session(files->merged, tp, false, &m->first_model, &m->first, err);
    m->past = m->first;
  } else if (!st) {
    st = open_session(files->decoder, tp, false, &m->first_model, &m->first, err);
    if (!st) st = open_session(files->decoder_past, tp, true, &m->past_model, &m->past, err);
    m->in_place = !st && kv_pairs_match(m);
    m->shared = m->in_place && encoder_shared(m);
    if (!st && !m->in_place && tolk_session_kv_count(m->past)) {
      tolk_session_free(m->past);
      tolk_model_free(m->past_model);
      st = open_session(files->decoder_past, tp, false, &m->past_model, &m->past, err);
    }
  }
  if (!st && m->vmap) st = check_heads(m, files, err);
  if (st) {
    mt_model_close(m);
    return st;
  }
  *out = m;
  return TOLK_OK;
}

void mt_model_close(struct mt_model *m) {
  if (!m) return;
  tolk_session_free(m->encoder);
  tolk_session_free(m->first);
  if (!m->merged) tolk_session_free(m->past);
  tolk_model_free(m->enc_model);
  tolk_model_free(m->first_model);
  tolk_model_free(m->past_model);
  free(m->past_names);
  free(m->present_names);
  mt_vmap_free(m->vmap);
  free(m);
}

static tolk_status int64_tensor(const int32_t *v, size_t rows, size_t cols, tolk_tensor **out,
                                tolk_error *err) {
  int64_t dims[2] = {(int64_t)rows, (int64_t)cols};
  tolk_status st = tolk_tensor_create(TOLK_INT64, 2, dims, NULL, 0, out, err);
  if (st) return st;
  int64_t *d = tolk_tensor_data(*out);
  for (size_t i = 0; i < rows * cols; i++) d[i] = v[i];
  return TOLK_OK;
}

tolk_status mt_state_begin(const struct mt_model *m, const int32_t *ids, const int32_t *lens,
                           size_t rows, size_t len, struct mt_state **out, tolk_error *err) {
  *out = NULL;
  struct mt_state *s = calloc(1, sizeof *s);
  size_t cells = rows * len;
  int32_t *mask = malloc((cells ? cells : 1) * sizeof *mask);
  if (!s || !mask) {
    free(s);
    free(mask);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  }
  s->m = m;
  s->rows = rows;
  s->source = malloc((rows ? rows : 1) * sizeof *s->source);
  if (!s->source) {
    free(s);
    free(mask);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  }
  for (size_t r = 0; r < rows; r++) s->source[r] = (int32_t)r;
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < len; c++) mask[r * len + c] = (int32_t)c < lens[r];
  tolk_tensor *input_ids = NULL;
  tolk_status st = m->vmap ? mt_vmap_candidates(m->vmap, ids, lens, rows, len, &s->cand, &s->n_cand, err) : TOLK_OK;
  if (!st) st = int64_tensor(ids, rows, len, &input_ids, err);
  tolk_tensor *mask_t = NULL;
  if (!st) st = int64_tensor(mask, rows, len, &mask_t, err);
  if (!st) st = mt_rows_adopt(&s->enc_mask, mask_t, err);
  free(mask);
  if (!st) {
    const char *names[2] = {"input_ids", "attention_mask"};
    const tolk_tensor *in[2] = {input_ids, s->enc_mask.t};
    st = tolk_session_run(m->encoder, 2, names, in, 1, NULL, &s->enc_hidden, NULL, err);
    if (st) tolk_error_prefix(err, "encoder");
  }
  tolk_tensor_free(input_ids);
  if (st) {
    mt_state_free(s);
    return st;
  }
  *out = s;
  return TOLK_OK;
}

static void free_kv(struct mt_state *s) {
  if (!s->kv) return;
  for (int i = 0; i < s->m->layers * KV_KINDS; i++) mt_rows_free(&s->kv[i]);
  free(s->kv);
  s->kv = NULL;
}

void mt_state_free(struct mt_state *s) {
  if (!s) return;
  free_kv(s);
  tolk_kv_cache_free(s->cache);
  free(s->source);
  free(s->enc_row);
  tolk_tensor_free(s->enc_hidden);
  mt_rows_free(&s->enc_mask);
  tolk_tensor_free(s->logits);
  free(s->logit_mem);
  free(s->cand);
  exec_head_subset_free(s->head_first);
  exec_head_subset_free(s->head_past);
  free(s->wide);
  free(s);
}

struct tolk_pool *mt_state_pool(const struct mt_state *s) { return mt_model_pool(s->m); }

size_t mt_state_rows(const struct mt_state *s) { return s->rows; }
size_t mt_state_source_len(const struct mt_state *s) { return (size_t)tolk_tensor_dims(s->enc_mask.t)[1]; }

/* A new tensor made of rows keep[0..n) of t (rows = the first dimension). */
static tolk_status gather_rows(const tolk_tensor *t, const int32_t *keep, size_t n,
                               tolk_tensor **out, tolk_error *err) {
  int rank = tolk_tensor_rank(t);
  int64_t dims[TOLK_MAX_RANK];
  memcpy(dims, tolk_tensor_dims(t), (size_t)rank * sizeof *dims);
  size_t row_bytes = tolk_tensor_nbytes(t) / (size_t)(dims[0] ? dims[0] : 1);
  int64_t old_rows = dims[0];
  dims[0] = (int64_t)n;
  tolk_status st = tolk_tensor_create(tolk_tensor_dtype(t), rank, dims, NULL, 0, out, err);
  if (st) return st;
  const char *src = tolk_tensor_data(t);
  char *dst = tolk_tensor_data(*out);
  for (size_t i = 0; i < n; i++) {
    if (keep[i] < 0 || keep[i] >= old_rows) {
      tolk_tensor_free(*out);
      *out = NULL;
      return tolk_fail(err, TOLK_ERR_INTERNAL, "decoder state: row %d out of %lld", keep[i], (long long)old_rows);
    }
    memcpy(dst + i * row_bytes, src + (size_t)keep[i] * row_bytes, row_bytes);
  }
  return TOLK_OK;
}

static tolk_status replace_gathered(tolk_tensor **t, const int32_t *keep, size_t n, tolk_error *err) {
  if (!*t) return TOLK_OK;
  tolk_tensor *g;
  tolk_status st = gather_rows(*t, keep, n, &g, err);
  if (st) return st;
  tolk_tensor_free(*t);
  *t = g;
  return TOLK_OK;
}

/* The encoder-side tensors: the same for every row of one sentence. */
static bool encoder_side(int kind) { return kind == KV_ENC_K || kind == KV_ENC_V; }

/* Tells the cache which encoder.* row each row reads: row[0..s->rows) of
 * `used`; the state takes `row`. */
static tolk_status set_enc_rows(struct mt_state *s, int32_t *row, size_t used, tolk_error *err) {
  tolk_status st = tolk_kv_cache_share(s->cache, row, (int64_t)used, err);
  free(s->enc_row);
  s->enc_row = row;
  s->enc_rows = used;
  return st;
}

/* Shared encoder side, rows keep[0..n) kept: row i reads what row keep[i]
 * read, and the sentences no row reads any more leave the encoder.*
 * tensors (the rest move forward in place: nothing is gathered per row). */
static tolk_status share_rows(struct mt_state *s, const int32_t *keep, size_t n, tolk_error *err) {
  int32_t *row = malloc((n ? n : 1) * sizeof *row);
  int32_t *to = malloc((s->enc_rows ? s->enc_rows : 1) * sizeof *to);
  int32_t *kept = malloc((s->enc_rows ? s->enc_rows : 1) * sizeof *kept);
  tolk_status st = row && to && kept ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (size_t e = 0; !st && e < s->enc_rows; e++) to[e] = -1;
  for (size_t i = 0; !st && i < n; i++) to[row[i] = s->enc_row[keep[i]]] = 0;
  size_t used = 0;
  for (size_t e = 0; !st && e < s->enc_rows; e++)
    if (to[e] >= 0) to[e] = (int32_t)used, kept[used++] = (int32_t)e;
  for (int i = 0; !st && used < s->enc_rows && i < s->m->layers * KV_KINDS; i++)
    if (encoder_side(i % KV_KINDS)) st = mt_rows_select(&s->kv[i], kept, used, err);
  for (size_t i = 0; !st && i < n; i++) row[i] = to[row[i]];
  free(to);
  free(kept);
  if (st) {
    free(row);
    return st;
  }
  if (used == s->enc_rows) {
    /* Every sentence stays: the encoder.* tensors are as they were and
     * tolk_kv_cache_select carried each row's source along, so the cache
     * keeps what it derived from them (their keys transposed). */
    free(s->enc_row);
    s->enc_row = row;
    return TOLK_OK;
  }
  return set_enc_rows(s, row, used, err);
}

tolk_status mt_state_select(struct mt_state *s, const int32_t *keep, size_t n, tolk_error *err) {
  int32_t *source = malloc((n ? n : 1) * sizeof *source);
  /* Encoder-side rows are the same for every row of one sentence: a row
   * that already holds its new row's sentence keeps its own. In a served
   * batch, where sentences join and leave at every few steps, this leaves
   * most of them in place while the others are gathered. */
  int32_t *keep_enc = malloc((n ? n : 1) * sizeof *keep_enc);
  if (!source || !keep_enc) {
    free(source);
    free(keep_enc);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  }
  bool same_sentences = n == s->rows;
  tolk_status st = TOLK_OK;
  for (size_t i = 0; i < n && !st; i++) {
    if (keep[i] < 0 || (size_t)keep[i] >= s->rows) {
      st = tolk_fail(err, TOLK_ERR_INTERNAL, "decoder state: row %d out of %zu", keep[i], s->rows);
      break;
    }
    source[i] = s->source[keep[i]];
    bool kept = i < s->rows && source[i] == s->source[i];
    keep_enc[i] = kept ? (int32_t)i : keep[i];
    same_sentences &= kept;
  }
  if (!st && !same_sentences) {
    st = replace_gathered(&s->enc_hidden, keep, n, err);
    if (!st) st = mt_rows_select(&s->enc_mask, keep_enc, n, err);
  }
  for (int i = 0; s->kv && !st && i < s->m->layers * KV_KINDS; i++) {
    bool enc = encoder_side(i % KV_KINDS);
    if (!enc || (!same_sentences && !s->enc_row)) st = mt_rows_select(&s->kv[i], enc ? keep_enc : keep, n, err);
  }
  if (!st && s->cache) st = tolk_kv_cache_select(s->cache, keep, n, err);
  if (!st && s->enc_row) st = share_rows(s, keep, n, err);
  free(keep_enc);
  if (st) {
    free(source);
    return st;
  }
  free(s->source);
  s->source = source;
  s->rows = n;
  return TOLK_OK;
}

/* Empty cache inputs for the merged graph's first (no-cache) step, as
 * Optimum feeds them: [batch, heads, 0, head_dim]. That branch ignores them,
 * and an empty tensor binds no symbolic dim, so the encoder ones need not
 * match the source length. */
static tolk_status dummy_past(const struct mt_state *s, tolk_tensor **kv, tolk_error *err) {
  const tolk_value_info *info = NULL;
  for (size_t i = 0; i < tolk_session_input_count(s->m->first); i++) {
    const tolk_value_info *v = tolk_session_input(s->m->first, i);
    if (strncmp(v->name, "past_key_values.", 16) == 0) info = v;
  }
  if (!info || info->rank != 4 || info->dims[1] < 1 || info->dims[3] < 1)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "merged decoder: past_key_values inputs must be [batch, heads, seq, head_dim]");
  int64_t dims[4] = {(int64_t)s->rows, info->dims[1], 0, info->dims[3]};
  for (int i = 0; i < s->m->layers * KV_KINDS; i++) {
    tolk_status st = tolk_tensor_create(TOLK_FLOAT, 4, dims, NULL, 0, &kv[i], err);
    if (st) return st;
  }
  return TOLK_OK;
}

/* After the first step: the self-attention keys/values move into the
 * cache, and the encoder output, read only by that step, goes. */
static tolk_status start_cache(struct mt_state *s, tolk_error *err) {
  const struct mt_model *m = s->m;
  size_t n = 2 * (size_t)m->layers, j = 0;
  const char **names = malloc(n * sizeof *names);
  const tolk_tensor **vals = malloc(n * sizeof *vals);
  tolk_status st = names && vals ? tolk_kv_cache_create(m->past, (int64_t)s->rows, &s->cache, err)
                                 : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (int i = 0; !st && i < m->layers * KV_KINDS; i++)
    if (!encoder_side(i % KV_KINDS)) names[j] = m->past_names[i], vals[j++] = s->kv[i].t;
  if (!st) st = tolk_kv_cache_set(s->cache, n, names, vals, err);
  for (int i = 0; !st && i < m->layers * KV_KINDS; i++)
    if (!encoder_side(i % KV_KINDS)) {
      mt_rows_free(&s->kv[i]);
    }
  /* Shared: each row reads its own encoder.* row until rows are selected. */
  int32_t *row = !st && m->shared ? malloc((s->rows ? s->rows : 1) * sizeof *row) : NULL;
  if (!st && m->shared && !row) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (size_t r = 0; row && r < s->rows; r++) row[r] = (int32_t)r;
  if (row) st = set_enc_rows(s, row, s->rows, err);
  if (!st) {
    tolk_tensor_free(s->enc_hidden);
    s->enc_hidden = NULL;
  }
  free(names);
  free(vals);
  return st;
}

bool mt_model_ragged(const struct mt_model *m) { return m->in_place && tolk_session_kv_ragged(m->past); }

/* dst's candidates become the union of both states' (its heads are made
 * again at the next step); the -inf entries of dst->wide that became
 * candidates are written by every step from then on. */
static tolk_status join_candidates(struct mt_state *dst, const struct mt_state *src, tolk_error *err) {
  int32_t *u = malloc((dst->n_cand + src->n_cand + 1) * sizeof *u);
  if (!u) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  size_t i = 0, j = 0, n = 0;
  while (i < dst->n_cand || j < src->n_cand) {
    int32_t a = i < dst->n_cand ? dst->cand[i] : INT32_MAX, b = j < src->n_cand ? src->cand[j] : INT32_MAX;
    u[n++] = a <= b ? a : b;
    i += a <= b;
    j += b <= a;
  }
  if (n == dst->n_cand) {
    free(u);
    return TOLK_OK;
  }
  free(dst->cand);
  dst->cand = u;
  dst->n_cand = n;
  exec_head_subset_free(dst->head_past);
  dst->head_past = NULL;
  return TOLK_OK;
}

tolk_status mt_state_append(struct mt_state *dst, struct mt_state *src, tolk_error *err) {
  const struct mt_model *m = dst->m;
  if (src->m != m || !dst->cache || !src->cache)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "decoder state: only states past their first step of one "
                                                 "in-place model can be joined");
  int32_t *source = malloc((dst->rows + src->rows + 1) * sizeof *source);
  if (!source) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  /* The caches first: that one is all or nothing (and refuses unequal
   * lengths where the session is not ragged), the rest can only run out of
   * memory — which leaves dst broken, for the caller to drop. */
  tolk_status st = tolk_kv_cache_append(dst->cache, src->cache, err);
  if (!st && dst->cand) st = join_candidates(dst, src, err);
  if (!st) st = mt_rows_append(&dst->enc_mask, src->enc_mask.t, 1, err);
  for (size_t i = 0; !st && i < (size_t)m->layers * KV_KINDS; i++)
    if (encoder_side((int)(i % KV_KINDS))) st = mt_rows_append(&dst->kv[i], src->kv[i].t, 2, err);
  /* Shared: src's encoder.* rows came after dst's, as the caches joined. */
  int32_t *row = !st && dst->enc_row ? malloc((dst->rows + src->rows + 1) * sizeof *row) : NULL;
  if (!st && dst->enc_row && !row) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  if (row) {
    memcpy(row, dst->enc_row, dst->rows * sizeof *row);
    for (size_t r = 0; r < src->rows; r++) row[dst->rows + r] = (int32_t)dst->enc_rows + src->enc_row[r];
  }
  if (st) {
    free(source);
    free(row);
    return st;
  }
  /* Sentences keep distinct numbers, so selecting rows later knows when
   * the encoder side must be gathered again. */
  int32_t next = 0;
  for (size_t r = 0; r < dst->rows; r++) next = dst->source[r] >= next ? dst->source[r] + 1 : next;
  memcpy(source, dst->source, dst->rows * sizeof *source);
  for (size_t r = 0; r < src->rows; r++) source[dst->rows + r] = next + src->source[r];
  free(dst->source);
  dst->source = source;
  dst->rows += src->rows;
  src->rows = 0;
  if (row) {
    size_t used = dst->enc_rows + src->enc_rows;
    free(src->enc_row);
    src->enc_row = NULL;
    src->enc_rows = 0;
    return set_enc_rows(dst, row, used, err);
  }
  return TOLK_OK;
}

/* Spreads the candidates-wide logits into s->wide, whose other entries
 * are -inf: they were set so when it was made, every step writes the same
 * candidate entries (the set only grows, mt_state_append), and the caller
 * leaves the others -inf (mt_state_step). */
static tolk_status widen_logits(struct mt_state *s, float **logits, tolk_error *err) {
  size_t vocab = (size_t)s->m->vocab;
  if (s->rows > s->cap_rows) {
    size_t cap = s->rows > 2 * s->cap_rows ? s->rows : 2 * s->cap_rows, cells;
    float *w = tolk_mul_size(cap, vocab, &cells) ? malloc(cells * sizeof *w) : NULL;
    if (!w) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory for %zu rows of logits", cap);
    for (size_t i = 0; i < cells; i++) w[i] = -INFINITY;
    free(s->wide);
    s->wide = w;
    s->cap_rows = cap;
  }
  const float *narrow = *logits;
  for (size_t r = 0; r < s->rows; r++) {
    float *row = s->wide + r * vocab;
    const float *nr = narrow + r * s->n_cand;
    for (size_t j = 0; j < s->n_cand; j++) row[s->cand[j]] = nr[j];
  }
  *logits = s->wide;
  return TOLK_OK;
}

/* The step's logits output, [rows, 1, width], bound to room the state
 * keeps: a new 16 MB buffer each step (64 rows of beams) cost a page fault
 * per 4 KB, each step, once the allocator handed it back to the system. */
static tolk_status logits_buffer(struct mt_state *s, int64_t width, tolk_tensor **out, tolk_error *err) {
  size_t cells;
  if (!tolk_mul_size(s->rows, (size_t)width, &cells)) return tolk_fail(err, TOLK_ERR_LIMIT, "translator: batch too large");
  if (cells > s->logit_cells) {
    float *m = malloc(cells * sizeof *m);
    if (!m) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory for %zu rows of logits", s->rows);
    tolk_tensor_free(s->logits); /* a view of the old room */
    s->logits = NULL;
    free(s->logit_mem);
    s->logit_mem = m;
    s->logit_cells = cells;
  }
  int64_t dims[3] = {(int64_t)s->rows, 1, width};
  return tolk_tensor_wrap(TOLK_FLOAT, 3, dims, s->logit_mem, cells * sizeof(float), out, err);
}

tolk_status mt_state_step(struct mt_state *s, const int32_t *tokens, float **logits,
                          tolk_error *err) {
  const struct mt_model *m = s->m;
  size_t n_kv = (size_t)m->layers * KV_KINDS;
  bool first = s->kv == NULL;
  bool cached = !first && m->in_place; /* decoder.* kinds are in s->cache */
  tolk_tensor *ids = NULL, *branch = NULL;
  tolk_tensor **dummy = NULL;
  const char **names = malloc((n_kv + 4) * sizeof *names);
  const tolk_tensor **in = malloc((n_kv + 4) * sizeof *in);
  const char **out_names = malloc((n_kv + 1) * sizeof *out_names);
  tolk_tensor **outs = calloc(n_kv + 1, sizeof *outs);
  tolk_status st = names && in && out_names && outs
                       ? int64_tensor(tokens, s->rows, 1, &ids, err)
                       : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  size_t n_in = 0, n_out = 0;
  if (!st) {
    names[n_in] = "input_ids", in[n_in++] = ids;
    names[n_in] = "encoder_attention_mask", in[n_in++] = s->enc_mask.t;
    if (first || m->merged) names[n_in] = "encoder_hidden_states", in[n_in++] = s->enc_hidden;
    if (m->merged) {
      uint8_t flag = !first;
      int64_t one = 1;
      st = tolk_tensor_create(TOLK_BOOL, 1, &one, &flag, 1, &branch, err);
      names[n_in] = "use_cache_branch", in[n_in++] = branch;
      if (!st && first) {
        dummy = calloc(n_kv, sizeof *dummy);
        st = dummy ? dummy_past(s, dummy, err) : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
      }
    }
  }
  /* Cache inputs: all four kinds for the merged graph; the self-attention
   * and cross-attention caches for decoder_with_past. */
  if (!st && (!first || m->merged))
    for (size_t i = 0; i < n_kv; i++)
      if (!cached || encoder_side((int)(i % KV_KINDS)))
        names[n_in] = m->past_names[i], in[n_in++] = first ? dummy[i] : s->kv[i].t;
  int64_t width = s->cand ? (int64_t)s->n_cand : m->vocab;
  if (!st) st = logits_buffer(s, width, &outs[0], err);
  out_names[n_out++] = "logits";
  for (int l = 0; l < m->layers; l++)
    for (int k = 0; k < KV_KINDS; k++)
      if (first || (!cached && !encoder_side(k))) out_names[n_out++] = m->present_names[l * KV_KINDS + k];
  tolk_session *sess = first ? m->first : m->past;
  struct exec_head_subset **head = first ? &s->head_first : &s->head_past;
  if (!st && s->cand && !*head) st = exec_head_subset_create(sess, s->cand, s->n_cand, head, err);
  if (!st) {
    st = exec_session_run_head(sess, cached ? s->cache : NULL, s->cand ? *head : NULL, n_in, names, in, n_out,
                               out_names, outs, err);
    if (st) tolk_error_prefix(err, "decoder step %zu", s->step);
  }
  /* The first session is done with once its step ran. */
  if (first && m->past != m->first) {
    exec_head_subset_free(s->head_first);
    s->head_first = NULL;
  }
  if (!st && first) {
    s->kv = calloc(n_kv, sizeof *s->kv);
    if (!s->kv) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  }
  if (!st) {
    size_t o = 1;
    for (int l = 0; l < m->layers; l++)
      for (int k = 0; k < KV_KINDS; k++) {
        if (!first && (cached || encoder_side(k))) continue;
        tolk_tensor *t = outs[o];
        outs[o++] = NULL;
        if (!st) st = mt_rows_adopt(&s->kv[l * KV_KINDS + k], t, err);
        else tolk_tensor_free(t);
      }
    if (!st) {
      tolk_tensor_free(s->logits);
      s->logits = outs[0];
      outs[0] = NULL;
      *logits = tolk_tensor_data(s->logits);
      if (s->cand) st = widen_logits(s, logits, err);
      s->step++;
    }
  }
  if (!st && first && m->in_place) st = start_cache(s, err);
  for (size_t i = 0; outs && i < n_kv + 1; i++) tolk_tensor_free(outs[i]);
  for (size_t i = 0; dummy && i < n_kv; i++) tolk_tensor_free(dummy[i]);
  free(dummy);
  tolk_tensor_free(ids);
  tolk_tensor_free(branch);
  free(names);
  free(in);
  free(out_names);
  free(outs);
  return st;
}
