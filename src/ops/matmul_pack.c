/*
 * matmul_pack.c — the packed copies of a constant B that MatMul, Gemm and
 * MatMulInt8 nodes multiply by. At prepare, the constant matrix behind input
 * B (an initializer, seen through a Transpose, a Cast or a per-tensor
 * DequantizeLinear) is packed once in the layout the micro-kernel reads —
 * fp32 for kern_sgemm_packed, or int8 with a scale per column for
 * kern_igemm_packed — and that copy is shared by every node, in every
 * session, that packs the same bytes the same way (matmul_impl.h says why a
 * shared copy's source never dangles). run() then reads B from the node's
 * state, never from the input tensor.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/half.h"
#include "matmul_impl.h"

static pthread_mutex_t packed_mu = PTHREAD_MUTEX_INITIALIZER;
static struct packed_entry *packed_list;

void mm_release(void *state) {
  struct mm_state *s = state;
  if (!s) return;
  struct packed_entry *e = s->e;
  const void *src = s->src;
  free(s);
  pthread_mutex_lock(&packed_mu);
  for (int i = 0; i < e->n_srcs; i++)
    if (e->srcs[i].p == src) {
      if (--e->srcs[i].holders == 0) e->srcs[i] = e->srcs[--e->n_srcs];
      break;
    }
  bool last = --e->refs == 0;
  if (last) {
    for (struct packed_entry **p = &packed_list; *p; p = &(*p)->next)
      if (*p == e) {
        *p = e->next;
        break;
      }
  }
  pthread_mutex_unlock(&packed_mu);
  if (!last) return;
  kern_packed_b_free(e->pb);
  kern_free_weights(e->qb.data);
  free(e->col_scale);
  free(e->srcs);
  free(e);
}

/* Bytes read at a time by the content checks below, whose pages are given
 * back before the next piece is read when they lie in a file mapping: a
 * 133 MB tied embedding compared with another model's then costs 2 × 8 MB of
 * resident file pages, not 266 MB beside the packed weights. A multiple of
 * the hash's 32-byte step. */
#define CHECK_PIECE ((size_t)8 << 20)

static void drop_piece(const uint8_t *p, size_t n, bool file_pages) {
  if (file_pages) tolk_drop_mapped_pages(p, n);
}

/* kern_read_fn for a B in a read-only private file mapping: the pages up to
 * the end of what the packer has read. Every byte of B before p was read
 * already, so the page p lies in is done with from B's side (the part of it
 * before B, if any, is another tensor's bytes, which a later read faults
 * back in like any dropped page); the page holding p + n is left until the
 * next stretch. */
static void drop_read(const void *p, size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  if (ps <= 0) return;
  uintptr_t b = (uintptr_t)p & ~((uintptr_t)ps - 1), e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
  if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
}

/* A 64-bit hash of n bytes, 8 at a time in four independent lanes so the
 * multiplies overlap (a 133 MB LM head hashes in tens of milliseconds);
 * read bytewise, so a misaligned source needs no copy. Only a filter: a
 * match is confirmed by memcmp. file_pages: data's pages are given back as
 * it goes (ir_tensor.file_pages). */
static uint64_t bytes_hash(const void *data, size_t n, bool file_pages) {
  const uint8_t *p = data;
  const uint64_t k = 0x9E3779B97F4A7C15u;
  uint64_t h[4] = {k, k ^ 1u, k ^ 2u, k ^ 3u};
  size_t i = 0;
  while (i + 32 <= n) {
    const size_t start = i, end = n - i > CHECK_PIECE ? i + CHECK_PIECE : i + (n - i) / 32 * 32;
    for (; i < end; i += 32)
      for (int l = 0; l < 4; l++) {
        uint64_t w;
        memcpy(&w, p + i + 8 * (size_t)l, 8);
        h[l] = (h[l] ^ w) * 0xFF51AFD7ED558CCDu;
        h[l] ^= h[l] >> 29;
      }
    drop_piece(p + start, end - start, file_pages);
  }
  uint64_t r = (uint64_t)n * k;
  for (; i < n; i++) r = (r ^ p[i]) * 0x100000001B3u;
  for (int l = 0; l < 4; l++) {
    r = (r ^ h[l]) * 0xC4CEB9FE1A85EC53u;
    r ^= r >> 33;
  }
  return r;
}

