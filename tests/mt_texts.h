/*
 * mt_texts.h — the texts the translator's batching tests translate (short
 * and long together, so that batches pad), and their one test of sameness:
 * ids, score and per-token scores bit for bit.
 */
#ifndef TOLK_TESTS_MT_TEXTS_H
#define TOLK_TESTS_MT_TEXTS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tolk.h"

static const char *const mt_texts[] = {
    "Open file",
    "The file could not be saved because the disk is full.",
    "Cancel",
    "Are you sure you want to delete these 3 items permanently?",
    "Connection timed out.",
    "Show hidden files and folders in the list",
    "Print",
    "Unable to read the configuration file; the default settings will be used instead.",
    "Copy",
};
enum { MT_N_TEXTS = sizeof mt_texts / sizeof *mt_texts };

/* The texts tagged for Chinese (>>cmn_Hans<<) and encoded into src[0..MT_N_TEXTS). */
static inline tolk_status mt_texts_encode(const tolk_tokenizer *t, tolk_ids *src, tolk_error *err) {
  const char *tagged[MT_N_TEXTS];
  char buf[MT_N_TEXTS][256];
  for (size_t i = 0; i < MT_N_TEXTS; i++) {
    snprintf(buf[i], sizeof buf[i], ">>cmn_Hans<< %s", mt_texts[i]);
    tagged[i] = buf[i];
  }
  return tolk_tokenizer_encode_batch(t, tagged, NULL, MT_N_TEXTS, 0, src, err);
}

static inline bool same_generation(const tolk_generation *a, const tolk_generation *b) {
  return a->n == b->n && !memcmp(a->ids, b->ids, a->n * sizeof *a->ids) &&
         !memcmp(&a->score, &b->score, sizeof a->score) &&
         (a->n < 2 || !memcmp(a->token_scores, b->token_scores, (a->n - 1) * sizeof(float)));
}

#endif /* TOLK_TESTS_MT_TEXTS_H */
