/*
 * calib_text.c — `tolk quantize --calibrate SENTENCES.txt MODEL_DIR OUT_DIR`:
 * calibrates a translation model folder's graphs on real sentences, run as
 * translation runs them. Each line (a source sentence; empty lines are
 * skipped) is tokenized with the folder's tokenizer — given the folder's
 * default target tag (>>cmn_Hans<<, else the first of the vocabulary) when
 * the line has none, as `tolk translate` does — and run through the encoder,
 * then decoded greedily from the decoder start token (the pad id, as Marian
 * models start) until </s> or 2 × the source length + 16 tokens. Every run
 * is a calibration sample of its graph, so each graph's ranges come from the
 * activations translation gives it.
 *
 * With decoder_model.onnx, it takes the first step and picks the tokens;
 * decoder_with_past_model.onnx takes the next ones, fed the previous step's
 * present.* as its past_key_values.* (or, without it, decoder_model.onnx
 * again on the whole prefix). A merged decoder (decoder_model_merged.onnx)
 * runs every step too, as translation would run it in the two graphs'
 * place: the first with use_cache_branch false and empty past_key_values.*
 * (as [1, heads, 0, head_dim]), the next ones with use_cache_branch true,
 * the last token and the cache the other graphs made, so each of its If
 * branches is calibrated on the runs that take it; its outputs are not
 * used, its branches computing what the two graphs compute. Without
 * decoder_model.onnx (a folder of the encoder and the merged decoder, as
 * users keep an Optimum export) the merged decoder takes every step itself
 * the same way, fed its own present.* as past and picking the tokens from
 * its own logits — the same computations, so the same ranges.
 *
 * Refused: a file with no sentence, and one whose tokens are mostly <unk>
 * (more than half: not text of the model's source language). The random-ids
 * rule of tolk_calibration_finish applies to the token ids too.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib.h"

#define MAX_STEPS_EXTRA 16

struct run_io {
  const char *names[64];
  const tolk_tensor *in[64];
  size_t n;
};

static tolk_status fail(tolk_error *err, tolk_status st, const char *msg, const char *what) {
  snprintf(err->message, sizeof err->message, "%.800s: %s", what, msg);
  err->status = st;
  return st;
}

static tolk_tensor *ids_tensor(const int64_t *ids, int64_t n, tolk_error *err) {
  int64_t dims[2] = {1, n};
  tolk_tensor *t = NULL;
  tolk_tensor_create(TOLK_INT64, 2, dims, ids, (size_t)n * sizeof *ids, &t, err);
  return t;
}

/* The decoder's key/value cache between steps: each present.X output of
 * the last run that made it, to feed as past_key_values.X. */
struct cache {
  const char *key[64]; /* X, borrowed from the calibrations' output names */
  tolk_tensor *t[64];
  size_t n;
};

static void cache_free(struct cache *c) {
  for (size_t i = 0; i < c->n; i++) tolk_tensor_free(c->t[i]);
  c->n = 0;
}

/* Takes the run's outputs out[k], named names[k]: the logits (the first)
 * into *logits, each present.X into the cache in place of the one before. */
static void cache_take(struct cache *c, size_t n, const char *const *names, tolk_tensor **out,
                       tolk_tensor **logits) {
  for (size_t k = 0; k < n; k++) {
    const char *name = names[k];
    if (k == 0) {
      tolk_tensor_free(*logits);
      *logits = out[k];
      continue;
    }
    size_t i = 0;
    while (i < c->n && strcmp(c->key[i], name + 8)) i++;
    if (strncmp(name, "present.", 8) || (i == c->n && c->n == 64)) {
      tolk_tensor_free(out[k]);
      continue;
    }
    if (i == c->n) c->key[c->n++] = name + 8;
    else tolk_tensor_free(c->t[i]);
    c->t[i] = out[k];
  }
}

/* The outputs a run that leads the decoding returns into *names (64 at
 * most): all, but at the merged decoder's later steps not present.*.encoder.*.
 * The cross-attention cache comes from the encoder output alone, made once
 * by the first step; the cache branch returns empty placeholders in its
 * place ([0, heads, 1, head_dim]: Optimum fills the outputs a branch lacks),
 * so the first step's are kept, as translation keeps them (src/mt/decoder.c). */
