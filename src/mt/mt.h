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

/* Generates for `n` sources (already encoded into `s`, one row each) and
 * writes n × num_return_sequences results to out. */
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
