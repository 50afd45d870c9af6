/*
 * consumer.c — a program built against an installed libtolk, as a user's
 * would be (tests/install/check.sh builds it with pkg-config and with
 * find_package): translates one sentence and prints it.
 *   consumer MODEL_DIR TEXT
 * Uses only tolk.h, and follows its freeing rule: the caller's array holds
 * the results, tolk_strings_free frees what they point to.
 */
#include <stdio.h>
#include <string.h>
#include <tolk.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer MODEL_DIR TEXT\n");
    return 2;
  }
  tolk_error err;
  tolk_translator *tr = NULL;
  if (tolk_translator_create(argv[1], tolk_translator_default_params(), &tr, &err)) {
    fprintf(stderr, "consumer: %s\n", err.message);
    return 1;
  }
  /* The target tag `tolk translate` picks by default, when the model has tags. */
  size_t n_tags = 0;
  tolk_tokenizer_language_tags(tolk_translator_tokenizer(tr), &n_tags);
  const char *tag = n_tags ? ">>cmn_Hans<<" : NULL;
  const char *texts[1] = {argv[2]};
  char *out[1];
  int rc = 0;
  if (tolk_translator_translate(tr, texts, 1, tag, NULL, out, &err)) {
    fprintf(stderr, "consumer: %s\n", err.message);
    rc = 1;
  } else {
    printf("%s\n", out[0]);
    tolk_strings_free(out, 1);
  }
  tolk_translator_free(tr);
  return rc;
}