static size_t wanted_outputs(const tolk_calibration *cal, bool later_merged, const char **names) {
  size_t n = 0;
  for (size_t k = 0; k < tolk_calibration_output_count(cal) && n < 64; k++) {
    const char *name = tolk_calibration_output(cal, k)->name;
    if (!later_merged || strncmp(name, "present.", 8) || !strstr(name, ".encoder.")) names[n++] = name;
  }
  return n;
}

/* The tensor the decoder input `name` is fed; NULL when unknown. */
static const tolk_tensor *decoder_feed(const char *name, const tolk_tensor *ids, const tolk_tensor *mask,
                                       const tolk_tensor *enc, const struct cache *c) {
  if (!strcmp(name, "input_ids")) return ids;
  if (!strcmp(name, "encoder_attention_mask")) return mask;
  if (!strcmp(name, "encoder_hidden_states")) return enc;
  for (size_t i = 0; !strncmp(name, "past_key_values.", 16) && i < c->n; i++)
    if (!strcmp(c->key[i], name + 16)) return c->t[i];
  return NULL;
}

/* The argmax of the last position of logits [1, T, V]. */
static int64_t last_argmax(const tolk_tensor *logits) {
  const int64_t *d = tolk_tensor_dims(logits);
  int64_t v = d[tolk_tensor_rank(logits) - 1], off = tolk_tensor_numel(logits) - v, best = 0;
  const float *x = (const float *)tolk_tensor_data(logits) + off;
  for (int64_t i = 1; i < v; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

struct decode {
  struct text_cal *tc;
  const tolk_tensor *mask, *enc;
  int64_t start, eos, max_steps;
};

/* One decoder run of `cal` on `ids` with the cache; its outputs go into the
 * cache and *logits. */
static tolk_status step(const struct decode *d, tolk_calibration *cal, const tolk_tensor *ids, struct cache *c,
                        tolk_tensor **logits, tolk_error *err) {
  struct run_io io = {{0}, {0}, 0};
  tolk_tensor *out[64] = {0};
  const char *names[64];
  if (tolk_calibration_output_count(cal) > 64)
    return fail(err, TOLK_ERR_UNSUPPORTED, "more than 64 outputs", "the decoder");
  size_t n_out = wanted_outputs(cal, false, names);
  for (size_t i = 0; i < tolk_calibration_input_count(cal) && i < 64; i++) {
    const char *name = tolk_calibration_input(cal, i)->name;
    io.names[io.n] = name;
    if (!(io.in[io.n++] = decoder_feed(name, ids, d->mask, d->enc, c)))
      return fail(err, TOLK_ERR_UNSUPPORTED, "a decoder input calibration by sentences cannot feed", name);
  }
  tolk_status st = tolk_calibration_add_run(cal, io.n, io.names, io.in, n_out, names, out, err);
  if (!st) cache_take(c, n_out, names, out, logits);
  return st;
}

/* Empty past_key_values.* of the merged decoder for the first step:
 * [rows, heads, 0, head_dim] from its declaration. */
static tolk_status empty_past(const tolk_calibration *cal, const char *name, int64_t rows, tolk_tensor **out,
                              tolk_error *err) {
  for (size_t i = 0; i < tolk_calibration_input_count(cal); i++) {
    const tolk_value_info *v = tolk_calibration_input(cal, i);
    if (strcmp(v->name, name)) continue;
    if (v->rank != 4 || v->dims[1] < 1 || v->dims[3] < 1) break;
    int64_t dims[4] = {rows, v->dims[1], 0, v->dims[3]};
    return tolk_tensor_create(TOLK_FLOAT, 4, dims, NULL, 0, out, err);
  }
  return fail(err, TOLK_ERR_UNSUPPORTED, "the merged decoder's past inputs must be [batch, heads, past, head_dim]",
              name);
}

/* One run of the merged decoder on the step that `last` (one token) and the
 * cache `c` (empty at the first step) make. With `logits` it leads the
 * decoding: its outputs go into the cache and *logits, as step's do;
 * without, the cache is the other graphs' and the run only a sample. */
static tolk_status merged_step(const struct decode *d, const tolk_tensor *last, struct cache *c,
                               tolk_tensor **logits, tolk_error *err) {
  tolk_calibration *cal = d->tc->merged;
  struct run_io io = {{0}, {0}, 0};
  tolk_tensor *own[64] = {0}, *out[64] = {0}, *branch = NULL;
  uint8_t flag = c->n > 0;
  int64_t one = 1;
  const char *names[64] = {0};
  size_t n_own = 0, n_out = 0;
  if (tolk_calibration_output_count(cal) > 64)
    return fail(err, TOLK_ERR_UNSUPPORTED, "more than 64 outputs", "the merged decoder");
  tolk_status st = tolk_tensor_create(TOLK_BOOL, 1, &one, &flag, 1, &branch, err);
  for (size_t i = 0; !st && i < tolk_calibration_input_count(cal); i++) {
    const char *name = tolk_calibration_input(cal, i)->name;
    if (io.n == 64 || n_own == 64) {
      st = fail(err, TOLK_ERR_UNSUPPORTED, "more than 64 inputs", "the merged decoder");
      break;
    }
    io.names[io.n] = name;
    io.in[io.n] = !strcmp(name, "use_cache_branch") ? branch : decoder_feed(name, last, d->mask, d->enc, c);
    if (!io.in[io.n] && !c->n && !strncmp(name, "past_key_values.", 16) &&
        !(st = empty_past(cal, name, tolk_tensor_dims(last)[0], &own[n_own], err)))
      io.in[io.n] = own[n_own++];
    if (!st && !io.in[io.n++])
      st = fail(err, TOLK_ERR_UNSUPPORTED, "a merged decoder input calibration by sentences cannot feed", name);
  }
  if (logits) n_out = wanted_outputs(cal, c->n > 0, names);
  if (!st) st = tolk_calibration_add_run(cal, io.n, io.names, io.in, n_out, names, out, err);
  /* The run has read the cache: now its outputs may replace it. */
  if (!st && logits) cache_take(c, n_out, names, out, logits);
  for (size_t i = 0; i < n_own; i++) tolk_tensor_free(own[i]);
  tolk_tensor_free(branch);
  return st;
}

/* One decoding step, run by every graph that translation could run it
 * with, on `last` (the last token; `prefix`, every token so far, for
 * decoder_model after the first step when there is no past graph) and the
 * cache. The separate graph of the step (decoder_model first, then
 * decoder_with_past_model, else decoder_model again) leads when there is
 * one; without it the merged decoder leads, fed its own presents as
 * translation feeds them. The merged decoder runs first, so that it reads
 * the cache before the leading graph's outputs replace it. */
static tolk_status decode_step(const struct decode *d, bool first, const tolk_tensor *last,
                               const tolk_tensor *prefix, struct cache *c, tolk_tensor **logits,
                               tolk_error *err) {
  const struct text_cal *tc = d->tc;
  tolk_calibration *sep = first ? tc->dec : tc->past ? tc->past : tc->dec;
  tolk_status st = TOLK_OK;
  if (tc->merged) st = merged_step(d, last, c, sep ? NULL : logits, err);
  if (!st && sep) st = step(d, sep, first || tc->past ? last : prefix, c, logits, err);
  return st;
}

/* Greedy decoding of one sentence, every run a calibration sample. */
static tolk_status decode(const struct decode *d, tolk_error *err) {
  const struct text_cal *tc = d->tc;
  struct cache c = {{0}, {0}, 0};
  tolk_tensor *logits = NULL, *last = NULL, *prefix = NULL;
  int64_t *seq = malloc((size_t)(d->max_steps + 1) * sizeof *seq), n = 1;
  tolk_status st = seq ? TOLK_OK : fail(err, TOLK_ERR_NO_MEMORY, "out of memory", "decoding");
  if (!st) seq[0] = d->start;
  if (!st && !(last = ids_tensor(seq, 1, err))) st = err->status;
  if (!st) st = decode_step(d, true, last, NULL, &c, &logits, err);
  while (!st && n < d->max_steps && (seq[n] = last_argmax(logits)) != d->eos) {
    n++;
    tolk_tensor_free(last);
    tolk_tensor_free(prefix);
    prefix = NULL;
    if (!(last = ids_tensor(&seq[n - 1], 1, err))) st = err->status;
    /* Without the past graph, decoder_model decodes the whole prefix. */
    else if (tc->dec && !tc->past && !(prefix = ids_tensor(seq, n, err))) st = err->status;
    if (!st) st = decode_step(d, false, last, prefix, &c, &logits, err);
  }
  cache_free(&c);
  tolk_tensor_free(logits);
  tolk_tensor_free(last);
  tolk_tensor_free(prefix);
  free(seq);
  return st;
}

void cli_text_cal_free(struct text_cal *tc) {
  tolk_calibration_free(tc->enc);
  tolk_calibration_free(tc->dec);
  tolk_calibration_free(tc->past);
  tolk_calibration_free(tc->merged);
  memset(tc, 0, sizeof *tc);
}

void cli_lines_free(struct cli_lines *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

tolk_status cli_read_lines(const char *file, struct cli_lines *l, tolk_error *err) {
  FILE *f = fopen(file, "r");
  if (!f) return fail(err, TOLK_ERR_IO, "cannot open the sentences", file);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  tolk_status st = TOLK_OK;
  while (!st && (len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (strspn(line, " \t") == (size_t)len) continue;
    if (l->n == l->cap) {
      size_t c = l->cap ? 2 * l->cap : 64;
      char **v = realloc(l->v, c * sizeof *v);
      if (!v) st = fail(err, TOLK_ERR_NO_MEMORY, "out of memory", file);
      else l->v = v, l->cap = c;
    }
    if (!st && !(l->v[l->n] = strdup(line))) st = fail(err, TOLK_ERR_NO_MEMORY, "out of memory", file);
    l->n += !st;
  }
  free(line);
  fclose(f);
  if (!st && !l->n)
    st = fail(err, TOLK_ERR_INVALID_ARGUMENT, "no sentences (empty or blank): nothing to calibrate on", file);
  return st;
}

const char *cli_default_tag(const tolk_tokenizer *tok) {
  size_t n = 0;
  const char *const *tags = tolk_tokenizer_language_tags(tok, &n);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(tags[i], ">>cmn_Hans<<")) return tags[i];
  return n ? tags[0] : NULL;
}

/* Encodes, encodes through the encoder and decodes one sentence. */
static tolk_status one_sentence(struct text_cal *tc, const tolk_tokenizer *tok, const char *tag, const char *text,
                                tolk_error *err) {
  char *tagged = NULL;
  bool has_tag = tag || !strncmp(text, ">>", 2);
  if (tag && strncmp(text, ">>", 2)) {
    size_t n = strlen(tag) + strlen(text) + 2;
    if (!(tagged = malloc(n))) return fail(err, TOLK_ERR_NO_MEMORY, "out of memory", "a sentence");
    snprintf(tagged, n, "%s %s", tag, text);
  }
  const char *texts[] = {tagged ? tagged : text};
  tolk_ids ids = {0};
  tolk_status st = tolk_tokenizer_encode_batch(tok, texts, NULL, 1, 0, &ids, err);
  free(tagged);
  if (st) return st;
  tolk_special_ids sp = tolk_tokenizer_special_ids(tok);
  int32_t space = tolk_tokenizer_piece_to_id(tok, "\xe2\x96\x81"); /* "▁": a word boundary, no text */
  int64_t *v = malloc((ids.n + 1) * sizeof *v), *ones = malloc((ids.n + 1) * sizeof *ones);
  for (size_t i = 0; v && ones && i < ids.n; i++) {
    v[i] = ids.ids[i];
    ones[i] = 1;
    /* Text tokens only: not the tag, </s> or a bare word boundary. */
    bool counted = !(i == 0 && has_tag) && ids.ids[i] != sp.eos && ids.ids[i] != space;
    tc->unknown += counted && ids.ids[i] == sp.unk;
    tc->tokens += counted;
  }
  tolk_tensor *in_ids = v && ones ? ids_tensor(v, (int64_t)ids.n, err) : NULL;
  tolk_tensor *mask = v && ones ? ids_tensor(ones, (int64_t)ids.n, err) : NULL, *enc = NULL;
  if (!in_ids || !mask) st = err->status ? err->status : fail(err, TOLK_ERR_NO_MEMORY, "out of memory", "a sentence");
  struct run_io io = {{0}, {0}, 0};
  for (size_t i = 0; !st && i < tolk_calibration_input_count(tc->enc) && i < 64; i++) {
    const char *name = tolk_calibration_input(tc->enc, i)->name;
    io.names[io.n] = name;
    io.in[io.n] = !strcmp(name, "input_ids") ? in_ids : !strcmp(name, "attention_mask") ? mask : NULL;
    if (!io.in[io.n++]) st = fail(err, TOLK_ERR_UNSUPPORTED, "an encoder input calibration by sentences cannot feed", name);
  }
  if (!st) st = tolk_calibration_add_run(tc->enc, io.n, io.names, io.in, 1, NULL, &enc, err);
  struct decode d = {tc, mask, enc, sp.pad, sp.eos, 2 * (int64_t)ids.n + MAX_STEPS_EXTRA};
  if (!st) st = decode(&d, err);
  tolk_tensor_free(in_ids);
  tolk_tensor_free(mask);
  tolk_tensor_free(enc);
  free(v);
  free(ones);
  tolk_ids_free(&ids, 1);
  return st;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The folder's graphs that decode: decoder_model.onnx and
 * decoder_with_past_model.onnx and decoder_model_merged.onnx, each when
 * present; one of decoder_model and the merged decoder is needed to take
 * the first step. */
static tolk_status create_cals(const char *dir, tolk_calibration_params p, struct text_cal *tc, tolk_error *err) {
  char path[8400], merged[8400];
  snprintf(path, sizeof path, "%s/encoder_model.onnx", dir);
  tolk_status st = tolk_calibration_create(path, p, &tc->enc, err);
  snprintf(path, sizeof path, "%s/decoder_model.onnx", dir);
  snprintf(merged, sizeof merged, "%s/decoder_model_merged.onnx", dir);
  if (!st && !exists(path) && !exists(merged))
    return fail(err, TOLK_ERR_NOT_FOUND, "no decoder_model.onnx or decoder_model_merged.onnx to decode the sentences",
                dir);
  if (!st && exists(path)) st = tolk_calibration_create(path, p, &tc->dec, err);
  snprintf(path, sizeof path, "%s/decoder_with_past_model.onnx", dir);
  if (!st && exists(path)) st = tolk_calibration_create(path, p, &tc->past, err);
  if (!st && exists(merged)) st = tolk_calibration_create(merged, p, &tc->merged, err);
  return st;
}

tolk_status cli_calibrate_text(const char *dir, const char *file, tolk_calibration_params p, struct text_cal *tc,
                               tolk_error *err) {
  memset(tc, 0, sizeof *tc);
  struct cli_lines l = {NULL, 0, 0};
  tolk_tokenizer *tok = NULL;
  tolk_status st = cli_read_lines(file, &l, err);
  if (!st) st = tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, err);
  if (!st) st = create_cals(dir, p, tc, err);
  const char *tag = tok ? cli_default_tag(tok) : NULL;
  for (size_t i = 0; !st && i < l.n; i++) {
    st = one_sentence(tc, tok, tag, l.v[i], err);
    if (st) {
      char where[900];
      snprintf(where, sizeof where, "%.800s: sentence %zu", file, i + 1);
      char old[sizeof err->message];
      memcpy(old, err->message, sizeof old);
      /* The message keeps all the room `where` leaves it, not a fixed share. */
      int room = (int)(sizeof old - 3 - strlen(where));
      snprintf(err->message, sizeof err->message, "%s: %.*s", where, room, old);
    }
    tc->sentences += !st;
  }
  /* Text the tokenizer does not know is not text of the model's language. */
  if (!st && tc->unknown * 2 > tc->tokens)
    st = fail(err, TOLK_ERR_INVALID_ARGUMENT,
              "most tokens are unknown to the tokenizer: not text in the model's source language", file);
  tolk_calibration *cals[] = {tc->enc, tc->dec, tc->past, tc->merged};
  for (size_t i = 0; !st && i < 4; i++)
    if (cals[i] && (st = tolk_calibration_finish(cals[i], err))) {
      char old[sizeof err->message];
      memcpy(old, err->message, sizeof old);
      snprintf(err->message, sizeof err->message, "%.800s: %.*s", file, (int)(sizeof old - 810), old);
    }
  cli_lines_free(&l);
  tolk_tokenizer_free(tok);
  if (st) cli_text_cal_free(tc);
  return st;
}
