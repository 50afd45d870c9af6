/*
 * fuzz_spm_model.c — libFuzzer target: arbitrary bytes as a SentencePiece
 * model. When they load, the model encodes and decodes a fixed mixed-script
 * text, so the tables a hostile file builds are exercised too.
 */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct spm_model *m = NULL;
  tolk_error err;
  if (spm_model_load(data, size, &m, &err) != TOLK_OK) return 0;
  static const char text[] = "  Hello,\tworld! \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 e\xCC\x81 \xFF\xFE x";
  struct spm_encoding enc = {0};
  if (spm_encode(m, text, sizeof text - 1, &enc, &err) == TOLK_OK) {
    const char *pieces[64];
    size_t lens[64], n = enc.n_pieces < 64 ? enc.n_pieces : 64;
    for (size_t i = 0; i < n; i++) pieces[i] = spm_encoding_piece(m, &enc, i, &lens[i]);
    struct spm_buf out = {0};
    spm_decode_pieces(m, pieces, lens, n, &out, &err);
    spm_buf_free(&out);
  }
  spm_encoding_free(&enc);
  spm_model_free(m);
  return 0;
}