/* memcmp(a, b, n) == 0 a piece at a time, giving back the pages of a side
 * that lies in a file mapping (a_file, b_file) after each piece. */
static bool same_bytes(const void *a, bool a_file, const void *b, bool b_file, size_t n) {
  const uint8_t *x = a, *y = b;
  for (size_t i = 0; i < n; i += CHECK_PIECE) {
    size_t m = n - i < CHECK_PIECE ? n - i : CHECK_PIECE;
    bool eq = !memcmp(x + i, y + i, m);
    drop_piece(x + i, m, a_file);
    drop_piece(y + i, m, b_file);
    if (!eq) return false;
  }
  return true;
}

/* Adds one holder of `src` to e; false when out of memory. */
static bool entry_add_src(struct packed_entry *e, const void *src) {
  for (int i = 0; i < e->n_srcs; i++)
    if (e->srcs[i].p == src) {
      e->srcs[i].holders++;
      return true;
    }
  if (e->n_srcs == e->cap_srcs) {
    int cap = e->cap_srcs ? 2 * e->cap_srcs : 2;
    struct packed_src *g = realloc(e->srcs, (size_t)cap * sizeof *g);
    if (!g) return false;
    e->srcs = g;
    e->cap_srcs = cap;
  }
  e->srcs[e->n_srcs++] = (struct packed_src){src, 1, false};
  return true;
}

/* op_def.packed_src_dropped of MatMul and Gemm. Every entry packed from
 * `data` is marked, not only this node's: the same weight packed as B and
 * as op(B) makes two. */
bool mm_packed_src_dropped(const void *state, const void *data) {
  const struct mm_state *s = state;
  if (!s || s->src != data) return false;
  pthread_mutex_lock(&packed_mu);
  for (struct packed_entry *e = packed_list; e; e = e->next)
    for (int i = 0; i < e->n_srcs; i++)
      if (e->srcs[i].p == data) e->srcs[i].dropped = true;
  pthread_mutex_unlock(&packed_mu);
  return true;
}

void op_packed_stats(size_t *entries, size_t *bytes) {
  size_t n = 0, b = 0;
  pthread_mutex_lock(&packed_mu);
  for (const struct packed_entry *e = packed_list; e; e = e->next) {
    n++;
    b += e->form == MM_INT8 ? kern_igemm_pack_b_size(e->qb.n, e->qb.k) + (size_t)e->qb.n * sizeof(float)
         : e->igemm_codes ? kern_igemm_pack_b_size(e->qb.n, e->qb.k)
                    : kern_packed_b_bytes(e->pb);
  }
  pthread_mutex_unlock(&packed_mu);
  if (entries) *entries = n;
  if (bytes) *bytes = b;
}

/* The scalar float or integer of an initializer, or false. */
static bool scalar_init(const struct ir_value *v, int32_t dtype, void *out, size_t size) {
  const struct ir_tensor *t = v ? v->init : NULL;
  if (!t || (v->flags & IR_VALUE_GRAPH_INPUT) || !t->data || t->numel != 1 || t->dtype != dtype)
    return false;
  memcpy(out, t->data, size); /* may be misaligned in the mapping */
  return true;
}

/* A per-tensor DequantizeLinear node p with constant scale and zero point
 * for an x of `xdtype` (int8/uint8), into *d. */
static bool per_tensor_dq(const struct ir_node *p, int32_t xdtype, struct dq *d) {
  int64_t out = ir_attr_int(p, "output_dtype", 0);
  if ((out != 0 && out != TOLK_FLOAT) || p->n_inputs < 2 ||
      !scalar_init(p->inputs[1], TOLK_FLOAT, &d->scale, sizeof d->scale))
    return false;
  d->zp = 0;
  if (p->n_inputs < 3 || !p->inputs[2]) return true;
  if (xdtype == TOLK_INT8) {
    int8_t z;
    if (!scalar_init(p->inputs[2], TOLK_INT8, &z, 1)) return false;
    d->zp = z;
  } else {
    uint8_t z;
    if (!scalar_init(p->inputs[2], TOLK_UINT8, &z, 1)) return false;
    d->zp = z;
  }
  return true;
}

