/*
 * lang.h — language codes as the service's clients write them, and a small
 * language detector. The service's own codes are LibreTranslate's current
 * ones ("en", "zh-Hans", "zh-Hant"), so /languages reads as a LibreTranslate
 * server's would; lang_normalize maps the other spellings clients send onto
 * them: LibreTranslate's older "zh" and "zt", DeepL's "ZH", "ZH-HANS",
 * "EN-US", BCP 47 regions ("zh-TW"), ISO 639-3 ("eng") and Marian's target
 * tags (">>cmn_Hant<<").
 *
 * A model's target codes come from the language tags in its vocabulary
 * (opus-mt-en-zh: >>cmn_Hans<< is zh-Hans, >>cmn_Hant<< zh-Hant, >>yue_Hant<<
 * yue), or, for a model without tags, from its target_lang.
 *
 * Detection (source "auto", POST /detect) is by script only, among the
 * source languages loaded: each candidate's confidence is the share of the
 * text's letters written in its script (Latin, Han, kana, Hangul, Cyrillic,
 * …) — enough to route English and Chinese apart, and it says nothing
 * between two languages sharing a script (they tie; the first loaded wins).
 */
#ifndef TOLK_SERVE_LANG_H
#define TOLK_SERVE_LANG_H

#include <stdbool.h>
#include <stddef.h>

#define LANG_CODE_MAX 16
#define LANG_MAX_TARGETS 8

/* The service's code for any spelling a client may use, into out[cap];
 * unknown codes come back lower-cased as given (so an error can name them). */
void lang_normalize(const char *in, char *out, size_t cap);

/* The code for an ISO 639-3 code ("eng" → "en"), NULL when unknown. */
const char *lang_from_iso3(const char *iso3);

/* English name of a service code ("zh-Hant" → "Chinese (traditional)"); the
 * code itself when unknown. */
const char *lang_name(const char *code);

/* DeepL's spelling: "zh-Hans" → "ZH-HANS" (full) or "ZH" (base), "en" → "EN". */
void lang_deepl(const char *code, bool base, char *out, size_t cap);

struct lang_target {
  char code[LANG_CODE_MAX];
  char tag[40]; /* ">>cmn_Hans<<", or "" for a model without tags */
};

/* A model's targets from its tags (n_tags of them) or, with none, from
 * target_iso3. Returns how many were written to out[0..cap). */
size_t lang_targets(const char *target_iso3, const char *const *tags, size_t n_tags,
                    struct lang_target *out, size_t cap);

struct detection {
  char code[LANG_CODE_MAX];
  double confidence; /* 0..100 */
};

/* Ranks the candidate codes for text[0..len), best first, into out[0..n).
 * Ties keep the candidates' order. */
void lang_detect(const char *text, size_t len, const char *const *candidates, size_t n,
                 struct detection *out);

#endif /* TOLK_SERVE_LANG_H */
