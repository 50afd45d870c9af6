/*
 * document.c — translating whole texts: lines and sentences are split out, each
 * sentence is tagged and tokenized (and split again at word boundaries if it
 * exceeds the model's positions), all are generated together in batches, and
 * the translations are joined back in order with the source's line breaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mt.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static bool add_piece(struct mt_doc *ps, struct mt_span span, size_t line, tolk_ids ids) {
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 16;
    struct mt_piece *p = realloc(ps->p, cap * sizeof *p);
    if (!p) return false;
    ps->p = p;
    ps->cap = cap;
  }
  ps->p[ps->n++] = (struct mt_piece){span, line, ids};
  return true;
}

static tolk_status encode_span(const tolk_translator *tr, const char *text, struct mt_span sp,
                               const char *tag, tolk_ids *ids, tolk_error *err) {
  size_t tl = tag ? strlen(tag) + 1 : 0, len = sp.end - sp.begin;
  char *s = malloc(tl + len + 1);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translate: out of memory");
  if (tl) {
    memcpy(s, tag, tl - 1);
    s[tl - 1] = ' ';
  }
  memcpy(s + tl, text + sp.begin, len);
  size_t n = tl + len;
  tolk_status st = tolk_tokenizer_encode_batch(tolk_translator_tokenizer(tr), (const char *const *)&s, &n, 1, 0, ids, err);
  free(s);
  return st;
}

/* Encodes a sentence, halving it at a space until every part fits in
 * `limit` ids. A part with no space left that still does not fit is an
 * error: it is never truncated. */
static tolk_status encode_fitting(const tolk_translator *tr, const char *text, struct mt_span sp,
                                  size_t line, const char *tag, size_t limit, struct mt_doc *out,
                                  int depth, tolk_error *err) {
  tolk_ids ids;
  tolk_status st = encode_span(tr, text, sp, tag, &ids, err);
  if (st) return st;
  if (ids.n <= limit) {
    if (!add_piece(out, sp, line, ids)) {
      tolk_ids_free(&ids, 1);
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translate: out of memory");
    }
    return TOLK_OK;
  }
  tolk_ids_free(&ids, 1);
  size_t mid = sp.begin + (sp.end - sp.begin) / 2, cut = 0;
  /* The space nearest the middle, prefering a clause mark just before it. */
  for (size_t d = 0; !cut && d < (sp.end - sp.begin) / 2; d++) {
    if (mid + d < sp.end && text[mid + d] == ' ') cut = mid + d;
    else if (mid > sp.begin + d && text[mid - d] == ' ') cut = mid - d;
  }
  if (!cut || depth > 40)
    return tolk_fail(err, TOLK_ERR_LIMIT,
                     "translate: a word of %zu bytes at byte %zu has more tokens than the model's %zu positions",
                     sp.end - sp.begin, sp.begin, limit);
  struct mt_span a = {sp.begin, cut}, b = {cut + 1, sp.end};
  st = encode_fitting(tr, text, a, line, tag, limit, out, depth + 1, err);
  if (!st) st = encode_fitting(tr, text, b, line, tag, limit, out, depth + 1, err);
  return st;
}

/* Whether two translations on one line need a space between them: only
 * when both sides are ASCII words (Chinese is written without). */
static bool needs_space(const char *prev, const char *next) {
  size_t pl = strlen(prev);
  if (!pl || !*next) return false;
  unsigned char a = (unsigned char)prev[pl - 1], b = (unsigned char)*next;
  return a < 0x80 && b < 0x80 && a != ' ' && b != ' ';
}

tolk_status mt_doc_join(const struct mt_doc *doc, const char *const *translations, char **out,
                        tolk_error *err) {
  size_t total = 1;
  for (size_t i = 0; i < doc->n; i++) total += strlen(translations[i]) + 1;
  total += doc->n ? doc->p[doc->n - 1].line : 0;
  char *s = malloc(total);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translate: out of memory");
  size_t w = 0, line = 0;
  for (size_t i = 0; i < doc->n; i++) {
    if (doc->p[i].line > line) {
      while (line < doc->p[i].line) s[w++] = '\n', line++;
    } else if (i > 0 && needs_space(translations[i - 1], translations[i])) {
      s[w++] = ' ';
    }
    size_t l = strlen(translations[i]);
    memcpy(s + w, translations[i], l);
    w += l;
  }
  s[w] = '\0';
  *out = s;
  return TOLK_OK;
}

/* Line number of each span: the count of line breaks before it. */
static void number_lines(const char *text, const struct mt_spans *sp, size_t *lines) {
  size_t line = 0, at = 0;
  for (size_t i = 0; i < sp->n; i++) {
    for (; at < sp->spans[i].begin; at++) line += text[at] == '\n';
    lines[i] = line;
  }
}

/* The tag at the very start of the text, if any: its length. */
static size_t leading_tag(const char *text, size_t len) {
  if (len < 4 || text[0] != '>' || text[1] != '>') return 0;
  const char *close = memmem(text + 2, len - 2, "<<", 2);
  return close ? (size_t)(close - text) + 2 : 0;
}

