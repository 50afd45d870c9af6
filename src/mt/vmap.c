/*
 * vmap.c — a vocabulary shortlist (--vmap) in CTranslate2's vocabulary map
 * format (its vocabulary_map.cc; README "Vocabulary shortlist"): one rule a
 * line,
 *
 *     src_1 src_2 ... src_N <TAB> tgt_1 tgt_2 ... tgt_K
 *
 * a source n-gram (pieces joined by single spaces) and the target pieces it
 * makes candidates; a line with an empty n-gram lists targets that are
 * always candidates. A batch's candidates (mt_vmap_candidates) are those,
 * the special tokens, and the targets of every rule whose n-gram occurs in
 * one of its sources — CTranslate2's get_candidates, on ids.
 *
 * As CTranslate2: a repeated n-gram keeps its last line. Where it is
 * lenient, tolk is strict or says so: a line without a tab (CTranslate2
 * would read the whole line as one odd target token), more than one tab, an
 * empty piece inside an n-gram and a NUL byte are errors naming the line;
 * pieces not in the vocabulary are counted (mt_vmap_stats), not fatal — an
 * unknown source piece never matches, an unknown target is left out
 * (CTranslate2 makes it <unk>, which is always a candidate anyway).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

enum {
  VMAP_MAX_BYTES = 1 << 30,  /* 1 GiB: CTranslate2's vmaps are tens of MB */
  VMAP_MAX_NGRAM = 64,
  VMAP_MAX_PIECE = 1024       /* longer pieces are in no vocabulary */
};

struct vrule {
  uint32_t key, key_len; /* into keys */
  uint32_t val, val_len; /* into vals */
  uint32_t line;
};

struct mt_vmap {
  size_t vocab;
  int32_t *keys, *vals;
  size_t n_keys, n_vals, cap_keys, cap_vals;
  struct vrule *rules;
  size_t n_rules, cap_rules;
  uint32_t *first;       /* vocab + 1: rules whose n-gram starts with id i are
                            rules[first[i] .. first[i + 1]) once sorted */
  uint8_t *always;       /* vocab: 1 for an always-included id */
  struct mt_vmap_stats stats;
};

static bool push(int32_t **a, size_t *n, size_t *cap, int32_t v) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    int32_t *p = c > UINT32_MAX ? NULL : realloc(*a, c * sizeof *p);
    if (!p) return false;
    *a = p;
    *cap = c;
  }
  (*a)[(*n)++] = v;
  return true;
}

/* The id of piece p[0..len), or -1 when the vocabulary lacks it. */
static int32_t piece_id(const tolk_tokenizer *tok, const char *p, size_t len) {
  char buf[VMAP_MAX_PIECE + 1];
  if (len > VMAP_MAX_PIECE) return -1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  return tolk_tokenizer_piece_to_id(tok, buf);
}

/* The targets after the tab: pieces split at runs of spaces. */
static bool parse_targets(struct mt_vmap *v, const tolk_tokenizer *tok, const char *p, const char *end) {
  while (p < end) {
    while (p < end && *p == ' ') p++;
    const char *q = p;
    while (q < end && *q != ' ') q++;
    if (q == p) break;
    int32_t id = piece_id(tok, p, (size_t)(q - p));
    if (id < 0 || (size_t)id >= v->vocab) v->stats.unknown_targets++;
    else if (!push(&v->vals, &v->n_vals, &v->cap_vals, id)) return false;
    p = q;
  }
  return true;
}

