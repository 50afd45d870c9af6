/*
 * test_mt_generate.c — generation parity with transformers: every case of
 * tests/fixtures/golden/generate.json (greedy, beam 4 with length penalty 1.0
 * and 0.6, a padded batch, max_new_tokens limits, num_return_sequences 2, the
 * model's own defaults) is run through tolk_translator_generate on the
 * marian-tiny fixture; ids must be identical and scores within 1e-4 — also
 * with the graphs rewritten at creation (opt level ALL), and without
 * output_scores, where greedy cases skip the log-softmax (ids identical,
 * token scores 0) and beam cases still score.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "testutil.h"
#include "tolk.h"


static int num(const cJSON *obj, const char *key, int dflt) {
  const cJSON *v = cJSON_GetObjectItem(obj, key);
  return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

/* The golden row without the pad transformers appends after EOS. */
static size_t golden_len(const cJSON *seq, int32_t pad, int32_t eos) {
  size_t n = 0, i = 0;
  bool ended = false;
  for (const cJSON *e = seq->child; e; e = e->next, i++) {
    int v = (int)e->valuedouble;
    if (i > 0 && ended && v == pad) break;
    n = i + 1;
    if (i > 0 && v == eos) ended = true;
  }
  return n;
}

static void run_case(const tolk_translator *tr, const cJSON *c, bool want_scores, int *ok, int *total) {
  const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
  const cJSON *params = cJSON_GetObjectItem(c, "params");
  tolk_generate_params p = tolk_generate_default_params(tr);
  CHECK_MSG(p.output_scores == 1, "%s: output_scores defaults to %d", name, p.output_scores);
  p.output_scores = want_scores;
  p.num_beams = num(params, "num_beams", p.num_beams);
  p.max_new_tokens = num(params, "max_new_tokens", p.max_new_tokens);
  p.num_return_sequences = num(params, "num_return_sequences", p.num_return_sequences);
  const cJSON *lp = cJSON_GetObjectItem(params, "length_penalty");
  if (cJSON_IsNumber(lp)) p.length_penalty = (float)lp->valuedouble;
  const cJSON *inputs = cJSON_GetObjectItem(c, "input_ids"), *masks = cJSON_GetObjectItem(c, "attention_mask");
  size_t n = (size_t)cJSON_GetArraySize(inputs), R = (size_t)p.num_return_sequences;
  tolk_ids *src = calloc(n, sizeof *src);
  size_t i = 0;
  for (const cJSON *row = inputs->child, *m = masks->child; row; row = row->next, m = m->next, i++) {
    src[i].ids = malloc((size_t)cJSON_GetArraySize(row) * sizeof *src[i].ids);
    const cJSON *e = row->child, *mk = m->child;
    for (; e && (int)mk->valuedouble; e = e->next, mk = mk->next) src[i].ids[src[i].n++] = (int32_t)e->valuedouble;
  }
  tolk_generation *out = calloc(n * R, sizeof *out);
  tolk_error err;
  (*total)++;
  tolk_status st = tolk_translator_generate(tr, src, n, &p, out, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", name, err.message);
  bool same = st == TOLK_OK;
  const cJSON *seqs = cJSON_GetObjectItem(c, "sequences");
  const cJSON *scores = cJSON_GetObjectItem(c, "sequences_scores");
  const cJSON *tok_scores = cJSON_GetObjectItem(c, "token_scores");
  tolk_special_ids sp = tolk_tokenizer_special_ids(tolk_translator_tokenizer(tr));
  size_t k = 0;
  double max_err = 0;
  for (const cJSON *seq = seqs->child; same && seq; seq = seq->next, k++) {
    size_t gl = golden_len(seq, sp.pad, sp.eos);
    same = out[k].n == gl;
    size_t j = 0;
    for (const cJSON *e = seq->child; same && j < gl; e = e->next, j++) same = out[k].ids[j] == (int32_t)e->valuedouble;
    if (!same) {
      fprintf(stderr, "  %s row %zu: got", name, k);
      for (size_t q = 0; q < out[k].n; q++) fprintf(stderr, " %d", out[k].ids[q]);
      fprintf(stderr, "\n");
    }
    if (same && !want_scores && p.num_beams == 1) {
      /* Greedy without scores: every token score is the 0 that says so. */
      for (size_t q = 0; q + 1 < out[k].n; q++) same &= out[k].token_scores[q] == 0.0f;
      CHECK_MSG(same, "%s: greedy without output_scores, a token score is not 0", name);
      continue;
    }
    if (same && cJSON_IsArray(scores)) {
      double d = fabs(out[k].score - cJSON_GetArrayItem(scores, (int)k)->valuedouble);
      max_err = d > max_err ? d : max_err;
    }
    if (same && cJSON_IsArray(tok_scores)) {
      const cJSON *ts = cJSON_GetArrayItem(tok_scores, (int)k);
      size_t q = 0;
      for (const cJSON *e = ts->child; e && q + 1 < out[k].n; e = e->next, q++) {
        double d = fabs(out[k].token_scores[q] - e->valuedouble);
        max_err = d > max_err ? d : max_err;
      }
    }
  }
  CHECK_MSG(same, "%s: sequences differ", name);
  CHECK_MSG(max_err <= 1e-4, "%s: score error %g", name, max_err);
  if (same && max_err <= 1e-4) (*ok)++;
  printf("%-28s %s (max score error %.2g)\n", name, same ? "identical" : "DIFFERENT", max_err);
  tolk_generation_free(out, n * R);
  free(out);
  tolk_ids_free(src, n);
  free(src);
}

/* A folder holding the fixture with only the merged decoder (symlinks), so
 * the If-based graph drives generation. Returns false if it cannot be made. */
static bool merged_only(const char *fixture, char *dir, size_t size) {
  static const char *const files[] = {"config.json", "generation_config.json", "source.spm", "target.spm",
                                      "vocab.json", "tokenizer_config.json", "encoder_model.onnx",
                                      "decoder_model_merged.onnx"};
  snprintf(dir, size, "/tmp/tolk-merged-XXXXXX");
  if (!mkdtemp(dir)) return false;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char from[8192], to[8192];
    snprintf(from, sizeof from, "%s/%s", fixture, files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, files[i]);
    if (symlink(from, to) != 0) return false;
  }
  return true;
}

