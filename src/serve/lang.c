/*
 * lang.c — language codes and script-based detection (lang.h).
 */
#include "lang.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum script { S_NONE, S_LATN, S_CYRL, S_GREK, S_ARAB, S_HEBR, S_DEVA, S_THAI, S_HANI, S_KANA, S_HANG, S_COUNT };

static const struct lang {
  const char *code, *name, *iso3;
  enum script script;
} langs[] = {
    {"en", "English", "eng", S_LATN},         {"zh-Hans", "Chinese", "zho", S_HANI},
    {"zh-Hant", "Chinese (traditional)", "", S_HANI}, {"yue", "Cantonese", "yue", S_HANI},
    {"ja", "Japanese", "jpn", S_KANA},        {"ko", "Korean", "kor", S_HANG},
    {"de", "German", "deu", S_LATN},          {"fr", "French", "fra", S_LATN},
    {"es", "Spanish", "spa", S_LATN},         {"it", "Italian", "ita", S_LATN},
    {"pt", "Portuguese", "por", S_LATN},      {"nl", "Dutch", "nld", S_LATN},
    {"sv", "Swedish", "swe", S_LATN},         {"da", "Danish", "dan", S_LATN},
    {"fi", "Finnish", "fin", S_LATN},         {"pl", "Polish", "pol", S_LATN},
    {"cs", "Czech", "ces", S_LATN},           {"ro", "Romanian", "ron", S_LATN},
    {"hu", "Hungarian", "hun", S_LATN},       {"tr", "Turkish", "tur", S_LATN},
    {"vi", "Vietnamese", "vie", S_LATN},      {"id", "Indonesian", "ind", S_LATN},
    {"ru", "Russian", "rus", S_CYRL},         {"uk", "Ukrainian", "ukr", S_CYRL},
    {"bg", "Bulgarian", "bul", S_CYRL},       {"el", "Greek", "ell", S_GREK},
    {"ar", "Arabic", "ara", S_ARAB},          {"fa", "Persian", "fas", S_ARAB},
    {"he", "Hebrew", "heb", S_HEBR},          {"hi", "Hindi", "hin", S_DEVA},
    {"th", "Thai", "tha", S_THAI},
};
#define N_LANGS (sizeof langs / sizeof langs[0])

/* Spellings that are not simply a code, its ISO 639-3 or code-REGION. */
static const struct {
  const char *alias, *code;
} aliases[] = {
    {"zh", "zh-Hans"},      {"zh-cn", "zh-Hans"},   {"zh-sg", "zh-Hans"},   {"cmn", "zh-Hans"},
    {"cmn_hans", "zh-Hans"}, {"zho_hans", "zh-Hans"}, {"chi", "zh-Hans"},  {"zh_cn", "zh-Hans"},
    {"zt", "zh-Hant"},      {"zh-tw", "zh-Hant"},   {"zh-hk", "zh-Hant"},   {"zh-mo", "zh-Hant"},
    {"cmn_hant", "zh-Hant"}, {"zho_hant", "zh-Hant"}, {"zh_tw", "zh-Hant"},
    {"yue_hant", "yue"},    {"zh-yue", "yue"},      {"yue-hant", "yue"},
};

static const struct lang *by_code(const char *code) {
  for (size_t i = 0; i < N_LANGS; i++)
    if (!strcasecmp(langs[i].code, code)) return &langs[i];
  return NULL;
}

const char *lang_from_iso3(const char *iso3) {
  if (!iso3 || !*iso3) return NULL;
  for (size_t i = 0; i < N_LANGS; i++)
    if (!strcasecmp(langs[i].iso3, iso3)) return langs[i].code;
  return NULL;
}

void lang_normalize(const char *in, char *out, size_t cap) {
  char s[48];
  size_t n = strlen(in);
  /* A Marian tag stands for its language: >>cmn_Hans<< is cmn_hans. */
  if (n > 4 && !strncmp(in, ">>", 2) && !strcmp(in + n - 2, "<<")) in += 2, n -= 4;
  if (n >= sizeof s) n = sizeof s - 1;
  for (size_t i = 0; i < n; i++) s[i] = (char)tolower((unsigned char)in[i]);
  s[n] = '\0';
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcmp(s, aliases[i].alias)) {
      snprintf(out, cap, "%s", aliases[i].code);
      return;
    }
  const struct lang *l = by_code(s);
  const char *c = l ? l->code : lang_from_iso3(s);
  if (!c) {
    /* xx-REGION or xx_Script: the language. */
    size_t k = strcspn(s, "-_");
    if (k < n) {
      char base[16];
      snprintf(base, sizeof base, "%.*s", (int)k, s);
      l = by_code(base);
      c = l ? l->code : lang_from_iso3(base);
    }
  }
  snprintf(out, cap, "%s", c ? c : s);
}

const char *lang_name(const char *code) {
  const struct lang *l = by_code(code);
  return l ? l->name : code;
}

void lang_deepl(const char *code, bool base, char *out, size_t cap) {
  size_t k = base ? strcspn(code, "-") : strlen(code);
  if (k >= cap) k = cap - 1;
  for (size_t i = 0; i < k; i++) out[i] = (char)toupper((unsigned char)code[i]);
  out[k] = '\0';
}

