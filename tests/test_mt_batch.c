/*
 * test_mt_batch.c — a sentence generates the same alone and in any batch:
 * the same ids and bit for bit the same scores, for greedy and beam search,
 * through the fp32 and the int8 graphs of the marian-tiny fixture. A batch
 * pads every sentence to the longest (encoder, cross-attention) and shares
 * every GEMM between its rows, so this holds only because the kernels are
 * batch-invariant (src/kern/kern.h) and int8 activations are quantized per
 * row. The service builds on it: a request's translation does not depend on
 * what else is being translated.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tolk.h"

#include "mt_texts.h"

static void check_model(const char *dir, bool int8, int beams) {
  tolk_translator_params tp = tolk_translator_default_params();
  tp.int8 = int8;
  tp.threads = 2;
  tolk_translator *tr = NULL;
  tolk_error err;
  if (tolk_translator_create(dir, tp, &tr, &err) != TOLK_OK) {
    CHECK_MSG(false, "%s: %s", dir, err.message);
    return;
  }
  tolk_ids src[MT_N_TEXTS];
  CHECK(mt_texts_encode(tolk_translator_tokenizer(tr), src, &err) == TOLK_OK);
  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = beams;
  p.num_return_sequences = 1;
  p.max_new_tokens = 24;
  p.batch_tokens = 0; /* all in one batch */
  tolk_generation batch[MT_N_TEXTS], alone[MT_N_TEXTS];
  CHECK(tolk_translator_generate(tr, src, MT_N_TEXTS, &p, batch, &err) == TOLK_OK);
  int differ = 0;
  for (size_t i = 0; i < MT_N_TEXTS; i++) {
    CHECK(tolk_translator_generate(tr, &src[i], 1, &p, &alone[i], &err) == TOLK_OK);
    differ += !same_generation(&batch[i], &alone[i]);
  }
  CHECK_MSG(differ == 0, "%s %s beam %d: %d of %d sentences differ alone and in a batch", dir,
            int8 ? "int8" : "fp32", beams, differ, MT_N_TEXTS);
  /* Pairs: every sentence next to a shorter and a longer one. */
  for (size_t i = 0; i + 1 < MT_N_TEXTS; i++) {
    tolk_generation pair[2];
    CHECK(tolk_translator_generate(tr, &src[i], 2, &p, pair, &err) == TOLK_OK);
    CHECK_MSG(same_generation(&pair[0], &alone[i]) && same_generation(&pair[1], &alone[i + 1]),
              "%s beam %d: sentences %zu and %zu differ as a pair", int8 ? "int8" : "fp32", beams, i,
              i + 1);
    tolk_generation_free(pair, 2);
  }
  tolk_generation_free(batch, MT_N_TEXTS);
  tolk_generation_free(alone, MT_N_TEXTS);
  tolk_ids_free(src, MT_N_TEXTS);
  tolk_translator_free(tr);
}

int main(void) {
  const char *fix = getenv("TOLK_FIXTURES");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian-tiny", fix ? fix : "tests/fixtures");
  for (int int8 = 0; int8 < 2; int8++)
    for (int beams = 1; beams <= 4; beams += 3) check_model(dir, int8, beams);
  return tu_finish("test_mt_batch");
}