/* The constant matrix behind value v, or NULL: an initializer no caller can
 * override, seen directly or through a 2-D Transpose (*transposed set), a
 * Cast to float of a float16/bfloat16 one, and/or a per-tensor
 * DequantizeLinear of an int8/uint8 one (*dq set; *dtype: the dtype v has).
 * Such chains become constants only when folding runs, after prepare:
 * exporters write a tied LM head as Transpose(embedding), float16 exports
 * feed weights through Cast, and ORT's dynamic quantization stores that LM
 * head as DequantizeLinear(Transpose(int8)). Packing the initializer itself
 * gives the same packed matrix without holding the folded copy's layout. */
static const struct ir_tensor *const_matrix(const struct ir_value *v, bool *transposed,
                                            int32_t *dtype, struct dq *dq, bool *has_dq) {
  *transposed = false;
  *has_dq = false;
  *dtype = TOLK_UNDEFINED;
  bool cast = false;
  const struct ir_node *dq_node = NULL;
  for (int hop = 0; hop < 3 && !v->init && v->producer; hop++) {
    const struct ir_node *p = v->producer;
    if (p->domain[0] != '\0' || p->n_inputs < 1 || !p->inputs[0]) return NULL;
    if (!strcmp(p->op_type, "Transpose") && !*transposed && p->n_inputs == 1) {
      const struct ir_attr *perm = ir_node_attr(p, "perm");
      if (perm && (perm->n != 2 || perm->ints[0] != 1 || perm->ints[1] != 0)) return NULL;
      *transposed = true;
    } else if (!strcmp(p->op_type, "Cast") && !cast && !dq_node && p->n_inputs == 1 &&
               ir_attr_int(p, "to", 0) == TOLK_FLOAT) {
      cast = true;
    } else if (!strcmp(p->op_type, "DequantizeLinear") && !dq_node && !cast) {
      dq_node = p;
    } else {
      return NULL;
    }
    v = p->inputs[0];
  }
  const struct ir_tensor *t = v->init;
  if (!t || (v->flags & IR_VALUE_GRAPH_INPUT) || !t->data || t->rank != 2) return NULL;
  if (dq_node) {
    if ((t->dtype != TOLK_INT8 && t->dtype != TOLK_UINT8) || !per_tensor_dq(dq_node, t->dtype, dq))
      return NULL;
    *has_dq = true;
    *dtype = TOLK_FLOAT;
    return t;
  }
  if (t->dtype != TOLK_FLOAT && t->dtype != TOLK_FLOAT16 && t->dtype != TOLK_BFLOAT16)
    return NULL;
  *dtype = cast ? TOLK_FLOAT : t->dtype;
  return t;
}

/* Column j of op(B) as floats into col[0..k): the weights (read bytewise,
 * as they may be misaligned), or with dq the 8-bit codes dequantized as
 * DequantizeLinear does. */
static void column_at(const unsigned char *src, const struct dq *dq, bool is_signed, bool trans, int64_t k,
                      int64_t ld, int64_t j, float *col) {
  const size_t at = (size_t)(trans ? j * ld : j), step = (size_t)(trans ? 1 : ld);
  if (dq && is_signed)
    for (int64_t p = 0; p < k; p++) col[p] = (float)((int32_t)(int8_t)src[at + (size_t)p * step] - dq->zp) * dq->scale;
  else if (dq)
    for (int64_t p = 0; p < k; p++) col[p] = (float)((int32_t)src[at + (size_t)p * step] - dq->zp) * dq->scale;
  else
    for (int64_t p = 0; p < k; p++) memcpy(&col[p], src + sizeof(float) * (at + (size_t)p * step), sizeof(float));
}

