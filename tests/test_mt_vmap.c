/*
 * test_mt_vmap.c — the vocabulary shortlist (--vmap): the parser of
 * CTranslate2's vmap format on a good file (n-grams, the always line, a
 * repeated n-gram, CRLF and blank lines), malformed lines (each error names
 * its line) and pieces the vocabulary lacks (counted); the candidates of a
 * batch; and end to end on the marian-tiny fixture, fp32 and int8 graphs,
 * with and without the int8 LM head: a shortlist of every token generates
 * the exact path's ids and bit-identical scores, and a short one generates
 * only its candidates — also when sentences join a running batch
 * (continuous batching), which widens its candidates as they come.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt/mt.h"
#include "testutil.h"
#include "tolk.h"

#include "mt_texts.h"

static const tolk_tokenizer *tok;
static size_t vocab;
static const int32_t specials[] = {0, 1};

/* Piece of id i, which the tests use as a token of a file. */
static const char *P(int32_t i) { return tolk_tokenizer_id_to_piece(tok, i); }

static struct mt_vmap *parse(const char *text, tolk_status want, const char *msg) {
  struct mt_vmap *v = NULL;
  tolk_error err = {0};
  tolk_status st = mt_vmap_parse(text, strlen(text), "x.vmap", tok, vocab, specials, 2, &v, &err);
  CHECK_MSG(st == want, "status %d, want %d (%s) for: %s", st, want, err.message, text);
  if (msg) CHECK_MSG(strstr(err.message, msg) != NULL, "message '%s' lacks '%s'", err.message, msg);
  return v;
}

/* The candidates of one source as a string "a,b,c" of ids. */
static void candidates(const struct mt_vmap *v, const int32_t *src, int32_t len, char *out, size_t cap) {
  int32_t *ids = NULL;
  size_t n = 0;
  tolk_error err;
  CHECK(mt_vmap_candidates(v, src, &len, 1, (size_t)len, &ids, &n, &err) == TOLK_OK);
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && at < cap; i++) at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? "," : "", ids[i]);
  free(ids);
}

static void test_good(void) {
  char text[1024];
  snprintf(text, sizeof text, "\t%s %s\n%s\t%s  %s\n%s %s\t%s\r\n\n%s\t%s\n%s\t%s\n", P(10), P(11), P(12), P(13),
           P(14), P(12), P(13), P(15), P(16), P(17), P(16), P(18));
  struct mt_vmap *v = parse(text, TOLK_OK, NULL);
  if (!v) return;
  struct mt_vmap_stats s = mt_vmap_stats(v);
  CHECK_MSG(s.lines == 6 && s.rules == 3 && s.duplicate_keys == 1 && s.always == 4 && !s.unknown_sources &&
                !s.unknown_targets,
            "lines %zu rules %zu dup %zu always %zu", s.lines, s.rules, s.duplicate_keys, s.always);
  char got[256];
  candidates(v, (int32_t[]){12, 13}, 2, got, sizeof got);
  CHECK_MSG(!strcmp(got, "0,1,10,11,13,14,15"), "12 13 -> %s", got);
  candidates(v, (int32_t[]){13, 12}, 2, got, sizeof got); /* the bigram is "12 13" only */
  CHECK_MSG(!strcmp(got, "0,1,10,11,13,14"), "13 12 -> %s", got);
  candidates(v, (int32_t[]){16}, 1, got, sizeof got); /* the last line of an n-gram wins */
  CHECK_MSG(!strcmp(got, "0,1,10,11,18"), "16 -> %s", got);
  candidates(v, (int32_t[]){99}, 1, got, sizeof got);
  CHECK_MSG(!strcmp(got, "0,1,10,11"), "99 -> %s", got);
  mt_vmap_free(v);
}

