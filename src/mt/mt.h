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

struct tolk_pool;

#define MT_MAX_BAD_WORDS 64
#define MT_MAX_LAYERS 64
#define MT_MAX_BEAMS 64

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

/* ---------------------------------------------------------------- shortlist */

/* A vocabulary shortlist (vmap.c): CTranslate2's vocabulary map. */
struct mt_vmap;

struct mt_vmap_stats {
  size_t lines, rules;     /* lines read; n-gram rules kept */
  size_t always;           /* ids always candidates (the special ones included) */
  size_t unknown_sources;  /* rules dropped: a source piece not in the vocabulary */
  size_t unknown_targets;  /* target pieces not in the vocabulary (left out) */
  size_t duplicate_keys;   /* rules replaced by a later line with the same n-gram */
};

/* Parses text[0..len) (`name` for messages: "NAME:LINE: what") with the
 * pieces of tok and ids below vocab; always[0..n_always) are candidates
 * for every batch. TOLK_ERR_MALFORMED naming the line for a line without
 * exactly one tab, an empty piece inside an n-gram or a NUL byte. Free
 * *out with mt_vmap_free. */
tolk_status mt_vmap_parse(const char *text, size_t len, const char *name, const tolk_tokenizer *tok,
                          size_t vocab, const int32_t *always, size_t n_always, struct mt_vmap **out,
                          tolk_error *err);
/* mt_vmap_parse of the file at path. */
tolk_status mt_vmap_load(const char *path, const tolk_tokenizer *tok, size_t vocab, const int32_t *always,
                         size_t n_always, struct mt_vmap **out, tolk_error *err);
void mt_vmap_free(struct mt_vmap *v);
struct mt_vmap_stats mt_vmap_stats(const struct mt_vmap *v);

/* The candidates of `rows` sources (row r: ids[r * stride ..] of lens[r]
 * ids): sorted, distinct ids in *out (caller frees), *n_out of them. */
tolk_status mt_vmap_candidates(const struct mt_vmap *v, const int32_t *ids, const int32_t *lens, size_t rows,
                               size_t stride, int32_t **out, size_t *n_out, tolk_error *err);

/* ---------------------------------------------------------------- decoder */

struct mt_model;   /* sessions + config */
struct mt_state;   /* one batch being decoded: encoder output, caches */

/* Opens the sessions of `files` with tp's threads and int8_lm_head. With
 * `vmap` (may be NULL; the model takes it over, also on failure), every
 * batch's LM head computes only the batch's candidates. */
tolk_status mt_model_open(const struct mt_files *files, const struct mt_config *cfg,
                          const tolk_translator_params *tp, struct mt_vmap *vmap, struct mt_model **out,
                          tolk_error *err);
/* The model's shortlist, or NULL. */
const struct mt_vmap *mt_model_vmap(const struct mt_model *m);
/* The decoder's thread pool, which the searches of a step share. */
struct tolk_pool *mt_model_pool(const struct mt_model *m);
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
 * rows × vocab floats valid until the next call, which the caller may
 * overwrite. With a shortlist, the logits of ids that are not candidates
 * of the batch are -inf, and the caller must leave them so (the search's
 * processors only mask or scale, and its forced EOS is a candidate). */
tolk_status mt_state_step(struct mt_state *s, const int32_t *tokens, float **logits,
                          tolk_error *err);

size_t mt_state_rows(const struct mt_state *s);
/* mt_model_pool of the state's model. */
struct tolk_pool *mt_state_pool(const struct mt_state *s);
/* The padded source length (ids) its rows attend to. */
size_t mt_state_source_len(const struct mt_state *s);

/* A batch tensor [rows, …] whose rows change in place (rows.c): `t` is a
 * view of the first rows of `mem`, which has room for `cap`. */
struct mt_rows {
  tolk_tensor *t;
  tolk_tensor *own; /* the adopted tensor whose buffer mem is, or NULL: mem is malloc'd */
  void *mem;
  int64_t cap;
};