/* Quantizes op(B) (k×n; src holds B, or Bᵀ when trans, rows ld elements
 * apart: floats, or with dq 8-bit codes read as their dequantized floats,
 * so a quantized LM head needs no float copy) to int8, symmetric, one scale
 * per column — a vocabulary entry of an LM head — so that a rare large entry
 * costs only its own column precision: s_j = max_p |B[p][j]| / 127,
 * q = round(B / s_j), halves to even. Packs it into e->qb; false when out of
 * memory. A column at a time through a float buffer, rounded by adding and
 * subtracting 1.5 * 2^23 (what nearbyintf does in the default rounding mode
 * for |x| < 2^22, and no call): the loops vectorise, and the 33 million
 * weights of an OPUS LM head took 0.37 s element by element through
 * nearbyintf. */
bool mm_quantize_cols(const void *src, const struct dq *dq, bool is_signed, bool trans, int64_t k, int64_t n,
                      int64_t ld, kern_read_fn read, struct packed_entry *e) {
  size_t qbytes, pbytes = kern_igemm_pack_b_size(n, k);
  int8_t *q = NULL;
  float *col = malloc((size_t)(k > 0 ? k : 1) * sizeof *col);
  if (col && pbytes && tolk_mul_size((size_t)n, (size_t)k, &qbytes) && (q = malloc(qbytes ? qbytes : 1)))
    e->qb.data = kern_alloc_weights(pbytes);
  e->col_scale = malloc((size_t)n * sizeof(float));
  if (!col || !q || !e->qb.data || !e->col_scale) {
    free(col);
    free(q);
    return false;
  }
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  const size_t es = dq ? 1 : sizeof(float), row = (size_t)ld * es;
  size_t told = 0; /* bytes of src reported to read */
  for (int64_t j = 0; j < n; j++) {
    column_at(src, dq, is_signed, trans, k, ld, j, col);
    if (read && trans && (j % 64 == 63 || j == n - 1)) {
      /* Columns are src's rows: rows 0..j are read. */
      size_t upto = j == n - 1 ? (size_t)j * row + (size_t)k * es : (size_t)(j + 1) * row;
      read((const char *)src + told, upto - told);
      told = upto;
    }
    /* Eight running maxima, each a plain comparison (fmaxf would be a libm
     * call): the loop vectorises, and max is exact in any order. A NaN
     * weight compares false and is left out of the scale. */
    enum { L = 8 };
    float lane[L] = {0};
    int64_t p = 0;
    for (; p + L <= k; p += L)
      for (int l = 0; l < L; l++) {
        float v = fabsf(col[p + l]);
        lane[l] = v > lane[l] ? v : lane[l];
      }
    for (; p < k; p++) {
      float v = fabsf(col[p]);
      lane[0] = v > lane[0] ? v : lane[0];
    }
    float amax = 0.0f;
    for (int l = 0; l < L; l++) amax = lane[l] > amax ? lane[l] : amax;
    float scale = amax / 127.0f;
    e->col_scale[j] = scale;
    int8_t *qj = q + j * k;
    if (!(scale > 0.0f)) {
      memset(qj, 0, (size_t)k);
      continue;
    }
    /* x is within ±127 (a rounding over at most) or NaN — a NaN weight's,
     * or any weight's over an infinite scale — which becomes 0, as
     * converting it would be undefined. */
    for (p = 0; p < k; p++) {
      float r = (col[p] / scale + magic) - magic;
      r = r > 127.0f ? 127.0f : r;
      r = r < -127.0f ? -127.0f : r;
      qj[p] = (int8_t)(int)(r == r ? r : 0.0f);
    }
  }
  free(col);
  if (read && !trans && k > 0) read(src, ((size_t)(k - 1) * (size_t)ld + (size_t)n) * es);
  kern_igemm_pack_b(n, k, q, k, true, true, &e->qb);
  free(q);
  return true;
}

/* The key of a new entry made from t, with its one holder. */
static void entry_key(struct packed_entry *e, const struct ir_tensor *t, bool trans, enum kern_isa isa,
                      const struct dq *dq) {
  e->refs = 1;
  e->hash = bytes_hash(t->data, t->nbytes, t->file_pages);
  e->nbytes = t->nbytes;
  e->dtype = t->dtype;
  e->d0 = t->dims[0];
  e->d1 = t->dims[1];
  e->trans = trans;
  e->isa = isa;
  if (dq) e->dq = *dq;
}