static tolk_status parse_line(struct mt_vmap *v, const tolk_tokenizer *tok, const char *p, const char *end,
                              const char *name, uint32_t line, tolk_error *err) {
  if (end > p && end[-1] == '\r') end--;
  if (p == end) return TOLK_OK; /* a blank line */
  const char *tab = memchr(p, '\t', (size_t)(end - p));
  if (memchr(p, '\0', (size_t)(end - p)))
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%u: a NUL byte", name, line);
  if (!tab)
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%u: no tab between the source n-gram and its targets", name, line);
  if (memchr(tab + 1, '\t', (size_t)(end - tab - 1)))
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%u: more than one tab", name, line);
  struct vrule r = {(uint32_t)v->n_keys, 0, (uint32_t)v->n_vals, 0, line};
  bool known = true;
  for (const char *s = p; s < tab;) {
    const char *q = s;
    while (q < tab && *q != ' ') q++;
    if (q == s)
      return tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%u: an empty piece in the source n-gram (two spaces, or one at an end)",
                       name, line);
    if (++r.key_len > VMAP_MAX_NGRAM)
      return tolk_fail(err, TOLK_ERR_LIMIT, "%s:%u: a source n-gram of more than %d pieces", name, line, VMAP_MAX_NGRAM);
    int32_t id = piece_id(tok, s, (size_t)(q - s));
    if (id < 0 || (size_t)id >= v->vocab) known = false;
    if (!push(&v->keys, &v->n_keys, &v->cap_keys, id)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", name);
    s = q < tab ? q + 1 : q;
    if (q < tab && s == tab)
      return tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%u: an empty piece in the source n-gram (two spaces, or one at an end)",
                       name, line);
  }
  if (!parse_targets(v, tok, tab + 1, end)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", name);
  r.val_len = (uint32_t)(v->n_vals - r.val);
  if (r.key_len == 0) { /* always candidates */
    for (uint32_t i = 0; i < r.val_len; i++) v->always[v->vals[r.val + i]] = 1;
    v->n_vals = r.val;
    return TOLK_OK;
  }
  if (!known) { /* can never match */
    v->stats.unknown_sources++;
    v->n_keys = r.key;
    v->n_vals = r.val;
    return TOLK_OK;
  }
  if (v->n_rules == v->cap_rules) {
    size_t c = v->cap_rules ? 2 * v->cap_rules : 256;
    struct vrule *nr = realloc(v->rules, c * sizeof *nr);
    if (!nr) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", name);
    v->rules = nr;
    v->cap_rules = c;
  }
  v->rules[v->n_rules++] = r;
  return TOLK_OK;
}

static const struct mt_vmap *sort_ctx; /* qsort has no context argument */

/* By n-gram, then line: equal n-grams end up side by side, the last line last. */
static int rule_cmp(const void *a, const void *b) {
  const struct vrule *x = a, *y = b;
  const int32_t *kx = sort_ctx->keys + x->key, *ky = sort_ctx->keys + y->key;
  for (uint32_t i = 0; i < x->key_len && i < y->key_len; i++)
    if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
  if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
  return x->line < y->line ? -1 : x->line > y->line;
}

/* Sorts the rules, keeps the last line of each n-gram, and indexes them by
 * their first id. */
static tolk_status index_rules(struct mt_vmap *v, tolk_error *err) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  sort_ctx = v;
  if (v->n_rules) qsort(v->rules, v->n_rules, sizeof *v->rules, rule_cmp);
  pthread_mutex_unlock(&mu);
  size_t kept = 0;
  for (size_t i = 0; i < v->n_rules; i++) {
    const struct vrule *r = &v->rules[i], *next = i + 1 < v->n_rules ? r + 1 : NULL;
    if (next && next->key_len == r->key_len &&
        !memcmp(v->keys + r->key, v->keys + next->key, r->key_len * sizeof *v->keys)) {
      v->stats.duplicate_keys++;
      continue;
    }
    v->rules[kept++] = *r;
  }
  v->n_rules = kept;
  v->first = calloc(v->vocab + 1, sizeof *v->first);
  if (!v->first) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "vmap: out of memory");
  for (size_t i = 0; i < v->n_rules; i++) v->first[v->keys[v->rules[i].key] + 1]++;
  for (size_t i = 0; i < v->vocab; i++) v->first[i + 1] += v->first[i];
  return TOLK_OK;
}

