/*
 * spm_encode.c — SentencePiece encoding of normalised text: unigram (Viterbi
 * over the piece lattice, as the reference's optimised encoder, including its
 * float/double arithmetic so that ties break the same way) and BPE (merges by
 * score, leftmost first). Runs of unknown characters merge into one piece;
 * with byte fallback an unknown character becomes its UTF-8 byte pieces.
 */
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

static const float kUnkPenalty = 10.0f;

static size_t one_char_len(const char *s) {
  return (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[((uint8_t)*s) >> 4];
}

static bool push_piece(struct spm_encoding *e, size_t begin, size_t len, int id, bool byte_piece) {
  if (e->n_pieces == e->cap_pieces) {
    size_t cap = e->cap_pieces ? 2 * e->cap_pieces : 32;
    struct spm_piece *p = realloc(e->pieces, cap * sizeof *p);
    if (!p) return false;
    e->pieces = p;
    e->cap_pieces = cap;
  }
  e->pieces[e->n_pieces++] = (struct spm_piece){begin, len, id, byte_piece};
  return true;
}

/* Adds one piece of the model's raw result, applying the reference's
 * post-processing: unknown runs merged, or split into bytes. */
static bool emit(const struct spm_model *m, struct spm_encoding *e, size_t begin, size_t len,
                 int id, bool *prev_unk) {
  bool unk = id == m->unk_id;
  bool ok = true;
  if (unk && m->byte_fallback) {
    for (size_t i = 0; i < len && ok; i++)
      ok = push_piece(e, begin + i, 1, m->byte_id[(uint8_t)e->norm.data[begin + i]], true);
  } else if (unk && *prev_unk && e->n_pieces) {
    e->pieces[e->n_pieces - 1].len += len;
  } else {
    ok = push_piece(e, begin, len, id, false);
  }
  *prev_unk = unk;
  return ok;
}

struct best_node {
  int id;
  float score;
  long starts_at;
};

static tolk_status encode_unigram(const struct spm_model *m, struct spm_encoding *e,
                                  tolk_error *err) {
  const char *s = e->norm.data;
  size_t size = e->norm.len;
  struct best_node *best = malloc((size + 1) * sizeof *best);
  if (!best) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "encode: out of memory");
  for (size_t i = 0; i <= size; i++) best[i] = (struct best_node){-1, 0.0f, -1};
  const float unk_score = m->min_score - kUnkPenalty;
  for (size_t start = 0; start < size;) {
    const float till_here = best[start].score;
    size_t mblen = one_char_len(s + start);
    if (mblen > size - start) mblen = size - start;
    bool has_single = false;
    uint32_t node = 0;
    for (size_t k = start; k < size; k++) {
      int32_t child = spm_trie_child(&m->trie, node, (uint8_t)s[k]);
      if (child < 0) break;
      node = (uint32_t)child;
      int32_t id = m->trie.value[node];
      if (id < 0 || m->pieces[id].type == SPM_UNUSED) continue;
      size_t length = k + 1 - start;
      /* Same types as the reference: the user-defined bonus is computed in
       * double, candidates in double, stored scores in float. */
      double score = m->pieces[id].type == SPM_USER_DEFINED
                         ? (double)((float)length * m->max_score) - 0.1
                         : (double)m->pieces[id].score;
      double cand = score + (double)till_here;
      struct best_node *t = &best[k + 1];
      if (t->starts_at == -1 || cand > (double)t->score) {
        t->score = (float)cand;
        t->starts_at = (long)start;
        t->id = id;
      }
      if (length == mblen) has_single = true;
    }
    if (!has_single) {
      struct best_node *t = &best[start + mblen];
      float cand = unk_score + till_here;
      if (t->starts_at == -1 || cand > t->score) {
        t->score = cand;
        t->starts_at = (long)start;
        t->id = m->unk_id;
      }
    }
    start += mblen;
  }
  /* Backtrack, then emit in order. */
  size_t n = 0;
  for (size_t end = size; end > 0; end = (size_t)best[end].starts_at) n++;
  size_t *ends = malloc((n ? n : 1) * sizeof *ends);
  if (!ends) {
    free(best);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "encode: out of memory");
  }
  size_t i = n;
  for (size_t end = size; end > 0; end = (size_t)best[end].starts_at) ends[--i] = end;
  bool ok = true, prev_unk = false;
  for (i = 0; i < n && ok; i++) {
    size_t end = ends[i], begin = (size_t)best[end].starts_at;
    ok = emit(m, e, begin, end - begin, best[end].id, &prev_unk);
  }
  free(ends);
  free(best);
  return ok ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "encode: out of memory");
}

/* ------------------------------------------------------------------ BPE */

struct sym {
  long prev, next;
  size_t begin, len;
  bool freeze;
};

struct pair {
  long left, right;
  float score;
  size_t size;
};

/* Max-heap on (score, then smaller left). */
struct heap {
  struct pair *a;
  size_t n, cap;
};

static bool pair_before(const struct pair *x, const struct pair *y) {
  return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static bool heap_push(struct heap *h, struct pair p) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 64;
    struct pair *a = realloc(h->a, cap * sizeof *a);
    if (!a) return false;
    h->a = a;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0 && pair_before(&p, &h->a[(i - 1) / 2])) {
    h->a[i] = h->a[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->a[i] = p;
  return true;
}

static struct pair heap_pop(struct heap *h) {
  struct pair top = h->a[0], last = h->a[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && pair_before(&h->a[c + 1], &h->a[c])) c++;
    if (!pair_before(&h->a[c], &last)) break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n) h->a[i] = last;
  return top;
}