static void test_malformed(void) {
  char text[512];
  snprintf(text, sizeof text, "%s\t%s\nno tab here\n", P(10), P(11));
  parse(text, TOLK_ERR_MALFORMED, "x.vmap:2: no tab");
  snprintf(text, sizeof text, "%s\t%s\t%s\n", P(10), P(11), P(12));
  parse(text, TOLK_ERR_MALFORMED, "x.vmap:1: more than one tab");
  snprintf(text, sizeof text, "\n%s  %s\t%s\n", P(10), P(11), P(12));
  parse(text, TOLK_ERR_MALFORMED, "x.vmap:2: an empty piece");
  snprintf(text, sizeof text, "%s \t%s\n", P(10), P(12));
  parse(text, TOLK_ERR_MALFORMED, "x.vmap:1: an empty piece");
  snprintf(text, sizeof text, " %s\t%s\n", P(10), P(12));
  parse(text, TOLK_ERR_MALFORMED, "x.vmap:1: an empty piece");
  const char nul[] = "a\tb\nc\0d\te\n";
  struct mt_vmap *v = NULL;
  tolk_error err = {0};
  CHECK(mt_vmap_parse(nul, sizeof nul - 1, "x.vmap", tok, vocab, specials, 2, &v, &err) == TOLK_ERR_MALFORMED);
  CHECK_MSG(strstr(err.message, "x.vmap:2: a NUL byte") != NULL, "%s", err.message);
  char big[64 * 4 + 200] = "";
  for (int i = 0; i < 65; i++) strcat(big, i ? " a" : "a");
  strcat(big, "\tb\n");
  parse(big, TOLK_ERR_LIMIT, "x.vmap:1: a source n-gram of more than 64");
}

static void test_unknown(void) {
  char text[512];
  snprintf(text, sizeof text, "zzznotapiecezzz\t%s\n%s\tqqqnotapieceqqq %s\n\tqqq2 %s\n", P(10), P(12), P(13),
           P(14));
  struct mt_vmap *v = parse(text, TOLK_OK, NULL);
  if (!v) return;
  struct mt_vmap_stats s = mt_vmap_stats(v);
  CHECK_MSG(s.unknown_sources == 1 && s.unknown_targets == 2 && s.rules == 1 && s.always == 3,
            "unknown %zu/%zu rules %zu always %zu", s.unknown_sources, s.unknown_targets, s.rules, s.always);
  char got[256];
  candidates(v, (int32_t[]){12}, 1, got, sizeof got);
  CHECK_MSG(!strcmp(got, "0,1,13,14"), "12 -> %s", got);
  mt_vmap_free(v);
}