/* Packs the entry for op(B) = trans ? t^T : t, widening float16/bfloat16;
 * an int8/uint8 t (dq) stays codes that the product dequantizes as
 * DequantizeLinear does (kern_sgemm_pack_b_q8: a dequantized LM head would
 * be 133 MB of floats for 33 MB of codes). With int8, quantizes the floats
 * per column instead (mm_quantize_cols), reading codes as their floats
 * rather than through a float copy. */
static tolk_status new_entry(const struct ir_tensor *t, bool trans, enum kern_isa isa,
                             const struct dq *dq, enum mm_form form, struct packed_entry **out,
                             tolk_error *err) {
  const bool int8 = form == MM_INT8, bf16 = form == MM_BF16, bf16dot = form == MM_BF16DOT;
  const int64_t k = trans ? t->dims[1] : t->dims[0], n = trans ? t->dims[0] : t->dims[1];
  /* The pack reads bytewise, so a float initializer left misaligned in the
   * mapping (ir_tensor.misaligned) packs in place; the widening below reads
   * typed halves, so a misaligned half one is staged first (rare, and the
   * staging copy is freed before returning). */
  const void *f = t->data;
  float *wide = NULL;
  void *staged = NULL;
  struct packed_entry *e = calloc(1, sizeof *e);
  if (!e) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  const bool keep_codes = dq && !int8;
  if (t->dtype != TOLK_FLOAT && !dq) {
    size_t bytes;
    const void *half = t->data;
    if (t->misaligned && (staged = malloc(t->nbytes))) {
      memcpy(staged, t->data, t->nbytes);
      half = staged;
    }
    if ((t->misaligned && !staged) || !tolk_mul_size((size_t)t->numel, sizeof(float), &bytes) ||
        !(wide = malloc(bytes))) {
      free(staged);
      free(e);
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "no memory to widen %lld elements",
                       (long long)t->numel);
    }
    if (t->dtype == TOLK_FLOAT16) tolk_f16_to_f32_n(half, wide, t->numel);
    else tolk_bf16_to_f32_n(half, wide, t->numel);
    free(staged);
    f = wide;
  }
  tolk_status st = TOLK_OK;
  if (keep_codes)
    st = kern_sgemm_pack_b_q8(trans, k, n, t->data, t->dims[1], t->dtype == TOLK_INT8, dq->scale, dq->zp,
                              &e->pb, err);
  else if (bf16dot)
    st = kern_sgemm_pack_b_bf16dot(trans, k, n, f, t->dims[1], f == t->data && t->file_pages ? drop_read : NULL,
                                   &e->pb, err);
  else if (!int8)
    st = kern_sgemm_pack_b_read(trans, k, n, f, t->dims[1], bf16, f == t->data && t->file_pages ? drop_read : NULL,
                                &e->pb, err);
  else if (!mm_quantize_cols(f, dq, t->dtype == TOLK_INT8, trans, k, n, t->dims[1],
                             f == t->data && t->file_pages ? drop_read : NULL, e))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "no memory to quantize a %lld x %lld matrix",
                   (long long)k, (long long)n);
  free(wide);
  if (st == TOLK_OK && !entry_add_src(e, t->data)) {
    kern_packed_b_free(e->pb);
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  if (st != TOLK_OK) {
    kern_free_weights(e->qb.data);
    free(e->col_scale);
    free(e);
    return st;
  }
  e->form = form;
  entry_key(e, t, trans, isa, dq);
  *out = e;
  return TOLK_OK;
}

/* The entry of a MatMulInteger-family B: t's codes packed for kern_igemm
 * as they are. */
static tolk_status new_codes_entry(const struct ir_tensor *t, enum kern_isa isa, struct packed_entry **out,
                                   tolk_error *err) {
  size_t bytes = kern_igemm_pack_b_size(t->dims[1], t->dims[0]);
  if (!bytes) return tolk_fail(err, TOLK_ERR_LIMIT, "weight %s is too large", t->name);
  struct packed_entry *e = calloc(1, sizeof *e);
  if (!e || !(e->qb.data = kern_alloc_weights(bytes)) || !entry_add_src(e, t->data)) {
    if (e) kern_free_weights(e->qb.data);
    free(e);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "packing weight %s: out of memory", t->name);
  }
  kern_igemm_pack_b(t->dims[1], t->dims[0], t->data, t->dims[1], false, t->dtype == TOLK_INT8, &e->qb);
  e->igemm_codes = true;
  entry_key(e, t, false, isa, NULL);
  *out = e;
  return TOLK_OK;
}