tolk_status mt_vmap_parse(const char *text, size_t len, const char *name, const tolk_tokenizer *tok,
                          size_t vocab, const int32_t *always, size_t n_always, struct mt_vmap **out,
                          tolk_error *err) {
  *out = NULL;
  if (len > VMAP_MAX_BYTES) return tolk_fail(err, TOLK_ERR_LIMIT, "%s: larger than 1 GiB", name);
  struct mt_vmap *v = calloc(1, sizeof *v);
  if (!v || !(v->always = calloc(vocab ? vocab : 1, 1))) {
    free(v);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "vmap: out of memory");
  }
  v->vocab = vocab;
  for (size_t i = 0; i < n_always; i++)
    if (always[i] >= 0 && (size_t)always[i] < vocab) v->always[always[i]] = 1;
  tolk_status st = TOLK_OK;
  uint32_t line = 0;
  for (const char *p = text, *end = text + len; p < end && !st;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *eol = nl ? nl : end;
    st = parse_line(v, tok, p, eol, name, ++line, err);
    p = nl ? nl + 1 : end;
  }
  v->stats.lines = line;
  if (!st) st = index_rules(v, err);
  if (st) {
    mt_vmap_free(v);
    return st;
  }
  v->stats.rules = v->n_rules;
  for (size_t i = 0; i < vocab; i++) v->stats.always += v->always[i];
  *out = v;
  return TOLK_OK;
}

tolk_status mt_vmap_load(const char *path, const tolk_tokenizer *tok, size_t vocab, const int32_t *always,
                         size_t n_always, struct mt_vmap **out, tolk_error *err) {
  char *text;
  size_t len;
  tolk_status st = tolk_read_file(path, VMAP_MAX_BYTES, &text, &len, err);
  if (st) return st;
  st = mt_vmap_parse(text, len, path, tok, vocab, always, n_always, out, err);
  free(text);
  return st;
}

void mt_vmap_free(struct mt_vmap *v) {
  if (!v) return;
  free(v->keys);
  free(v->vals);
  free(v->rules);
  free(v->first);
  free(v->always);
  free(v);
}

struct mt_vmap_stats mt_vmap_stats(const struct mt_vmap *v) { return v->stats; }

/* Marks the targets of the rules whose n-gram starts at src[i]. */
static void match_at(const struct mt_vmap *v, const int32_t *src, size_t len, size_t i, uint8_t *mark) {
  if (src[i] < 0 || (size_t)src[i] >= v->vocab) return;
  for (uint32_t k = v->first[src[i]]; k < v->first[src[i] + 1]; k++) {
    const struct vrule *r = &v->rules[k];
    if (r->key_len > len - i || memcmp(v->keys + r->key, src + i, r->key_len * sizeof *src)) continue;
    for (uint32_t j = 0; j < r->val_len; j++) mark[v->vals[r->val + j]] = 1;
  }
}

tolk_status mt_vmap_candidates(const struct mt_vmap *v, const int32_t *ids, const int32_t *lens, size_t rows,
                               size_t stride, int32_t **out, size_t *n_out, tolk_error *err) {
  *out = NULL;
  *n_out = 0;
  uint8_t *mark = malloc(v->vocab ? v->vocab : 1);
  if (!mark) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "vmap: out of memory");
  memcpy(mark, v->always, v->vocab);
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < (size_t)lens[r]; i++) match_at(v, ids + r * stride, (size_t)lens[r], i, mark);
  size_t n = 0;
  for (size_t i = 0; i < v->vocab; i++) n += mark[i];
  int32_t *c = malloc((n ? n : 1) * sizeof *c);
  if (!c) {
    free(mark);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "vmap: out of memory");
  }
  n = 0;
  for (size_t i = 0; i < v->vocab; i++)
    if (mark[i]) c[n++] = (int32_t)i;
  free(mark);
  *out = c;
  *n_out = n;
  return TOLK_OK;
}
