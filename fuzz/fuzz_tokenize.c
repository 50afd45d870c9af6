/*
 * fuzz_tokenize.c — libFuzzer target: arbitrary bytes as text for the Marian
 * fixture tokenizer (tests/fixtures/marian-tiny, or $TOLK_FUZZ_MODEL), encoded
 * on both sides; the input read as little-endian int32s is decoded as ids.
 */
#include <stdlib.h>
#include <string.h>

#include "tolk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tolk_tokenizer *tok;

static tolk_tokenizer *load(void) {
  const char *dir = getenv("TOLK_FUZZ_MODEL");
  tolk_error err;
  if (!dir) dir = TOLK_SOURCE_DIR "/tests/fixtures/marian-tiny";
  if (tolk_tokenizer_create(dir, tolk_tokenizer_default_params(), &tok, &err) != TOLK_OK) abort();
  return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tok) load();
  const char *text = (const char *)data;
  tolk_ids ids[2];
  tolk_error err;
  for (int side = 0; side < 2; side++) {
    if (tolk_tokenizer_encode_batch(tok, &text, &size, 1, side ? TOLK_TOKENIZE_TARGET : 0, &ids[side], &err) == TOLK_OK)
      tolk_ids_free(&ids[side], 1);
  }
  size_t n = size / 4;
  int32_t *v = malloc((n ? n : 1) * sizeof *v);
  if (n) memcpy(v, data, n * 4);
  tolk_ids in = {v, n, 0};
  char *out;
  for (int flags = 0; flags < 2; flags++)
    if (tolk_tokenizer_decode_batch(tok, &in, 1, flags ? TOLK_DECODE_SKIP_SPECIAL : 0, &out, &err) == TOLK_OK)
      tolk_strings_free(&out, 1);
  free(v);
  return 0;
}