/* Under packed_mu: an entry holding t packed the same way (trans, isa,
 * form, igemm_codes, dq), given one more holder of t->data, or NULL. The same
 * initializer first (no bytes read), then equal bytes from another model:
 * hashed only if some entry has the same key. */
static struct packed_entry *shared_entry(const struct ir_tensor *t, bool trans, enum kern_isa isa,
                                         enum mm_form form, bool igemm_codes, const struct dq *dq) {
  for (int by_content = 0; by_content < 2; by_content++) {
    bool hashed = false;
    uint64_t h = 0;
    for (struct packed_entry *e = packed_list; e; e = e->next) {
      if (e->dtype != t->dtype || e->d0 != t->dims[0] || e->d1 != t->dims[1] || e->trans != trans ||
          e->isa != isa || e->form != form || e->igemm_codes != igemm_codes ||
          e->nbytes != t->nbytes ||
          e->n_srcs < 1 || (dq && (e->dq.scale != dq->scale || e->dq.zp != dq->zp)))
        continue;
      bool same = false;
      if (!by_content) {
        for (int i = 0; i < e->n_srcs && !same; i++) same = e->srcs[i].p == t->data;
      } else {
        if (!hashed) {
          h = bytes_hash(t->data, t->nbytes, t->file_pages);
          hashed = true;
        }
        same = e->hash == h &&
               same_bytes(e->srcs[0].p, e->srcs[0].dropped, t->data, t->file_pages, t->nbytes);
      }
      /* Out of memory for the source list: pack a copy of our own. */
      if (same && entry_add_src(e, t->data)) {
        e->refs++;
        return e;
      }
    }
  }
  return NULL;
}

/* Packs node input 1 when it is a constant matrix (const_matrix). Leaves
 * *state NULL otherwise (run() then takes B as it comes); fails only for
 * lack of memory. */
/* run() reads B from *state whenever prepare set it, never from the input
 * tensor: mm_packed_input (op_def.packed_input, below) says so, which lets
 * the session leave a misaligned constant B unaligned and constant folding
 * drop a folded B such as Transpose(embedding) — the tied LM head — instead
 * of keeping it beside the packed copy. */
tolk_status mm_pack_b(const struct ir_node *node, bool trans_b, enum mm_form form, void **state,
                      tolk_error *err) {
  *state = NULL;
  if (node->n_inputs < 2 || !node->inputs[1]) return TOLK_OK;
  bool transposed, has_dq;
  int32_t dtype;
  struct dq dq = {0};
  const struct ir_tensor *t = const_matrix(node->inputs[1], &transposed, &dtype, &dq, &has_dq);
  if (!t || t->dims[0] == 0 || t->dims[1] == 0) return TOLK_OK;
  const bool trans = trans_b != transposed;
  const enum kern_isa isa = kern_isa_active();
  /* A DequantizeLinear'd B keeps its 8-bit codes: smaller than bfloat16. */
  if ((form == MM_BF16 || form == MM_BF16DOT) && has_dq) form = MM_F32;
  struct mm_state *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  s->input = 1;
  s->dtype = dtype;
  s->d0 = transposed ? t->dims[1] : t->dims[0];
  s->d1 = transposed ? t->dims[0] : t->dims[1];
  s->src = t->data;
  /* Holding the lock while packing keeps two nodes from packing one weight
   * twice; sessions are created rarely, so the wait costs nothing. */
  pthread_mutex_lock(&packed_mu);
  s->e = shared_entry(t, trans, isa, form, false, has_dq ? &dq : NULL);
  tolk_status st = TOLK_OK;
  if (!s->e && (st = new_entry(t, trans, isa, has_dq ? &dq : NULL, form, &s->e, err)) == TOLK_OK) {
    s->e->next = packed_list;
    packed_list = s->e;
  }
  pthread_mutex_unlock(&packed_mu);
  if (st != TOLK_OK) {
    free(s);
    tolk_error_prefix(err, "input B (%s)", node->inputs[1]->name);
    return st;
  }
  *state = s;
  return TOLK_OK;
}