/* Takes t over (freed with r; its buffer is used until rows are added). */
tolk_status mt_rows_adopt(struct mt_rows *r, tolk_tensor *t, tolk_error *err);
void mt_rows_free(struct mt_rows *r);
/* Keeps rows keep[0..n) in that order (repeats allowed); rows that stay put
 * are not copied. */
tolk_status mt_rows_select(struct mt_rows *r, const int32_t *keep, size_t n, tolk_error *err);
/* Appends the rows of x (same shape but the first axis and `axis`), both
 * widened along `axis` to the longer of the two with zeros. */
tolk_status mt_rows_append(struct mt_rows *r, const tolk_tensor *x, int axis, tolk_error *err);

/* Whether states of the model can be joined while they decode (the
 * decoder keeps its cache in place and its sessions are ragged). */
bool mt_model_ragged(const struct mt_model *m);

/* Moves src's rows to the end of dst — sentences joining a batch that is
 * already decoding — both past their first step: the source side (encoder
 * mask, cross-attention keys/values) is widened to the longer source with
 * masked zeros, and the self-attention caches join with their own lengths.
 * Every row then decodes exactly as it would alone. src is left with no
 * rows (free it). TOLK_ERR_UNSUPPORTED when the model is not ragged. On
 * failure both are unchanged. */
tolk_status mt_state_append(struct mt_state *dst, struct mt_state *src, tolk_error *err);

/* ---------------------------------------------------------------- search */

/* One sentence's search — greedy, sampling or beam, with transformers'
 * processors — driven one decoder step at a time over the rows it owns in a
 * batch (mt_search_rows: num_beams, else 1). It sees only its own rows'
 * logits, so it runs the same alone and among other sentences. */
struct mt_search;
/* Scratch for the steps of any number of searches: one slot per thread
 * that steps them at the same time. */
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

/* Steps searches s[0..n), which own consecutive rows of the step's logits
 * (rows × vocab, in that order, mt_search_rows each): each consumes its
 * rows, overwriting them (the processors work in place), and parents[r] receives, for row r, the row of the same search (0
 * for its first) that it continues from, so the caller can reorder the
 * decoder state. Then done() may be true. The searches are shared out over
 * pool's threads (NULL: this one), at most one per slot of sc at a time;
 * each runs exactly as alone. */
tolk_status mt_search_step_many(struct mt_search *const *s, size_t n, struct mt_scratch *sc,
                                float *logits, int32_t *parents, struct tolk_pool *pool,
                                tolk_error *err);
/* The first step's logits, computed once per source, for the rows of its
 * beams or sample copies: a new buffer (free()) of rows × vocab floats whose
 * row r is row from[r] of logits; NULL when out of memory. */
float *mt_logits_spread(const float *logits, const int32_t *from, size_t rows, size_t vocab);
/* num_return_sequences results (1 for greedy and each sample), which the
 * caller frees with tolk_generation_free. Valid once done (or at any time:
 * the best so far for beams). */
tolk_status mt_search_result(const struct mt_search *s, tolk_generation *out, tolk_error *err);

/* slots: the most searches stepped at once (a pool's threads). */
struct mt_scratch *mt_scratch_new(size_t vocab, int slots);
void mt_scratch_free(struct mt_scratch *sc);

/* Generates for `n` sources (already encoded into `s`, one row each) and
 * writes n × num_return_sequences results to out (zeroed by the caller). */
tolk_status mt_generate(const struct mt_config *cfg, const tolk_generate_params *p,
                        struct mt_state *s, size_t n, tolk_generation *out, tolk_error *err);

/* ---------------------------------------------------------------- batcher */

/* Continuous batching (batcher.c): a running batch that sentences join and
 * leave between decoder steps, each decoded exactly as alone. Callers
 * serialise every call. */
struct mt_batcher;

