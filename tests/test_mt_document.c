/*
 * test_mt_document.c — long-text handling: the sentence splitter on the cases
 * that trip naive splitters (abbreviations, initials, decimals, URLs,
 * quotes, ellipses, CJK punctuation, line breaks), and
 * tolk_translator_translate_text on the fixture model: line structure kept,
 * a leading tag applied to every sentence, an over-long sentence split
 * rather than truncated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt/mt.h"
#include "testutil.h"
#include "tolk.h"

static void expect_split(const char *text, const char *const *want, size_t n_want) {
  struct mt_spans sp = {0};
  CHECK(mt_split_sentences(text, strlen(text), &sp));
  bool ok = sp.n == n_want;
  for (size_t i = 0; ok && i < n_want; i++) {
    size_t len = sp.spans[i].end - sp.spans[i].begin;
    ok = strlen(want[i]) == len && memcmp(text + sp.spans[i].begin, want[i], len) == 0;
  }
  CHECK_MSG(ok, "split of '%s' gave %zu sentences", text, sp.n);
  if (!ok)
    for (size_t i = 0; i < sp.n; i++)
      fprintf(stderr, "    [%.*s]\n", (int)(sp.spans[i].end - sp.spans[i].begin), text + sp.spans[i].begin);
  free(sp.spans);
}

#define SPLIT(text, ...)                                  \
  do {                                                    \
    const char *const w[] = {__VA_ARGS__};                \
    expect_split(text, w, sizeof w / sizeof w[0]);        \
  } while (0)

static void splitter(void) {
  SPLIT("Mr. Smith went to Washington. He paid $3.50 for coffee... and left!",
        "Mr. Smith went to Washington.", "He paid $3.50 for coffee... and left!");
  SPLIT("J. R. R. Tolkien wrote it. It is long.", "J. R. R. Tolkien wrote it.", "It is long.");
  SPLIT("See http://example.com/a.b?x=1. Then go.", "See http://example.com/a.b?x=1.", "Then go.");
  SPLIT("He said \"Stop.\" Then he left.", "He said \"Stop.\"", "Then he left.");
  SPLIT("Use e.g. this one. Or i.e. that.", "Use e.g. this one.", "Or i.e. that.");
  SPLIT("Wait... What? Really?! Yes.", "Wait...", "What?", "Really?!", "Yes.");
  SPLIT("Version 2.0 is out. Get it at v2.0.1.", "Version 2.0 is out.", "Get it at v2.0.1.");
  SPLIT("\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE6\x88\x91\xE5\xBE\x88\xE5\xA5\xBD\xEF\xBC\x81",
        "\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82", "\xE6\x88\x91\xE5\xBE\x88\xE5\xA5\xBD\xEF\xBC\x81");
  SPLIT("First line\nsecond line.  Third sentence.\n\n  Last", "First line", "second line.",
        "Third sentence.", "Last");
  SPLIT("No terminator here", "No terminator here");
  SPLIT("The U.S. economy grew. Prices fell.", "The U.S. economy grew.", "Prices fell.");
  struct mt_spans sp = {0};
  CHECK(mt_split_sentences("", 0, &sp) && sp.n == 0);
  CHECK(mt_split_sentences(" \n \n", 4, &sp) && sp.n == 0);
  free(sp.spans);
}

static void translate_text(const char *fixtures) {
  char path[4096];
  snprintf(path, sizeof path, "%s/marian-tiny", fixtures);
  tolk_translator *tr = NULL;
  tolk_error err;
  tolk_translator_params tp = tolk_translator_default_params();
  tp.threads = 1;
  CHECK_MSG(tolk_translator_create(path, tp, &tr, &err) == TOLK_OK, "%s", err.message);
  if (!tr) return;
  tolk_generate_params gp = tolk_generate_default_params(tr);
  gp.num_beams = 1;
  gp.max_new_tokens = 8;
  const char *text = ">>yue_Hant<< Open the file. Close it.\n\nSave as";
  tolk_text_translation t;
  CHECK_MSG(tolk_translator_translate_text(tr, text, strlen(text), ">>cmn_Hans<<", &gp, &t, &err) == TOLK_OK,
            "%s", err.message);
  CHECK(t.n_sentences == 3);
  if (t.n_sentences == 3) {
    CHECK(t.sentences[0].line == 0 && t.sentences[1].line == 0 && t.sentences[2].line == 2);
    CHECK(strncmp(text + t.sentences[0].begin, "Open the file.", 14) == 0);
    size_t newlines = 0;
    for (const char *p = t.text; *p; p++) newlines += *p == '\n';
    CHECK(newlines == 2);
  }
  /* The leading tag replaces the default for every sentence: the same
   * sentence translated alone with that tag gives the same ids. */
  tolk_text_translation alone;
  CHECK(tolk_translator_translate_text(tr, "Close it.", 9, ">>yue_Hant<<", &gp, &alone, &err) == TOLK_OK);
  if (t.n_sentences == 3 && alone.n_sentences == 1) {
    CHECK(t.sentences[1].n_ids == alone.sentences[0].n_ids &&
          memcmp(t.sentences[1].ids, alone.sentences[0].ids, alone.sentences[0].n_ids * sizeof(int32_t)) == 0);
  }
  tolk_text_translation_free(&alone);
  tolk_text_translation_free(&t);
  /* A sentence of ~700 tokens (more than the 512 positions) is split at
   * word boundaries and every word is translated. */
  size_t words = 700, cap = words * 8 + 1, w = 0;
  char *longtext = malloc(cap);
  for (size_t i = 0; i < words; i++) w += (size_t)snprintf(longtext + w, cap - w, "%sfile", i ? " " : "");
  gp.max_new_tokens = 2;
  CHECK_MSG(tolk_translator_translate_text(tr, longtext, w, NULL, &gp, &t, &err) == TOLK_OK, "%s", err.message);
  CHECK(t.n_sentences >= 2);
  size_t covered = 0;
  for (size_t i = 0; i < t.n_sentences; i++) covered += t.sentences[i].end - t.sentences[i].begin;
  CHECK_MSG(covered + t.n_sentences - 1 == w, "pieces cover %zu of %zu bytes", covered, w);
  tolk_text_translation_free(&t);
  free(longtext);
  /* Empty and blank texts translate to empty text. */
  CHECK(tolk_translator_translate_text(tr, "", 0, NULL, &gp, &t, &err) == TOLK_OK && t.n_sentences == 0 &&
        t.text && t.text[0] == '\0');
  tolk_text_translation_free(&t);
  tolk_translator_free(tr);
}

int main(void) {
  splitter();
  translate_text(tu_fixtures());
  return tu_finish("test_mt_document");
}
