/*
 * chrf.h — corpus chrF (chrf.c), as sacrebleu computes it by default
 * (chrF2: character n-grams of order 1 to 6 with whitespace removed, no
 * word n-grams, beta 2, statistics summed over the corpus, precision and
 * recall averaged over the orders both sides have), for `tolk quantize
 * --eval`'s comparison of quantized and fp32 translations.
 */
#ifndef TOLK_CLI_CHRF_H
#define TOLK_CLI_CHRF_H

#include <stdbool.h>
#include <stdint.h>

#define CHRF_ORDER 6

struct chrf {
  int64_t hyp[CHRF_ORDER], ref[CHRF_ORDER], match[CHRF_ORDER];
};

/* Adds one segment's statistics; false on out of memory (nothing added). */
bool chrf_add(struct chrf *c, const char *hyp, const char *ref);

/* The corpus score in [0, 100]. */
double chrf_score(const struct chrf *c);

#endif /* TOLK_CLI_CHRF_H */