/* A sentence that finished: its search (owned by the batcher until
 * mt_batcher_clear_finished; read its results with mt_search_result). */
struct mt_done {
  uint64_t id;
  struct mt_search *search;
};

tolk_status mt_batcher_new(const tolk_translator *tr, struct mt_batcher **out, tolk_error *err);
void mt_batcher_free(struct mt_batcher *b);
/* Whether admitted sentences join the running batch (else each admission
 * decodes as a batch of its own, stepped in turn). */
bool mt_batcher_ragged(const struct mt_batcher *b);
bool mt_batcher_broken(const struct mt_batcher *b);

/* Admits n sentences (ids ending in </s>; params[i] checked and fitted to
 * the model, num_beams ≤ MT_MAX_BEAMS; ids[i] names it): their encoder run
 * and first decoder step, then their rows join the batch. Some may finish
 * at once (mt_batcher_finished). On failure none was admitted — and when
 * mt_batcher_broken says so, the running batch is lost as after a failed
 * step. */
tolk_status mt_batcher_add(struct mt_batcher *b, const tolk_ids *src, const tolk_generate_params *const *params,
                           const uint64_t *ids, size_t n, tolk_error *err);

/* One decoder step for every row; finished sentences leave the batch and
 * are listed by mt_batcher_finished. After a failure the batch is broken:
 * fail the sentences still in it (mt_batcher_ids), then mt_batcher_reset. */
tolk_status mt_batcher_step(struct mt_batcher *b, tolk_error *err);

/* Removes sentence `id` from the batch now (cancelled, past its deadline).
 * false when it is not in the batch; *st says whether removing failed. */
bool mt_batcher_drop(struct mt_batcher *b, uint64_t id, tolk_status *st, tolk_error *err);

/* Finished sentences since the last clear, in the order they finished. */
struct mt_done *mt_batcher_finished(struct mt_batcher *b, size_t *n);
void mt_batcher_clear_finished(struct mt_batcher *b);
/* Empties the batch (and the finished list). */
void mt_batcher_reset(struct mt_batcher *b);

/* The ids in the batch: writes up to max, returns how many there are. */
size_t mt_batcher_ids(const struct mt_batcher *b, uint64_t *out, size_t max);
/* Rows (beams count), sentences, and the longest source (ids) in the batch. */
size_t mt_batcher_rows(const struct mt_batcher *b);
size_t mt_batcher_sentences(const struct mt_batcher *b);
size_t mt_batcher_source_len(const struct mt_batcher *b);

/* The translator's decoder and configuration (translator.c). */
const struct mt_model *mt_translator_model(const tolk_translator *tr);
const struct mt_config *mt_translator_config(const tolk_translator *tr);
/* p's limits fitted to the model's positions, as generate() fits them. */
void mt_params_fit(const tolk_translator *tr, tolk_generate_params *p);

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

/* A text cut into the sentences tolk_translator_translate_text translates
 * (document.c): each with its byte range, line and ids (tag included). */
struct mt_piece {
  struct mt_span span;
  size_t line;
  tolk_ids ids;
};

struct mt_doc {
  struct mt_piece *p;
  size_t n, cap;
};

/* Splits and tokenizes text: lines, sentences, over-long sentences cut at
 * word boundaries (a word that alone exceeds the model's positions fails
 * with TOLK_ERR_LIMIT); a tag at the very start of the text applies to all
 * of it, else `tag` (may be NULL). Release with mt_doc_release. */
tolk_status mt_doc_plan(const tolk_translator *tr, const char *text, size_t len, const char *tag,
                        struct mt_doc *doc, tolk_error *err);
void mt_doc_release(struct mt_doc *doc);
/* The whole translation: translations[i] of piece i, joined with the
 * source's line breaks (and a space between ASCII words on one line). *out
 * is the caller's (free). */
tolk_status mt_doc_join(const struct mt_doc *doc, const char *const *translations, char **out,
                        tolk_error *err);

#endif /* TOLK_MT_H */