/* rev_merge of the reference: for a merged piece that is UNUSED, the two
 * pieces it was last made from (later merges of the same text overwrite). */
struct rev_merge {
  size_t begin, len, left_len;
};

struct bpe {
  const struct spm_model *m;
  const char *s;
  struct sym *syms;
  struct heap heap;
  struct rev_merge *rev;
  size_t n_rev, cap_rev;
};

static struct rev_merge *rev_find(const struct bpe *b, size_t begin, size_t len) {
  for (size_t i = 0; i < b->n_rev; i++)
    if (b->rev[i].len == len && memcmp(b->s + b->rev[i].begin, b->s + begin, len) == 0) return &b->rev[i];
  return NULL;
}

static bool rev_record(struct bpe *b, size_t begin, size_t len, size_t left_len) {
  struct rev_merge *r = rev_find(b, begin, len);
  if (!r) {
    if (b->n_rev == b->cap_rev) {
      size_t cap = b->cap_rev ? 2 * b->cap_rev : 8;
      struct rev_merge *p = realloc(b->rev, cap * sizeof *p);
      if (!p) return false;
      b->rev = p;
      b->cap_rev = cap;
    }
    r = &b->rev[b->n_rev++];
  }
  *r = (struct rev_merge){begin, len, left_len};
  return true;
}

static bool maybe_add_pair(struct bpe *b, long left, long right) {
  if (left < 0 || right < 0 || b->syms[left].freeze || b->syms[right].freeze) return true;
  size_t len = b->syms[left].len + b->syms[right].len;
  int id = spm_map_find(&b->m->normal, b->m, b->s + b->syms[left].begin, len);
  if (id < 0) return true;
  if (b->m->pieces[id].type == SPM_UNUSED && !rev_record(b, b->syms[left].begin, len, b->syms[left].len))
    return false;
  return heap_push(&b->heap, (struct pair){left, right, b->m->pieces[id].score, len});
}

/* An unused piece produced by a merge is split back into the two pieces it
 * was made from, recursively, as the reference's resegment() does. */
static bool bpe_emit(const struct bpe *b, struct spm_encoding *e, size_t begin, size_t len,
                     bool *prev_unk) {
  const struct spm_model *m = b->m;
  int id = spm_map_find(&m->normal, m, b->s + begin, len);
  const struct rev_merge *r = id >= 0 && m->pieces[id].type == SPM_UNUSED ? rev_find(b, begin, len) : NULL;
  if (r) {
    size_t left = r->left_len;
    return bpe_emit(b, e, begin, left, prev_unk) && bpe_emit(b, e, begin + left, len - left, prev_unk);
  }
  return emit(m, e, begin, len, id >= 0 ? id : m->unk_id, prev_unk);
}

static tolk_status encode_bpe(const struct spm_model *m, struct spm_encoding *e, tolk_error *err) {
  const char *s = e->norm.data;
  size_t size = e->norm.len;
  struct bpe b = {m, s, malloc((size ? size : 1) * sizeof *b.syms), {0}, NULL, 0, 0};
  if (!b.syms) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "encode: out of memory");
  long n = 0;
  for (size_t pos = 0; pos < size; n++) {
    size_t ud = spm_user_defined_prefix(m, s + pos, size - pos);
    size_t len = ud ? ud : one_char_len(s + pos);
    if (len > size - pos) len = size - pos;
    b.syms[n] = (struct sym){n - 1, pos + len < size ? n + 1 : -1, pos, len, ud > 0};
    pos += len;
  }
  bool ok = true;
  for (long i = 1; i < n && ok; i++) ok = maybe_add_pair(&b, i - 1, i);
  while (ok && b.heap.n) {
    struct pair top = heap_pop(&b.heap);
    struct sym *l = &b.syms[top.left], *r = &b.syms[top.right];
    if (!l->len || !r->len || l->len + r->len != top.size) continue;
    l->len += r->len;
    l->next = r->next;
    if (r->next >= 0) b.syms[r->next].prev = top.left;
    r->len = 0;
    ok = maybe_add_pair(&b, l->prev, top.left) && maybe_add_pair(&b, top.left, l->next);
  }
  bool prev_unk = false;
  for (long i = 0; n > 0 && i != -1 && ok; i = b.syms[i].next)
    ok = bpe_emit(&b, e, b.syms[i].begin, b.syms[i].len, &prev_unk);
  free(b.heap.a);
  free(b.rev);
  free(b.syms);
  return ok ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "encode: out of memory");
}

tolk_status spm_encode(const struct spm_model *m, const char *text, size_t len,
                       struct spm_encoding *out, tolk_error *err) {
  out->n_pieces = 0;
  tolk_status st = spm_normalize(m, text, len, &out->norm, err);
  if (st || out->norm.len == 0) return st;
  return m->type == SPM_BPE ? encode_bpe(m, out, err) : encode_unigram(m, out, err);
}

const char *spm_encoding_piece(const struct spm_model *m, const struct spm_encoding *e,
                               size_t i, size_t *len) {
  const struct spm_piece *p = &e->pieces[i];
  if (p->byte_piece) return spm_id_to_piece(m, p->id, len);
  *len = p->len;
  return e->norm.data + p->begin;
}