static tolk_status translate_pieces(const tolk_translator *tr, const struct mt_doc *ps,
                                    const tolk_generate_params *p, tolk_text_translation *out, tolk_error *err) {
  tolk_generate_params gp = p ? *p : tolk_generate_default_params(tr);
  size_t R = gp.num_return_sequences > 0 ? (size_t)gp.num_return_sequences : 1;
  tolk_ids *src = malloc((ps->n ? ps->n : 1) * sizeof *src);
  size_t n_gen = ps->n * R;
  tolk_generation *gen = calloc(n_gen ? n_gen : 1, sizeof *gen);
  const char **texts = malloc((ps->n ? ps->n : 1) * sizeof *texts);
  out->sentences = calloc(ps->n ? ps->n : 1, sizeof *out->sentences);
  if (!src || !gen || !texts || !out->sentences) {
    free(src);
    free(gen);
    free(texts);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translate: out of memory");
  }
  for (size_t i = 0; i < ps->n; i++) src[i] = ps->p[i].ids;
  double t0 = now_ms();
  tolk_status st = ps->n ? tolk_translator_generate(tr, src, ps->n, &gp, gen, err) : TOLK_OK;
  double t1 = now_ms();
  out->generate_ms = t1 - t0;
  for (size_t i = 0; i < ps->n && !st; i++) {
    tolk_sentence *s = &out->sentences[i];
    tolk_generation *g = &gen[i * R];
    tolk_ids best = {g->ids, g->n, 0};
    st = tolk_tokenizer_decode_batch(tolk_translator_tokenizer(tr), &best, 1, TOLK_DECODE_SKIP_SPECIAL,
                                     &s->translation, err);
    if (st) break;
    s->begin = ps->p[i].span.begin;
    s->end = ps->p[i].span.end;
    s->line = ps->p[i].line;
    s->ids = g->ids;
    s->n_ids = g->n;
    s->score = g->score;
    g->ids = NULL;
    texts[i] = s->translation;
    out->n_sentences = i + 1;
  }
  out->decode_ms = now_ms() - t1;
  tolk_generation_free(gen, ps->n * R);
  free(gen);
  free(src);
  if (!st) st = mt_doc_join(ps, texts, &out->text, err);
  free(texts);
  return st;
}

tolk_status mt_doc_plan(const tolk_translator *tr, const char *text, size_t len, const char *tag,
                        struct mt_doc *doc, tolk_error *err) {
  memset(doc, 0, sizeof *doc);
  char own_tag[256];
  size_t tl = leading_tag(text, len);
  if (tl && tl < sizeof own_tag) {
    memcpy(own_tag, text, tl);
    own_tag[tl] = '\0';
    tag = own_tag;
  }
  struct mt_spans spans = {0};
  size_t *lines = NULL;
  tolk_status st = TOLK_OK;
  if (!mt_split_sentences(text, len, &spans) || !(lines = malloc((spans.n ? spans.n : 1) * sizeof *lines)))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "translate: out of memory");
  if (!st) number_lines(text, &spans, lines);
  /* The leading tag belongs to no sentence: drop it from the first. */
  if (!st && tl && tl < sizeof own_tag && spans.n) {
    struct mt_span *f = &spans.spans[0];
    f->begin += tl;
    while (f->begin < f->end && text[f->begin] == ' ') f->begin++;
  }
  size_t limit = (size_t)mt_max_positions(tr);
  for (size_t i = 0; i < spans.n && !st; i++)
    if (spans.spans[i].end > spans.spans[i].begin)
      st = encode_fitting(tr, text, spans.spans[i], lines[i], tag, limit, doc, 0, err);
  free(spans.spans);
  free(lines);
  if (st) mt_doc_release(doc);
  return st;
}

void mt_doc_release(struct mt_doc *doc) {
  for (size_t i = 0; i < doc->n; i++) tolk_ids_free(&doc->p[i].ids, 1);
  free(doc->p);
  memset(doc, 0, sizeof *doc);
}

tolk_status tolk_translator_translate_text(const tolk_translator *tr, const char *text, size_t len,
                                           const char *tag, const tolk_generate_params *params,
                                           tolk_text_translation *out, tolk_error *err) {
  memset(out, 0, sizeof *out);
  if (!tr || (!text && len)) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "translate: null argument");
  double t0 = now_ms();
  struct mt_doc doc;
  tolk_status st = mt_doc_plan(tr, text, len, tag, &doc, err);
  out->tokenize_ms = now_ms() - t0;
  if (!st) st = translate_pieces(tr, &doc, params, out, err);
  mt_doc_release(&doc);
  if (st) tolk_text_translation_free(out);
  return st;
}

void tolk_text_translation_free(tolk_text_translation *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n_sentences; i++) {
    free(t->sentences[i].translation);
    free(t->sentences[i].ids);
  }
  free(t->sentences);
  free(t->text);
  memset(t, 0, sizeof *t);
}
