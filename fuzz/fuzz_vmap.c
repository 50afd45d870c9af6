/*
 * fuzz_vmap.c — libFuzzer target: arbitrary bytes as a vocabulary shortlist
 * (CTranslate2's vmap format, src/mt/vmap.c) for the Marian fixture's
 * vocabulary (tests/fixtures/marian-tiny, or $TOLK_FUZZ_MODEL); when it
 * parses, the candidates of the input's bytes read as a source of ids.
 */
#include <stdlib.h>
#include <string.h>

#include "mt/mt.h"
#include "tolk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tolk_tokenizer *tok;

static void load(void) {
  const char *dir = getenv("TOLK_FUZZ_MODEL");
  tolk_error err;
  if (!dir) dir = TOLK_SOURCE_DIR "/tests/fixtures/marian-tiny";
  if (tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, &err) != TOLK_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tok) load();
  size_t vocab = tolk_tokenizer_vocab_size(tok);
  const int32_t always[] = {0, 1};
  struct mt_vmap *v = NULL;
  tolk_error err;
  if (mt_vmap_parse((const char *)data, size, "fuzz", tok, vocab, always, 2, &v, &err) != TOLK_OK) return 0;
  /* Each byte an id among the first 256, the vocabulary's most frequent. */
  int32_t src[64];
  int32_t len = (int32_t)(size < 64 ? size : 64);
  for (int32_t i = 0; i < len; i++) src[i] = data[i];
  int32_t *ids = NULL;
  size_t n = 0;
  if (mt_vmap_candidates(v, src, &len, 1, 64, &ids, &n, &err) == TOLK_OK) {
    for (size_t i = 1; i < n; i++)
      if (ids[i] <= ids[i - 1] || (size_t)ids[i] >= vocab) abort(); /* sorted, distinct, in range */
    free(ids);
  }
  mt_vmap_free(v);
  return 0;
}
