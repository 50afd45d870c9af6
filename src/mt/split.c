/*
 * split.c — sentence splitting for long texts. A sentence ends at . ! ? …
 * (or their full-width forms), after any closing quotes and brackets, when
 * whitespace and then the start of a new sentence follow. Abbreviations
 * ("Dr.", "e.g.", "U.S."), initials ("J. Smith"), decimals and URLs (no
 * whitespace after the dot), and ellipses followed by lower case do not end a
 * sentence. Line breaks always do: paragraphs and lines are kept as they are.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

static const char *const abbreviations[] = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "inc", "ltd",
    "co", "corp", "no", "nos", "fig", "figs", "vol", "vols", "p", "pp", "ch", "sec", "art", "dept",
    "gen", "gov", "lt", "col", "capt", "sgt", "rev", "hon", "jan", "feb", "mar", "apr", "jun", "jul",
    "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun",
    "approx", "est", "min", "max", "u.s", "u.k", "a.m", "p.m", "ph.d", "al", "op", "ed", "eds"};

/* Bytes of the UTF-8 character at s, 1 for a stray byte. */
static size_t char_len(const char *s, size_t left) {
  unsigned char c = (unsigned char)*s;
  size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return n <= left ? n : 1;
}

static bool starts_with(const char *s, size_t left, const char *p) {
  size_t n = strlen(p);
  return left >= n && memcmp(s, p, n) == 0;
}

/* A sentence-ending mark at s: its length, or 0. */
static size_t terminator(const char *s, size_t left) {
  if (*s == '.' || *s == '!' || *s == '?') return 1;
  static const char *const wide[] = {"\xE2\x80\xA6", "\xE3\x80\x82", "\xEF\xBC\x81", "\xEF\xBC\x9F", "\xEF\xBC\x8E"};
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (starts_with(s, left, wide[i])) return strlen(wide[i]);
  return 0;
}

/* Closing quotes and brackets that stay with the sentence before them. */
static size_t closer(const char *s, size_t left) {
  if (*s == '"' || *s == '\'' || *s == ')' || *s == ']' || *s == '}') return 1;
  static const char *const wide[] = {"\xE2\x80\x9D", "\xE2\x80\x99", "\xC2\xBB", "\xE3\x80\x8D", "\xE3\x80\x8F", "\xEF\xBC\x89"};
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (starts_with(s, left, wide[i])) return strlen(wide[i]);
  return 0;
}

/* The word ending just before `dot` (letters and inner dots), lower-cased. */
static bool is_abbreviation(const char *text, size_t dot) {
  size_t b = dot;
  while (b > 0 && (isalpha((unsigned char)text[b - 1]) || (text[b - 1] == '.' && b > 1 && isalpha((unsigned char)text[b - 2]))))
    b--;
  size_t n = dot - b;
  if (n == 0 || n > 8) return false;
  /* A single capital letter is an initial ("J. Smith"). */
  if (n == 1 && isupper((unsigned char)text[b])) return true;
  char word[9];
  for (size_t i = 0; i < n; i++) word[i] = (char)tolower((unsigned char)text[b + i]);
  word[n] = '\0';
  for (size_t i = 0; i < sizeof abbreviations / sizeof abbreviations[0]; i++)
    if (strcmp(word, abbreviations[i]) == 0) return true;
  return false;
}

/* Does what follows the whitespace at s look like a new sentence? */
static bool starts_sentence(const char *s, size_t left) {
  if (left == 0) return true;
  unsigned char c = (unsigned char)*s;
  if (isupper(c) || isdigit(c) || c == '"' || c == '\'' || c == '(' || c == '[' || c == '-') return true;
  /* Non-ASCII starts (CJK, accented capitals, quotes) count as new. */
  return c >= 0x80;
}

static bool push(struct mt_spans *out, size_t begin, size_t end) {
  if (end <= begin) return true;
  if (out->n == out->cap) {
    size_t cap = out->cap ? 2 * out->cap : 16;
    struct mt_span *s = realloc(out->spans, cap * sizeof *s);
    if (!s) return false;
    out->spans = s;
    out->cap = cap;
  }
  out->spans[out->n++] = (struct mt_span){begin, end};
  return true;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* Splits one line [b, e). */
static bool split_line(const char *t, size_t b, size_t e, struct mt_spans *out) {
  while (b < e && is_space(t[b])) b++;
  size_t start = b;
  for (size_t i = b; i < e;) {
    size_t tl = terminator(t + i, e - i);
    if (!tl) {
      i += char_len(t + i, e - i);
      continue;
    }
    size_t j = i + tl;
    /* Runs of marks ("?!", "...") end together. */
    while (j < e && (tl = terminator(t + j, e - j))) j += tl;
    size_t cl;
    while (j < e && (cl = closer(t + j, e - j))) j += cl;
    bool ascii_dot_only = t[i] == '.' && j == i + 1;
    bool wide = (unsigned char)t[i] >= 0x80;
    size_t k = j;
    while (k < e && is_space(t[k])) k++;
    bool ends = false;
    if (wide) ends = true; /* 。！？ end a sentence without a following space */
    else if (k > j && starts_sentence(t + k, e - k)) ends = !(ascii_dot_only && is_abbreviation(t, i));
    else if (k == e) ends = true;
    if (ends) {
      size_t end = j;
      if (!push(out, start, end)) return false;
      start = k;
      i = k;
    } else {
      i = j;
    }
  }
  size_t end = e;
  while (end > start && is_space(t[end - 1])) end--;
  return push(out, start, end);
}

bool mt_split_sentences(const char *text, size_t len, struct mt_spans *out) {
  out->n = 0;
  size_t b = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || text[i] == '\n') {
      if (!split_line(text, b, i, out)) return false;
      b = i + 1;
    }
  }
  return true;
}
