/*
 * chrf.c — corpus chrF as sacrebleu 2.x computes it by default (chrf.h):
 * a segment's text is decoded to code points with Python's whitespace
 * removed, each order's n-grams of hypothesis and reference are counted
 * (sorted, then merged: matches are the smaller count of each n-gram; none
 * of the hypothesis's when the reference has none of that order), the
 * counts summed over the corpus, and the score is the F-beta of precision
 * and recall averaged over the orders where both sides have n-grams.
 * Invalid UTF-8 bytes count as one character each.
 */
#include "chrf.h"

#include <stdlib.h>
#include <string.h>

struct seg {
  uint32_t *cp; /* code points, whitespace removed */
  int64_t n;
};

/* Python's str.isspace for the code points str.split() splits on. */
static bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static int64_t utf8_next(const unsigned char *s, uint32_t *out) {
  int len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
  uint32_t c = len == 1 ? s[0] : len == 2 ? s[0] & 0x1f : len == 3 ? s[0] & 0x0f : s[0] & 0x07;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) len = 0;
    else c = (c << 6) | (s[i] & 0x3f);
  }
  *out = len ? c : 0xfffd00u + s[0]; /* a stray byte: a character of its own */
  return len ? len : 1;
}

static bool decode(const char *text, struct seg *s) {
  size_t n = strlen(text);
  s->cp = malloc((n + 1) * sizeof *s->cp);
  s->n = 0;
  if (!s->cp) return false;
  for (const unsigned char *p = (const unsigned char *)text; *p;) {
    uint32_t c;
    p += utf8_next(p, &c);
    if (!is_space(c)) s->cp[s->n++] = c;
  }
  return true;
}

/* The n-gram order qsort compares by (set before each sort). */
static const uint32_t *g_text;
static int g_n;

static int cmp_gram(const void *a, const void *b) {
  const uint32_t *x = g_text + *(const int64_t *)a, *y = g_text + *(const int64_t *)b;
  for (int i = 0; i < g_n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

static int cmp_cross(const uint32_t *x, const uint32_t *y, int n) {
  for (int i = 0; i < n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* The n-grams of s, as sorted start offsets; *count of them. */
static int64_t *sorted_grams(const struct seg *s, int n, int64_t *count) {
  *count = s->n >= n ? s->n - n + 1 : 0;
  int64_t *at = malloc((size_t)(*count + 1) * sizeof *at);
  if (!at) return NULL;
  for (int64_t i = 0; i < *count; i++) at[i] = i;
  g_text = s->cp;
  g_n = n;
  qsort(at, (size_t)*count, sizeof *at, cmp_gram);
  return at;
}

/* Matches of order n: for each n-gram, the smaller of its two counts. */
static bool order_stats(const struct seg *h, const struct seg *r, int n, int64_t *nh, int64_t *nr, int64_t *m) {
  int64_t *a = sorted_grams(h, n, nh), *b = a ? sorted_grams(r, n, nr) : NULL;
  if (!a || !b) {
    free(a);
    return false;
  }
  int64_t i = 0, j = 0;
  *m = 0;
  while (i < *nh && j < *nr) {
    int c = cmp_cross(h->cp + a[i], r->cp + b[j], n);
    if (c < 0) i++;
    else if (c > 0) j++;
    else i++, j++, ++*m;
  }
  free(a);
  free(b);
  /* sacrebleu counts no hypothesis n-grams of an order the reference lacks. */
  if (!*nr) *nh = 0;
  return true;
}

bool chrf_add(struct chrf *c, const char *hyp, const char *ref) {
  struct seg h, r;
  bool ok = decode(hyp, &h) & decode(ref, &r);
  int64_t nh[CHRF_ORDER], nr[CHRF_ORDER], m[CHRF_ORDER];
  for (int k = 0; ok && k < CHRF_ORDER; k++) ok = order_stats(&h, &r, k + 1, &nh[k], &nr[k], &m[k]);
  for (int k = 0; ok && k < CHRF_ORDER; k++) c->hyp[k] += nh[k], c->ref[k] += nr[k], c->match[k] += m[k];
  free(h.cp);
  free(r.cp);
  return ok;
}

double chrf_score(const struct chrf *c) {
  const double beta2 = 4.0;
  double prec = 0, rec = 0;
  int effective = 0;
  for (int k = 0; k < CHRF_ORDER; k++) {
    if (c->hyp[k] <= 0 || c->ref[k] <= 0) continue;
    prec += (double)c->match[k] / (double)c->hyp[k];
    rec += (double)c->match[k] / (double)c->ref[k];
    effective++;
  }
  if (!effective) return 0.0;
  prec /= effective;
  rec /= effective;
  return prec + rec > 0 ? 100.0 * (1 + beta2) * prec * rec / (beta2 * prec + rec) : 0.0;
}
