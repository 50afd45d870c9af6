/*
 * config.c — a Marian model folder: which graphs it has (Optimum's names, at
 * the top or under onnx/, fp32 or _quantized), what config.json and
 * generation_config.json say, and whether the files match the checksums in
 * tolk-manifest.json. Ids and defaults come from these files only.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/sha256.h"
#include "mt.h"

enum { MAX_CONFIG_BYTES = 16 << 20 };

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static tolk_status join(char *out, size_t size, const char *dir, const char *name, tolk_error *err) {
  int n = snprintf(out, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s/%s", dir, name);
  return TOLK_OK;
}

/* Parses a JSON file; *out is NULL (and TOLK_OK returned) when the file is
 * absent and optional. */
static tolk_status read_json(const char *path, bool optional, cJSON **out, tolk_error *err) {
  *out = NULL;
  if (optional && !is_file(path)) return TOLK_OK;
  char *buf;
  size_t len;
  tolk_status st = tolk_read_file(path, MAX_CONFIG_BYTES, &buf, &len, err);
  if (st) return st;
  const char *end = NULL;
  *out = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
  size_t at = end ? (size_t)(end - buf) : 0;
  free(buf);
  if (!*out || !cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: not a JSON object (error near byte %zu)", path, at);
  }
  return TOLK_OK;
}

/* The key from generation_config.json when there, else from config.json. */
static const cJSON *get(const cJSON *gen, const cJSON *cfg, const char *key) {
  const cJSON *v = gen ? cJSON_GetObjectItemCaseSensitive(gen, key) : NULL;
  if (!v || cJSON_IsNull(v)) v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static tolk_status get_int(const cJSON *gen, const cJSON *cfg, const char *key, int dflt,
                           long lo, long hi, int *out, const char *dir, tolk_error *err) {
  const cJSON *v = get(gen, cfg, key);
  if (!v) {
    *out = dflt;
    return TOLK_OK;
  }
  /* eos_token_id may be a list: the first entry is the one used. */
  if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) v = v->child;
  if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long)v->valuedouble ||
      v->valuedouble < (double)lo || v->valuedouble > (double)hi)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s: config key '%s' must be an integer in [%ld, %ld]",
                     dir, key, lo, hi);
  *out = (int)v->valuedouble;
  return TOLK_OK;
}

static float get_float(const cJSON *gen, const cJSON *cfg, const char *key, float dflt) {
  const cJSON *v = get(gen, cfg, key);
  return cJSON_IsNumber(v) ? (float)v->valuedouble : dflt;
}

static bool get_bool(const cJSON *gen, const cJSON *cfg, const char *key, bool dflt) {
  const cJSON *v = get(gen, cfg, key);
  return v ? cJSON_IsTrue(v) : dflt;
}

static tolk_status load_bad_words(const cJSON *gen, const cJSON *cfg, struct mt_config *c,
                                  const char *dir, tolk_error *err) {
  const cJSON *v = get(gen, cfg, "bad_words_ids");
  if (!v) return TOLK_OK;
  size_t total = 0;
  const cJSON *seq;
  cJSON_ArrayForEach(seq, v) {
    if (!cJSON_IsArray(seq) || cJSON_GetArraySize(seq) < 1 || c->n_bad_words == MT_MAX_BAD_WORDS)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                       "%s: bad_words_ids must be at most %d non-empty lists of ids", dir, MT_MAX_BAD_WORDS);
    total += (size_t)cJSON_GetArraySize(seq);
    c->bad_words_len[c->n_bad_words++] = (size_t)cJSON_GetArraySize(seq);
  }
  c->bad_words = malloc((total ? total : 1) * sizeof *c->bad_words);
  if (!c->bad_words) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "config: out of memory");
  size_t k = 0;
  cJSON_ArrayForEach(seq, v) {
    const cJSON *id;
    cJSON_ArrayForEach(id, seq) {
      if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= c->vocab_size)
        return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s: bad_words_ids holds an id outside the vocabulary", dir);
      c->bad_words[k++] = (int32_t)id->valuedouble;
    }
  }
  return TOLK_OK;
}