/* ------------------------------------------------------------------ targets */

static const struct {
  const char *code;
  const char *tags[3];
} tag_prefs[] = {
    {"zh-Hans", {">>cmn_Hans<<", ">>zho_Hans<<", ">>cmn<<"}},
    {"zh-Hant", {">>cmn_Hant<<", ">>zho_Hant<<", NULL}},
    {"yue", {">>yue_Hant<<", ">>yue<<", ">>yue_Hans<<"}},
};

static bool has_code(const struct lang_target *t, size_t n, const char *code) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(t[i].code, code)) return true;
  return false;
}

size_t lang_targets(const char *target_iso3, const char *const *tags, size_t n_tags,
                    struct lang_target *out, size_t cap) {
  size_t n = 0;
  /* The preferred tag of each known variant first, so zh-Hans means
   * >>cmn_Hans<< even when >>cmn<< comes earlier in the vocabulary. */
  for (size_t p = 0; p < sizeof tag_prefs / sizeof tag_prefs[0] && n < cap; p++)
    for (size_t k = 0; k < 3 && tag_prefs[p].tags[k] && !has_code(out, n, tag_prefs[p].code); k++)
      for (size_t i = 0; i < n_tags; i++)
        if (!strcmp(tags[i], tag_prefs[p].tags[k])) {
          snprintf(out[n].code, sizeof out[n].code, "%s", tag_prefs[p].code);
          snprintf(out[n].tag, sizeof out[n].tag, "%s", tags[i]);
          n++;
          break;
        }
  /* Any other tag whose language is known (>>fra<<, >>deu_Latn<<). */
  for (size_t i = 0; i < n_tags && n < cap; i++) {
    char code[LANG_CODE_MAX];
    lang_normalize(tags[i], code, sizeof code);
    if (!by_code(code) || has_code(out, n, code) || strlen(tags[i]) >= sizeof out[n].tag) continue;
    snprintf(out[n].code, sizeof out[n].code, "%s", code);
    snprintf(out[n].tag, sizeof out[n].tag, "%s", tags[i]);
    n++;
  }
  if (n == 0 && cap && n_tags == 0) {
    const char *c = lang_from_iso3(target_iso3);
    char norm[LANG_CODE_MAX];
    if (!c && target_iso3) {
      lang_normalize(target_iso3, norm, sizeof norm);
      c = by_code(norm) ? norm : NULL;
    }
    if (c) {
      snprintf(out[0].code, sizeof out[0].code, "%s", c);
      out[0].tag[0] = '\0';
      n = 1;
    }
  }
  return n;
}

/* ------------------------------------------------------------------ detection */

static enum script script_of(unsigned cp) {
  if ((cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || (cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7))
    return S_LATN;
  if (cp >= 0x370 && cp <= 0x3FF) return S_GREK;
  if (cp >= 0x400 && cp <= 0x52F) return S_CYRL;
  if (cp >= 0x590 && cp <= 0x5FF) return S_HEBR;
  if (cp >= 0x600 && cp <= 0x6FF) return S_ARAB;
  if (cp >= 0x900 && cp <= 0x97F) return S_DEVA;
  if (cp >= 0xE00 && cp <= 0xE7F) return S_THAI;
  if ((cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x31F0 && cp <= 0x31FF)) return S_KANA;
  if ((cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0x3130 && cp <= 0x318F))
    return S_HANG;
  if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
      (cp >= 0x20000 && cp <= 0x2FFFF))
    return S_HANI;
  return S_NONE;
}

/* Decodes one code point of valid UTF-8 (the caller validated it). */
static unsigned next_cp(const unsigned char *s, size_t left, size_t *used) {
  unsigned c = s[0];
  size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (l > left) l = left;
  unsigned cp = l == 1 ? c : c & (0x7F >> l);
  for (size_t i = 1; i < l; i++) cp = (cp << 6) | (s[i] & 0x3F);
  *used = l;
  return cp;
}

void lang_detect(const char *text, size_t len, const char *const *cand, size_t n,
                 struct detection *out) {
  size_t count[S_COUNT] = {0}, letters = 0;
  for (size_t i = 0; i < len;) {
    size_t used;
    enum script s = script_of(next_cp((const unsigned char *)text + i, len - i, &used));
    i += used;
    if (s != S_NONE) count[s]++, letters++;
  }
  for (size_t i = 0; i < n; i++) {
    const struct lang *l = by_code(cand[i]);
    double hits = 0;
    if (l && l->script == S_KANA) hits = count[S_KANA] ? (double)(count[S_KANA] + count[S_HANI]) : 0;
    else if (l && l->script == S_HANI) hits = (double)count[S_HANI] * (count[S_KANA] ? 0.5 : 1);
    else if (l) hits = (double)count[l->script];
    snprintf(out[i].code, sizeof out[i].code, "%s", cand[i]);
    out[i].confidence = letters ? (double)(int)(1000.0 * hits / (double)letters) / 10.0 : 0;
  }
  /* A stable insertion sort: n is the handful of loaded source languages. */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && out[j].confidence > out[j - 1].confidence; j--) {
      struct detection t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
}
