/*
 * mt.h — the translation engine's internals: the model folder (files,
 * configuration), the decoder driven step by step with its key/value cache,
 * and the search strategies (greedy, beam, sampling) with transformers'
 * logits processors.
 */
#ifndef TOLK_MT_H
#define TOLK_MT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

#define MT_MAX_BAD_WORDS 64
#define MT_MAX_LAYERS 64

/* What config.json and generation_config.json say. */
struct mt_config {
  int vocab_size, d_model, decoder_layers, decoder_heads, max_positions;
  int32_t decoder_start, eos, pad, forced_eos; /* -1: none */
  /* bad_words_ids: sequences; only single-token ones and the last token of
   * longer ones after their prefix are banned, as transformers does. */
  int32_t *bad_words;       /* concatenated */
  size_t bad_words_len[MT_MAX_BAD_WORDS];
  size_t n_bad_words;
  tolk_generate_params gen; /* defaults for generate() */
};

/* Reads DIR/config.json and DIR/generation_config.json (optional). */
tolk_status mt_config_load(const char *dir, struct mt_config *cfg, tolk_error *err);
void mt_config_release(struct mt_config *cfg);

/* The files of a model folder. Paths are owned by the struct. */
struct mt_files {
  char root[4096];   /* where the tokenizer and configs are */
  char onnx[4096];   /* where the graphs are: root or root/onnx */
  char encoder[4200], decoder[4200], decoder_past[4200], merged[4200];
  bool has_separate, has_merged;
  bool int8;         /* the *_quantized graphs */
};

/* Finds the graphs in `dir` (or dir/onnx): the *_quantized ones when `int8`,
 * else the fp32 ones, or the *_quantized ones when the folder has only those. */
tolk_status mt_files_find(const char *dir, bool int8, struct mt_files *f, tolk_error *err);

/* Checks every file the manifest lists that exists among those tolk uses
 * (graphs, configs, tokenizer) against its size and sha256. A folder without
 * tolk-manifest.json passes with *verified false. */
tolk_status mt_manifest_verify(const struct mt_files *f, bool *verified, tolk_error *err);

/* ---------------------------------------------------------------- decoder */

struct mt_model;   /* sessions + config */
struct mt_state;   /* one batch being decoded: encoder output, caches */

tolk_status mt_model_open(const struct mt_files *files, const struct mt_config *cfg,
                          int threads, struct mt_model **out, tolk_error *err);
void mt_model_close(struct mt_model *m);

/* Runs the encoder on `rows` sources padded to `len` ids (pad id beyond each
 * source's length) and returns a decoding state for them. */
tolk_status mt_state_begin(const struct mt_model *m, const int32_t *ids, const int32_t *lens,
                           size_t rows, size_t len, struct mt_state **out, tolk_error *err);
void mt_state_free(struct mt_state *s);

/* Keeps rows `keep[0..n)` of the state (in that order; repeats allowed), so
 * beams can be reordered and finished rows dropped. The first call may also
 * expand each source row into several (beams). */
tolk_status mt_state_select(struct mt_state *s, const int32_t *keep, size_t n, tolk_error *err);

/* One decoder step: feeds tokens[r] to row r and returns the logits,
 * rows × vocab floats valid until the next call. */
tolk_status mt_state_step(struct mt_state *s, const int32_t *tokens, const float **logits,
                          tolk_error *err);

size_t mt_state_rows(const struct mt_state *s);

/* ---------------------------------------------------------------- search */

/* One sentence's search — greedy, sampling or beam, with transformers'
 * processors — driven one decoder step at a time over the rows it owns in a
 * batch (mt_search_rows: num_beams, else 1). It sees only its own rows'
 * logits, so it runs the same alone and among other sentences. */
struct mt_search;
/* Scratch for the steps of any number of searches, run one at a time. */
struct mt_scratch;

/* Checks p as generate() would and gives the length limit it implies
 * (ids, the decoder start included). */
tolk_status mt_search_check(const tolk_generate_params *p, int *max_length, tolk_error *err);

tolk_status mt_search_new(const struct mt_config *cfg, const tolk_generate_params *p,
                          struct mt_search **out, tolk_error *err);
void mt_search_free(struct mt_search *s);
int mt_search_rows(const struct mt_search *s);
/* What its rows are fed at the next step (mt_search_rows entries). */
const int32_t *mt_search_tokens(const struct mt_search *s);
bool mt_search_done(const struct mt_search *s);
/* Ids so far, the decoder start included. */
int mt_search_length(const struct mt_search *s);

/* Consumes the step's logits of its rows (rows × vocab). parents[k]
 * receives the row (of its own, 0-based) that row k continues from, so the
 * caller can reorder the rows' decoder state. Then done() may be true. */
tolk_status mt_search_step(struct mt_search *s, struct mt_scratch *sc, const float *logits,
                           int32_t *parents, tolk_error *err);
/* num_return_sequences results (1 for greedy and each sample), which the
 * caller frees with tolk_generation_free. Valid once done (or at any time:
 * the best so far for beams). */
tolk_status mt_search_result(const struct mt_search *s, tolk_generation *out, tolk_error *err);

struct mt_scratch *mt_scratch_new(size_t vocab);
void mt_scratch_free(struct mt_scratch *sc);

/* Generates for `n` sources (already encoded into `s`, one row each) and
 * writes n × num_return_sequences results to out (zeroed by the caller). */
tolk_status mt_generate(const struct mt_config *cfg, const tolk_generate_params *p,
                        struct mt_state *s, size_t n, tolk_generation *out, tolk_error *err);

/* ---------------------------------------------------------------- text */

/* The most source ids (</s> included) the model's positions allow. */
int mt_max_positions(const tolk_translator *tr);

struct mt_span {
  size_t begin, end; /* byte range in the text */
};

struct mt_spans {
  struct mt_span *spans;
  size_t n, cap;
};

/* Splits text into sentences (never across a line break); spans exclude the
 * whitespace between sentences. false when out of memory. */
bool mt_split_sentences(const char *text, size_t len, struct mt_spans *out);

#endif /* TOLK_MT_H */