static tolk_status read_config(const cJSON *cfg, const cJSON *gen, struct mt_config *c,
                               const char *dir, tolk_error *err) {
  tolk_status st;
  int start, eos, pad, forced;
  if ((st = get_int(NULL, cfg, "vocab_size", 0, 1, 1 << 24, &c->vocab_size, dir, err)) ||
      (st = get_int(NULL, cfg, "d_model", 0, 1, 1 << 16, &c->d_model, dir, err)) ||
      (st = get_int(NULL, cfg, "decoder_layers", 0, 1, MT_MAX_LAYERS, &c->decoder_layers, dir, err)) ||
      (st = get_int(NULL, cfg, "decoder_attention_heads", 0, 1, 1024, &c->decoder_heads, dir, err)) ||
      (st = get_int(NULL, cfg, "max_position_embeddings", 512, 1, 1 << 20, &c->max_positions, dir, err)) ||
      (st = get_int(gen, cfg, "decoder_start_token_id", -1, -1, 1 << 24, &start, dir, err)) ||
      (st = get_int(gen, cfg, "eos_token_id", -1, -1, 1 << 24, &eos, dir, err)) ||
      (st = get_int(gen, cfg, "pad_token_id", -1, -1, 1 << 24, &pad, dir, err)) ||
      (st = get_int(gen, cfg, "forced_eos_token_id", -1, -1, 1 << 24, &forced, dir, err)))
    return st;
  if (c->vocab_size == 0 || c->d_model == 0 || c->decoder_layers == 0 || c->decoder_heads == 0)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "%s/config.json: vocab_size, d_model, decoder_layers and decoder_attention_heads are required", dir);
  if (start < 0) start = pad;
  if (start < 0 || eos < 0 || start >= c->vocab_size || eos >= c->vocab_size || pad >= c->vocab_size)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "%s/config.json: decoder_start_token_id (or pad_token_id) and eos_token_id must be ids below vocab_size %d",
                     dir, c->vocab_size);
  c->decoder_start = start;
  c->eos = eos;
  c->pad = pad;
  c->forced_eos = forced;
  tolk_generate_params *g = &c->gen;
  memset(g, 0, sizeof *g);
  int early = 0;
  const cJSON *es = get(gen, cfg, "early_stopping");
  if (cJSON_IsString(es) && strcmp(es->valuestring, "never") == 0) early = 2;
  else if (es) early = cJSON_IsTrue(es) ? 1 : 0;
  g->early_stopping = early;
  if ((st = get_int(gen, cfg, "num_beams", 1, 1, 1024, &g->num_beams, dir, err)) ||
      (st = get_int(gen, cfg, "max_length", 20, 1, 1 << 20, &g->max_length, dir, err)) ||
      (st = get_int(gen, cfg, "max_new_tokens", 0, 0, 1 << 20, &g->max_new_tokens, dir, err)) ||
      (st = get_int(gen, cfg, "min_length", 0, 0, 1 << 20, &g->min_length, dir, err)) ||
      (st = get_int(gen, cfg, "min_new_tokens", 0, 0, 1 << 20, &g->min_new_tokens, dir, err)) ||
      (st = get_int(gen, cfg, "no_repeat_ngram_size", 0, 0, 1 << 10, &g->no_repeat_ngram_size, dir, err)) ||
      (st = get_int(gen, cfg, "num_return_sequences", 1, 1, 1024, &g->num_return_sequences, dir, err)) ||
      (st = get_int(gen, cfg, "top_k", 50, 0, 1 << 24, &g->top_k, dir, err)))
    return st;
  g->length_penalty = get_float(gen, cfg, "length_penalty", 1.0f);
  g->repetition_penalty = get_float(gen, cfg, "repetition_penalty", 1.0f);
  g->temperature = get_float(gen, cfg, "temperature", 1.0f);
  g->top_p = get_float(gen, cfg, "top_p", 1.0f);
  g->renormalize_logits = get_bool(gen, cfg, "renormalize_logits", false);
  g->do_sample = get_bool(gen, cfg, "do_sample", false);
  return load_bad_words(gen, cfg, c, dir, err);
}

tolk_status mt_config_load(const char *dir, struct mt_config *c, tolk_error *err) {
  memset(c, 0, sizeof *c);
  char path[4200];
  cJSON *cfg = NULL, *gen = NULL;
  tolk_status st = join(path, sizeof path, dir, "config.json", err);
  if (!st) st = read_json(path, false, &cfg, err);
  if (!st) st = join(path, sizeof path, dir, "generation_config.json", err);
  if (!st) st = read_json(path, true, &gen, err);
  if (!st) st = read_config(cfg, gen, c, dir, err);
  cJSON_Delete(cfg);
  cJSON_Delete(gen);
  if (st) mt_config_release(c);
  return st;
}

void mt_config_release(struct mt_config *c) {
  free(c->bad_words);
  c->bad_words = NULL;
  c->n_bad_words = 0;
}

/* ---------------------------------------------------------------- files */

static tolk_status graph(char *out, size_t size, const char *dir, const char *stem, bool int8,
                         tolk_error *err) {
  char name[128];
  snprintf(name, sizeof name, "%s%s.onnx", stem, int8 ? "_quantized" : "");
  return join(out, size, dir, name, err);
}