tolk_status mm_pack_b_codes(const struct ir_node *node, size_t b_idx, void **state, tolk_error *err) {
  *state = NULL;
  const struct ir_value *v = node->n_inputs > b_idx ? node->inputs[b_idx] : NULL;
  const struct ir_tensor *t = v ? v->init : NULL;
  if (!t || (v->flags & IR_VALUE_GRAPH_INPUT) || !t->data || t->rank != 2 ||
      (t->dtype != TOLK_INT8 && t->dtype != TOLK_UINT8))
    return TOLK_OK;
  const enum kern_isa isa = kern_isa_active();
  struct mm_state *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  s->input = b_idx;
  s->dtype = t->dtype;
  s->d0 = t->dims[0];
  s->d1 = t->dims[1];
  s->src = t->data;
  pthread_mutex_lock(&packed_mu);
  s->e = shared_entry(t, false, isa, MM_F32, true, NULL);
  tolk_status st = TOLK_OK;
  if (!s->e && (st = new_codes_entry(t, isa, &s->e, err)) == TOLK_OK) {
    s->e->next = packed_list;
    packed_list = s->e;
  }
  pthread_mutex_unlock(&packed_mu);
  if (st != TOLK_OK) {
    free(s);
    return st;
  }
  *state = s;
  return TOLK_OK;
}

const struct kern_igemm_b *mm_packed_codes(const void *state, const struct tensor *b) {
  const struct mm_state *s = state;
  if (!s || !s->e->igemm_codes || b->dtype != s->dtype || b->rank != 2 || b->dims[0] != s->d0 ||
      b->dims[1] != s->d1)
    return NULL;
  return &s->e->qb;
}

void *mm_rows_acquire(const struct ir_value *table) {
  const struct ir_tensor *t = table->init;
  if (!t || !t->data || t->dtype != TOLK_FLOAT || t->rank != 2) return NULL;
  struct mm_state *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_lock(&packed_mu);
  struct packed_entry *found = NULL;
  for (struct packed_entry *e = packed_list; e && !found; e = e->next) {
    if (!e->trans || e->form != MM_F32 || e->igemm_codes || !e->pb || e->dtype != TOLK_FLOAT ||
        e->d0 != t->dims[0] || e->d1 != t->dims[1])
      continue;
    for (int i = 0; i < e->n_srcs && !found; i++)
      if (e->srcs[i].p == t->data) found = e;
  }
  if (found && entry_add_src(found, t->data)) {
    found->refs++;
    *s = (struct mm_state){found, t->data, 0, TOLK_FLOAT, t->dims[0], t->dims[1]};
  } else {
    free(s);
    s = NULL;
  }
  pthread_mutex_unlock(&packed_mu);
  return s;
}

const struct kern_packed_b *mm_state_packed(const void *state) {
  const struct mm_state *s = state;
  return s ? s->e->pb : NULL;
}

/* The packed B when `b` is the tensor it was made from. */
const struct kern_packed_b *mm_packed_for(const struct op_ctx *c, const struct tensor *b) {
  const struct mm_state *s = c->state;
  if (!s || b->dtype != s->dtype || b->rank != 2 || b->dims[0] != s->d0 || b->dims[1] != s->d1)
    return NULL;
  return s->e->pb;
}

/* op_def.packed_input of MatMul and Gemm: run() takes the packed path for
 * every B of the packed dtype and [d0, d1] shape (mm_packed_for): such a B has
 * no batch dims, so MatMul multiplies one shared matrix, and float16/bfloat16
 * entries were widened at prepare. */
bool mm_packed_input(const void *state, size_t input, struct tensor *shape) {
  const struct mm_state *s = state;
  if (!s || input != s->input) return false;
  memset(shape, 0, sizeof *shape);
  shape->dtype = s->dtype;
  if (!tensor_set_shape(shape, 2, (int64_t[]){s->d0, s->d1})) return false;
  return tolk_mul_size((size_t)shape->numel, op_dtype_size(s->dtype), &shape->nbytes);
}
