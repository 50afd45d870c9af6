/*
 * test_mt_join.c — continuous batching (src/mt/batcher.c): sentences that
 * join a batch while it decodes, at different steps, with greedy and beam
 * search mixed, some dropped part way, finish with exactly — same ids, bit
 * for bit the same scores — what tolk_translator_generate gives each alone.
 * Through the marian-tiny fixture's fp32 and int8 graphs (separate decoders:
 * a ragged batch) and through a copy holding only the merged decoder (no
 * ragged cache: each admission decodes as a batch of its own).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

#include "mt/mt.h"
#include "testutil.h"
#include "tolk.h"

#include "mt_texts.h"

struct run {
  tolk_translator *tr;
  tolk_ids src[MT_N_TEXTS];
  tolk_generate_params p[MT_N_TEXTS];
  tolk_generation alone[MT_N_TEXTS];
  bool finished[MT_N_TEXTS], dropped[MT_N_TEXTS];
  int matched;
};

/* Collects finished sentences, checking each against its lone run. */
static void collect(struct run *r, struct mt_batcher *b, const char *what) {
  size_t n;
  struct mt_done *d = mt_batcher_finished(b, &n);
  for (size_t i = 0; i < n; i++) {
    size_t id = (size_t)d[i].id;
    tolk_generation g[4];
    tolk_error err;
    CHECK(mt_search_result(d[i].search, g, &err) == TOLK_OK);
    CHECK_MSG(!r->dropped[id] && !r->finished[id], "%s: sentence %zu reported twice or after its drop", what, id);
    CHECK_MSG(same_generation(&g[0], &r->alone[id]), "%s: sentence %zu (beam %d) differs from its lone run", what, id,
              r->p[id].num_beams);
    r->matched += same_generation(&g[0], &r->alone[id]);
    r->finished[id] = true;
    tolk_generation_free(g, (size_t)r->p[id].num_return_sequences);
  }
  mt_batcher_clear_finished(b);
}

static void add(struct run *r, struct mt_batcher *b, size_t first, size_t n) {
  const tolk_generate_params *pp[MT_N_TEXTS];
  uint64_t ids[MT_N_TEXTS];
  for (size_t i = 0; i < n; i++) pp[i] = &r->p[first + i], ids[i] = first + i;
  tolk_error err;
  CHECK_MSG(mt_batcher_add(b, &r->src[first], pp, ids, n, &err) == TOLK_OK, "%s", err.message);
}

static void check(const char *dir, bool int8, bool want_ragged, const char *what) {
  struct run r;
  memset(&r, 0, sizeof r);
  tolk_translator_params tp = tolk_translator_default_params();
  tp.int8 = int8;
  tp.threads = 2;
  tp.verify = 0;
  tolk_error err;
  if (tolk_translator_create(dir, tp, &r.tr, &err) != TOLK_OK) {
    CHECK_MSG(false, "%s: %s", dir, err.message);
    return;
  }
  for (size_t i = 0; i < MT_N_TEXTS; i++) {
    r.p[i] = tolk_generate_default_params(r.tr);
    r.p[i].num_beams = i % 3 == 1 ? 1 : (int)(2 + i % 3); /* greedy, beam 2, 3, 4 mixed */
    r.p[i].num_return_sequences = 1;
    r.p[i].max_new_tokens = 6 + (int)(i * 3);
    r.p[i].batch_tokens = 0;
  }
  CHECK(mt_texts_encode(tolk_translator_tokenizer(r.tr), r.src, &err) == TOLK_OK);
  for (size_t i = 0; i < MT_N_TEXTS; i++)
    CHECK_MSG(tolk_translator_generate(r.tr, &r.src[i], 1, &r.p[i], &r.alone[i], &err) == TOLK_OK, "%s",
              err.message);
  struct mt_batcher *b = NULL;
  CHECK(mt_batcher_new(r.tr, &b, &err) == TOLK_OK);
  CHECK_MSG(mt_batcher_ragged(b) == want_ragged, "%s: ragged %d, expected %d", what, mt_batcher_ragged(b),
            want_ragged);
  /* Arrivals at steps 0, 2, 3 and 5; sentence 6 dropped after joining. */
  size_t next = 0, step = 0;
  static const size_t arrive[][2] = {{0, 2}, {2, 1}, {3, 3}, {5, 3}}; /* all MT_N_TEXTS */
  for (size_t a = 0; a < 4 || mt_batcher_sentences(b); step++) {
    while (a < 4 && arrive[a][0] == step) {
      add(&r, b, next, arrive[a][1]);
      next += arrive[a][1];
      a++;
      collect(&r, b, what);
    }
    if (step == 6 && !r.finished[6]) {
      tolk_status st;
      CHECK(mt_batcher_drop(b, 6, &st, &err) && st == TOLK_OK);
      r.dropped[6] = true;
    }
    if (!mt_batcher_sentences(b)) continue;
    CHECK_MSG(mt_batcher_step(b, &err) == TOLK_OK, "%s: %s", what, err.message);
    collect(&r, b, what);
    if (step > 200) break;
  }
  CHECK_MSG(r.matched == MT_N_TEXTS - (r.dropped[6] ? 1 : 0), "%s: %d of %d sentences matched their lone runs", what,
            r.matched, MT_N_TEXTS);
  tolk_status st;
  CHECK(!mt_batcher_drop(b, 999, &st, &err));
  mt_batcher_free(b);
  tolk_generation_free(r.alone, MT_N_TEXTS);
  tolk_ids_free(r.src, MT_N_TEXTS);
  tolk_translator_free(r.tr);
}

/* A copy of the fixture with only the encoder and the merged decoder. */
static bool merged_only(const char *fix, char *dir, size_t size) {
  snprintf(dir, size, "/tmp/tolk-join-XXXXXX");
  if (!mkdtemp(dir)) return false;
  static const char *const files[] = {"encoder_model.onnx", "decoder_model_merged.onnx", "config.json",
                                      "generation_config.json", "source.spm", "target.spm", "vocab.json",
                                      "tokenizer_config.json"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char from[PATH_MAX + 64], to[128];
    snprintf(from, sizeof from, "%s/%s", fix, files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, files[i]);
    if (symlink(from, to) != 0) return false;
  }
  return true;
}

static void remove_dir(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
  const char *env = getenv("TOLK_FIXTURES");
  char rel[1100], fix[PATH_MAX], merged[64];
  snprintf(rel, sizeof rel, "%s/marian-tiny", env ? env : "tests/fixtures");
  if (!realpath(rel, fix)) { /* the merged-only copy links to it by absolute path */
    fprintf(stderr, "no fixture at %s\n", rel);
    return 1;
  }
  check(fix, false, true, "fp32");
  check(fix, true, true, "int8");
  CHECK(merged_only(fix, merged, sizeof merged));
  check(merged, false, false, "merged decoder");
  remove_dir(merged);
  return tu_finish("test_mt_join");
}