/* Writes `text` to a temporary file; its path into path. */
static void write_tmp(const char *text, char *path, size_t cap) {
  snprintf(path, cap, "/tmp/test_mt_vmap.XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
}

/* A shortlist of every writable piece: the always line. */
static char *full_vmap(void) {
  size_t cap = 1 << 20, at = 0;
  char *t = malloc(cap);
  t[at++] = '\t';
  for (size_t i = 0; i < vocab; i++) {
    const char *p = P((int32_t)i);
    if (!p || !*p || strpbrk(p, " \t\r\n") || at + strlen(p) + 3 > cap) continue;
    at += (size_t)snprintf(t + at, cap - at, "%s%s", at > 1 ? " " : "", p);
  }
  t[at++] = '\n';
  t[at] = '\0';
  return t;
}

static tolk_translator *open_tr(const char *dir, bool int8, bool head, const char *vmap) {
  tolk_translator_params tp = tolk_translator_default_params();
  tp.int8 = int8;
  tp.int8_lm_head = head;
  tp.threads = 2;
  tp.vmap = vmap;
  tolk_translator *tr = NULL;
  tolk_error err;
  CHECK_MSG(tolk_translator_create(dir, tp, &tr, &err) == TOLK_OK, "%s: %s", dir, err.message);
  return tr;
}

static void generate(tolk_translator *tr, int beams, tolk_generation *out) {
  tolk_ids src[MT_N_TEXTS];
  tolk_error err;
  CHECK(mt_texts_encode(tolk_translator_tokenizer(tr), src, &err) == TOLK_OK);
  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = beams;
  p.num_return_sequences = 1;
  p.max_new_tokens = 24;
  p.batch_tokens = 64; /* several batches, each with its own candidates */
  CHECK_MSG(tolk_translator_generate(tr, src, MT_N_TEXTS, &p, out, &err) == TOLK_OK, "%s", err.message);
  tolk_ids_free(src, MT_N_TEXTS);
}

/* With every token a candidate, the outputs are the exact path's. */
static void test_full(const char *dir, const char *full) {
  for (int int8 = 0; int8 < 2; int8++)
    for (int head = 0; head < 2; head++) {
      tolk_translator *exact = open_tr(dir, int8, head, NULL), *sl = open_tr(dir, int8, head, full);
      tolk_vmap_info vi;
      CHECK(!tolk_translator_vmap_info(exact, &vi) && tolk_translator_vmap_info(sl, &vi) == 1);
      for (int beams = 1; exact && sl && beams <= 4; beams += 3) {
        tolk_generation a[MT_N_TEXTS], b[MT_N_TEXTS];
        generate(exact, beams, a);
        generate(sl, beams, b);
        int differ = 0;
        for (size_t i = 0; i < MT_N_TEXTS; i++) differ += !same_generation(&a[i], &b[i]);
        CHECK_MSG(!differ, "int8 %d head %d beam %d: %d of %d differ with a full shortlist", int8, head, beams,
                  differ, MT_N_TEXTS);
        tolk_generation_free(a, MT_N_TEXTS);
        tolk_generation_free(b, MT_N_TEXTS);
      }
      tolk_translator_free(exact);
      tolk_translator_free(sl);
    }
}

/* With a short list, every generated token is a candidate. */
static void test_short(const char *dir) {
  char text[4096];
  size_t at = 0;
  bool allowed[8192] = {false};
  at += (size_t)snprintf(text, sizeof text, "\t");
  for (int32_t i = 20; i < 60; i++) {
    at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", i > 20 ? " " : "", P(i));
    allowed[i] = true;
  }
  text[at++] = '\n';
  text[at] = '\0';
  char path[64];
  write_tmp(text, path, sizeof path);
  for (int int8 = 0; int8 < 2; int8++) {
    tolk_translator *tr = open_tr(dir, int8, int8, path);
    if (!tr) continue;
    tolk_translator_info info = tolk_translator_describe(tr);
    tolk_special_ids sp = tolk_tokenizer_special_ids(tolk_translator_tokenizer(tr));
    allowed[sp.eos] = allowed[sp.unk] = allowed[sp.pad] = allowed[info.decoder_start] = true;
    for (int beams = 1; beams <= 4; beams += 3) {
      tolk_generation g[MT_N_TEXTS];
      generate(tr, beams, g);
      int outside = 0;
      size_t tokens = 0;
      for (size_t i = 0; i < MT_N_TEXTS; i++)
        for (size_t j = 1; j < g[i].n; j++, tokens++)
          outside += g[i].ids[j] < 0 || g[i].ids[j] >= 8192 || !allowed[g[i].ids[j]] || !isfinite(g[i].token_scores[j - 1]);
      CHECK_MSG(tokens > 0 && !outside, "int8 %d beam %d: %d of %zu tokens outside the shortlist", int8, beams,
                outside, tokens);
      tolk_generation_free(g, MT_N_TEXTS);
    }
    tolk_translator_free(tr);
  }
  unlink(path);
}

/* Sentences joining a running batch (mt_batcher, as tolk serve runs it)
 * each bring their candidates: every token any of them generates is among
 * the union of all of theirs, and the steps after each join run with the
 * wider set. A rule per source piece (piece i -> target 20 + i % 50)
 * gives each sentence a set of its own. */
static void test_join(const char *dir) {
  char *text = malloc(1 << 20), path[64];
  size_t at = (size_t)snprintf(text, 1 << 20, "\t%s %s\n", P(3), P(4));
  for (int32_t i = 5; i < (int32_t)vocab && at < (1 << 20) - 2048; i++) {
    const char *p = P(i);
    if (p && *p && !strpbrk(p, " \t\r\n"))
      at += (size_t)snprintf(text + at, (1 << 20) - at, "%s\t%s\n", p, P(20 + i % 50));
  }
  write_tmp(text, path, sizeof path);
  free(text);
  tolk_translator *tr = open_tr(dir, true, true, path);
  unlink(path);
  if (!tr) return;
  const tolk_tokenizer *t = tolk_translator_tokenizer(tr);
  tolk_ids src[MT_N_TEXTS];
  tolk_error err;
  CHECK(mt_texts_encode(t, src, &err) == TOLK_OK);
  const struct mt_vmap *v = mt_model_vmap(mt_translator_model(tr));
  bool in_union[8192] = {false};
  for (size_t i = 0; i < MT_N_TEXTS; i++) {
    int32_t *ids = NULL, len = (int32_t)src[i].n;
    size_t n = 0;
    CHECK(mt_vmap_candidates(v, src[i].ids, &len, 1, src[i].n, &ids, &n, &err) == TOLK_OK);
    for (size_t j = 0; j < n; j++) in_union[ids[j]] = true;
    free(ids);
  }
  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = 2;
  p.num_return_sequences = 1;
  p.max_new_tokens = 12;
  const tolk_generate_params *pp[1] = {&p};
  struct mt_batcher *b = NULL;
  CHECK(mt_batcher_new(tr, &b, &err) == TOLK_OK);
  size_t finished = 0, tokens = 0;
  int outside = 0;
  for (size_t step = 0, next = 0; b && (next < MT_N_TEXTS || mt_batcher_sentences(b)) && step < 200; step++) {
    if (next < MT_N_TEXTS) { /* one more sentence every step */
      uint64_t id = next;
      CHECK_MSG(mt_batcher_add(b, &src[next], pp, &id, 1, &err) == TOLK_OK, "%s", err.message);
      next++;
    }
    if (mt_batcher_sentences(b)) CHECK_MSG(mt_batcher_step(b, &err) == TOLK_OK, "step %zu: %s", step, err.message);
    size_t n;
    struct mt_done *d = mt_batcher_finished(b, &n);
    for (size_t i = 0; i < n; i++, finished++) {
      tolk_generation g;
      CHECK(mt_search_result(d[i].search, &g, &err) == TOLK_OK);
      for (size_t j = 1; j < g.n; j++, tokens++) outside += g.ids[j] < 0 || g.ids[j] >= 8192 || !in_union[g.ids[j]];
      tolk_generation_free(&g, 1);
    }
    mt_batcher_clear_finished(b);
  }
  CHECK_MSG(finished == MT_N_TEXTS && tokens > 0 && !outside, "%zu of %d finished, %d of %zu tokens outside",
            finished, MT_N_TEXTS, outside, tokens);
  mt_batcher_free(b);
  tolk_ids_free(src, MT_N_TEXTS);
  tolk_translator_free(tr);
}

/* A malformed file fails the translator, naming the file and line. */
static void test_bad_file(const char *dir) {
  char path[64];
  write_tmp("\tfine\nbroken line\n", path, sizeof path);
  tolk_translator_params tp = tolk_translator_default_params();
  tp.vmap = path;
  tolk_translator *tr = NULL;
  tolk_error err;
  CHECK(tolk_translator_create(dir, tp, &tr, &err) == TOLK_ERR_MALFORMED && !tr);
  char want[96];
  snprintf(want, sizeof want, "%s:2: no tab", path);
  CHECK_MSG(strstr(err.message, want) != NULL, "%s", err.message);
  unlink(path);
  tp.vmap = "/nonexistent/x.vmap";
  CHECK(tolk_translator_create(dir, tp, &tr, &err) != TOLK_OK && !tr);
  CHECK_MSG(strstr(err.message, "/nonexistent/x.vmap") != NULL, "%s", err.message);
}

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian-tiny", tu_fixtures());
  tolk_tokenizer *t = NULL;
  tolk_error err;
  if (tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &t, &err) != TOLK_OK) {
    CHECK_MSG(false, "%s", err.message);
    return tu_finish("test_mt_vmap");
  }
  tok = t;
  vocab = tolk_tokenizer_vocab_size(t);
  test_good();
  test_malformed();
  test_unknown();
  char *full = full_vmap(), path[64];
  write_tmp(full, path, sizeof path);
  free(full);
  test_full(dir, path);
  unlink(path);
  test_short(dir);
  test_join(dir);
  test_bad_file(dir);
  tolk_tokenizer_free(t);
  return tu_finish("test_mt_vmap");
}