static tolk_status find_graphs(const char *dir, bool int8, struct mt_files *f, tolk_error *err) {
  memset(f, 0, sizeof *f);
  f->int8 = int8;
  if (!is_dir(dir)) return tolk_fail(err, TOLK_ERR_NOT_FOUND, "model folder %s: no such folder", dir);
  if (strlen(dir) >= sizeof f->root) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s", dir);
  memcpy(f->root, dir, strlen(dir) + 1);
  tolk_status st;
  /* HuggingFace ONNX repos keep the graphs under onnx/. */
  char probe[4200];
  if ((st = graph(probe, sizeof probe, dir, "encoder_model", int8, err))) return st;
  if (is_file(probe)) {
    memcpy(f->onnx, dir, strlen(dir) + 1);
  } else {
    if ((st = join(f->onnx, sizeof f->onnx, dir, "onnx", err))) return st;
  }
  if ((st = graph(f->encoder, sizeof f->encoder, f->onnx, "encoder_model", int8, err)) ||
      (st = graph(f->decoder, sizeof f->decoder, f->onnx, "decoder_model", int8, err)) ||
      (st = graph(f->decoder_past, sizeof f->decoder_past, f->onnx, "decoder_with_past_model", int8, err)) ||
      (st = graph(f->merged, sizeof f->merged, f->onnx, "decoder_model_merged", int8, err)))
    return st;
  if (!is_file(f->encoder))
    return tolk_fail(err, TOLK_ERR_NOT_FOUND, "model folder %s: no encoder_model%s.onnx (looked in %s and %s/onnx)",
                     dir, int8 ? "_quantized" : "", dir, dir);
  f->has_separate = is_file(f->decoder) && is_file(f->decoder_past);
  f->has_merged = is_file(f->merged);
  if (!f->has_separate && !f->has_merged)
    return tolk_fail(err, TOLK_ERR_NOT_FOUND,
                     "model folder %s: needs decoder_model%s.onnx with decoder_with_past_model%s.onnx, or decoder_model_merged%s.onnx",
                     dir, int8 ? "_quantized" : "", int8 ? "_quantized" : "", int8 ? "_quantized" : "");
  return TOLK_OK;
}

tolk_status mt_files_find(const char *dir, bool int8, struct mt_files *f, tolk_error *err) {
  tolk_status st = find_graphs(dir, int8, f, err);
  if (st != TOLK_ERR_NOT_FOUND || int8 || !is_dir(dir)) return st;
  /* A folder shipping only the int8 graphs (like the bundled demo model,
   * kept small) runs them rather than failing; describe() says so. */
  tolk_error quiet;
  if (find_graphs(dir, true, f, &quiet) == TOLK_OK) return TOLK_OK;
  return find_graphs(dir, false, f, err);
}

/* Verifies one manifest entry if tolk uses the file. */
static tolk_status verify_entry(const struct mt_files *f, const cJSON *e, const char *manifest,
                                tolk_error *err) {
  const cJSON *jp = cJSON_GetObjectItemCaseSensitive(e, "path");
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "sha256");
  const cJSON *jn = cJSON_GetObjectItemCaseSensitive(e, "size");
  if (!cJSON_IsString(jp) || !cJSON_IsString(js))
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: a file entry lacks path or sha256", manifest);
  const char *rel = jp->valuestring;
  if (rel[0] == '/' || strstr(rel, ".."))
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: file path '%s' leaves the model folder", manifest, rel);
  char path[8400];
  int n = snprintf(path, sizeof path, "%s/%s", f->root, rel);
  if (n < 0 || (size_t)n >= sizeof path) return TOLK_OK;
  /* The graphs tolk runs, their external data, configs and tokenizer files;
   * other graphs and the PyTorch weights are not read, so not hashed. */
  const char *used[] = {f->encoder, f->decoder, f->decoder_past, f->merged};
  const char *ext = strrchr(rel, '.') ? strrchr(rel, '.') : "";
  bool needed = !strcmp(ext, ".json") || !strcmp(ext, ".spm") || !strcmp(ext, ".onnx_data") ||
                !strcmp(ext, ".data");
  for (size_t i = 0; i < 4 && !needed; i++) needed = strcmp(used[i], path) == 0;
  if (!needed || !is_file(path)) return TOLK_OK;
  char hex[65];
  uint64_t size;
  tolk_status st = sha256_file(path, hex, &size, err);
  if (st) return st;
  if (cJSON_IsNumber(jn) && (double)size != jn->valuedouble)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s: %llu bytes, but tolk-manifest.json says %.0f (corrupted or truncated?)",
                     path, (unsigned long long)size, jn->valuedouble);
  if (strcmp(hex, js->valuestring) != 0)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s: sha256 %s does not match tolk-manifest.json (%s)", path, hex,
                     js->valuestring);
  return TOLK_OK;
}

tolk_status mt_manifest_verify(const struct mt_files *f, bool *verified, tolk_error *err) {
  char path[4200];
  cJSON *m;
  *verified = false;
  tolk_status st = join(path, sizeof path, f->root, "tolk-manifest.json", err);
  if (!st) st = read_json(path, true, &m, err);
  if (st || !m) return st;
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
  const cJSON *e;
  cJSON_ArrayForEach(e, files) {
    if ((st = verify_entry(f, e, path, err))) break;
  }
  cJSON_Delete(m);
  *verified = st == TOLK_OK;
  return st;
}