static void remove_merged(const char *dir) {
  static const char *const files[] = {"config.json", "generation_config.json", "source.spm", "target.spm",
                                      "vocab.json", "tokenizer_config.json", "encoder_model.onnx",
                                      "decoder_model_merged.onnx"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  rmdir(dir);
}

static void run_all(const cJSON *root, const char *dir, tolk_translator_params tp, bool scores, const char *what) {
  tolk_translator *tr = NULL;
  tolk_error err;
  CHECK_MSG(tolk_translator_create(dir, tp, &tr, &err) == TOLK_OK, "%s", err.message);
  int ok = 0, total = 0;
  if (tr) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) run_case(tr, c, scores, &ok, &total);
  }
  printf("generate (%s): %d / %d cases identical\n", what, ok, total);
  CHECK(total > 0);
  tolk_translator_free(tr);
}

int main(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/golden/generate.json", tu_fixtures());
  char *json = tu_slurp(path, NULL);
  CHECK_MSG(json != NULL, "cannot read %s", path);
  if (!json) return tu_finish("test_mt_generate");
  cJSON *root = cJSON_Parse(json);
  free(json);
  tolk_translator_params tp = tolk_translator_default_params();
  snprintf(path, sizeof path, "%s/marian-tiny", tu_fixtures());
  run_all(root, path, tp, true, "decoder + decoder_with_past");
  run_all(root, path, tp, false, "decoder + decoder_with_past, no scores");
  char dir[64];
  CHECK(merged_only(path, dir, sizeof dir));
  run_all(root, dir, tp, true, "merged decoder");
  /* The session option of tolk optimize (opt level ALL: fusions into
   * QuickGelu, FusedMatMul and MultiHeadAttention before compiling): the
   * same tokens and scores. */
  tp.opt_level = TOLK_OPT_ALL;
  run_all(root, path, tp, true, "decoder + decoder_with_past, opt level all");
  run_all(root, dir, tp, true, "merged decoder, opt level all");
  remove_merged(dir);
  cJSON_Delete(root);
  return tu_finish("test_mt_generate");
}
