/*
 * test_free_rule.c — tolk.h's one freeing rule, call by call: results go
 * into the caller's memory (here arrays on the stack, which the library must
 * never free), the library allocates only what they point to, and the
 * matching tolk_*_free frees that and resets the entries. Under ASan (make
 * sanitize, leaks detected) a free of the caller's array, a double free or a
 * leak fails the run; here the resets and the results are checked.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tolk.h"

static void check_tokenizer(const tolk_tokenizer *tok) {
  const char *texts[2] = {"Zip archive", "Open the file."};
  tolk_ids ids[2];
  tolk_error err;
  CHECK(tolk_tokenizer_encode_batch(tok, texts, NULL, 2, 0, ids, &err) == TOLK_OK);
  char *text[2] = {NULL, NULL};
  CHECK(tolk_tokenizer_decode_batch(tok, ids, 2, TOLK_DECODE_SKIP_SPECIAL | TOLK_DECODE_SOURCE, text, &err) == TOLK_OK);
  CHECK(text[0] && !strcmp(text[0], "Zip archive"));
  CHECK(text[1] && !strcmp(text[1], "Open the file."));
  tolk_strings_free(text, 2);
  CHECK(text[0] == NULL && text[1] == NULL);
  tolk_ids_free(ids, 2);
  CHECK(ids[0].ids == NULL && ids[0].n == 0 && ids[1].ids == NULL);

  tolk_tokens tokens;
  CHECK(tolk_tokenizer_tokenize(tok, ">>cmn_Hans<< a", 14, 0, &tokens, &err) == TOLK_OK);
  CHECK(tokens.n == 2 && !strcmp(tokens.tokens[0], ">>cmn_Hans<<") && !strcmp(tokens.tokens[1], "▁a"));
  tolk_tokens_free(&tokens);
  CHECK(tokens.tokens == NULL && tokens.n == 0);
  tolk_tokens_free(NULL); /* NULL is a no-op, as for handles */
  tolk_strings_free(NULL, 3);
  tolk_ids_free(NULL, 3);
}

static void check_translator(const tolk_translator *tr) {
  const char *texts[2] = {"Zip archive", "Open the file."};
  char *out[2] = {NULL, NULL};
  tolk_error err;
  CHECK(tolk_translator_translate(tr, texts, 2, ">>cmn_Hans<<", NULL, out, &err) == TOLK_OK);
  CHECK(out[0] && out[0][0] && out[1] && out[1][0]);
  tolk_strings_free(out, 2);
  CHECK(out[0] == NULL && out[1] == NULL);

  tolk_ids src[1];
  CHECK(tolk_tokenizer_encode_batch(tolk_translator_tokenizer(tr), texts, NULL, 1, 0, src, &err) == TOLK_OK);
  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = 2;
  p.num_return_sequences = 2;
  tolk_generation gen[2];
  CHECK(tolk_translator_generate(tr, src, 1, &p, gen, &err) == TOLK_OK);
  CHECK(gen[0].n > 1 && gen[1].n > 1 && gen[0].token_scores);
  tolk_generation_free(gen, 2);
  CHECK(gen[0].ids == NULL && gen[0].token_scores == NULL && gen[1].n == 0);
  tolk_ids_free(src, 1);

  tolk_text_translation t;
  CHECK(tolk_translator_translate_text(tr, "Open the file. Zip archive.", 27, ">>cmn_Hans<<", NULL, &t, &err) == TOLK_OK);
  CHECK(t.n_sentences == 2 && t.text && t.sentences[1].translation);
  tolk_text_translation_free(&t);
  CHECK(t.text == NULL && t.sentences == NULL && t.n_sentences == 0);

  /* On failure nothing needs freeing: the entries are left empty. */
  char *bad[1] = {NULL};
  const char *none[1] = {NULL};
  CHECK(tolk_translator_translate(tr, none, 1, NULL, NULL, bad, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK(bad[0] == NULL && !strcmp(err.message, "translate: text 0 is null"));
}

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian-tiny", tu_fixtures());
  tolk_error err;
  tolk_translator *tr = NULL;
  CHECK_MSG(tolk_translator_create(dir, tolk_translator_default_params(), &tr, &err) == TOLK_OK, "%s",
            err.message);
  if (tr) {
    check_tokenizer(tolk_translator_tokenizer(tr));
    check_translator(tr);
  }
  tolk_translator_free(tr);
  return tu_finish("test_free_rule");
}
