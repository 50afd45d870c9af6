/*
 * spm_model.c — reads a SentencePiece ModelProto and builds the lookup
 * structures the encoder needs: piece ↔ id tables, a byte trie over the
 * encodable pieces (normal, user-defined, unused — as the reference's trie),
 * and the normaliser and denormaliser specs.
 *
 * Every length and count comes from an untrusted file: each is checked
 * against the bytes that remain before anything is allocated for it.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/pb.h"
#include "spm_internal.h"

/* ------------------------------------------------------------- hash map */

static uint64_t hash_bytes(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

/* Open addressing, power-of-two capacity, load ≤ 1/2. Slot value -1: empty. */
static bool piece_map_init(struct piece_map *m, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 1) cap *= 2;
  m->slots = malloc(cap * sizeof *m->slots);
  if (!m->slots) return false;
  for (size_t i = 0; i < cap; i++) m->slots[i] = -1;
  m->mask = cap - 1;
  return true;
}

/* Returns false when the piece is already present. */
static bool piece_map_insert(struct piece_map *m, const struct spm_model *sm, int id) {
  const struct spm_entry *e = &sm->pieces[id];
  for (size_t i = hash_bytes(e->text, e->len) & m->mask;; i = (i + 1) & m->mask) {
    int cur = m->slots[i];
    if (cur < 0) {
      m->slots[i] = id;
      return true;
    }
    const struct spm_entry *c = &sm->pieces[cur];
    if (c->len == e->len && memcmp(c->text, e->text, e->len) == 0) return false;
  }
}

int spm_map_find(const struct piece_map *m, const struct spm_model *sm, const char *s,
                 size_t len) {
  if (!m->slots) return -1;
  for (size_t i = hash_bytes(s, len) & m->mask;; i = (i + 1) & m->mask) {
    int cur = m->slots[i];
    if (cur < 0) return -1;
    const struct spm_entry *c = &sm->pieces[cur];
    if (c->len == len && memcmp(c->text, s, len) == 0) return cur;
  }
}

/* ------------------------------------------------------------- byte trie */

/* Children are found through one hash table keyed by (node, byte), so a
 * lookup costs one probe per input byte whatever the fan-out. */
static uint64_t edge_key(uint32_t node, uint8_t byte) {
  return ((uint64_t)node << 8 | byte) + 1; /* +1: key 0 marks an empty slot */
}

static uint32_t edge_slot(const struct spm_trie *t, uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & t->edge_mask;
}

int32_t spm_trie_child(const struct spm_trie *t, uint32_t node, uint8_t byte) {
  uint64_t key = edge_key(node, byte);
  for (uint32_t i = edge_slot(t, key);; i = (i + 1) & t->edge_mask) {
    if (t->edge_keys[i] == key) return (int32_t)t->edge_child[i];
    if (t->edge_keys[i] == 0) return -1;
  }
}

static tolk_status trie_build(struct spm_model *m, tolk_error *err) {
  struct spm_trie *t = &m->trie;
  size_t total = 1;
  for (size_t i = 0; i < m->n_pieces; i++)
    if (spm_in_trie(m->pieces[i].type)) total += m->pieces[i].len;
  if (total > UINT32_MAX / 4)
    return tolk_fail(err, TOLK_ERR_LIMIT, "sentencepiece model: pieces too long in total");
  size_t cap = 16;
  while (cap < 2 * total) cap *= 2;
  t->edge_keys = calloc(cap, sizeof *t->edge_keys);
  t->edge_child = malloc(cap * sizeof *t->edge_child);
  t->value = malloc(total * sizeof *t->value);
  if (!t->edge_keys || !t->edge_child || !t->value)
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sentencepiece model: out of memory");
  t->edge_mask = (uint32_t)(cap - 1);
  t->n_nodes = 1;
  t->value[0] = -1;
  for (size_t id = 0; id < m->n_pieces; id++) {
    const struct spm_entry *e = &m->pieces[id];
    if (!spm_in_trie(e->type)) continue;
    uint32_t node = 0;
    for (size_t k = 0; k < e->len; k++) {
      uint64_t key = edge_key(node, (uint8_t)e->text[k]);
      uint32_t i = edge_slot(t, key);
      while (t->edge_keys[i] && t->edge_keys[i] != key) i = (i + 1) & t->edge_mask;
      if (!t->edge_keys[i]) {
        t->edge_keys[i] = key;
        t->edge_child[i] = t->n_nodes;
        t->value[t->n_nodes++] = -1;
      }
      node = t->edge_child[i];
    }
    t->value[node] = (int32_t)id;
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------- parsing */

static tolk_status malformed(tolk_error *err, const char *what, size_t offset) {
  return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: %s at byte %zu", what,
                   offset);
}

static tolk_status parse_piece(struct pb *r, struct spm_entry *e, tolk_error *err) {
  struct pb_field f;
  const char *why;
  e->type = SPM_NORMAL;
  e->score = 0.0f;
  e->text = NULL;
  e->len = 0;
  while (!pb_eof(r)) {
    if (!pb_next(r, &f, &why)) return malformed(err, why, pb_offset(r));
    if (f.number == 1 && f.wire == PB_LEN) {
      e->text = (const char *)f.data;
      e->len = f.len;
    } else if (f.number == 2 && f.wire == PB_FIXED32) {
      e->score = pb_f32(f.u64);
    } else if (f.number == 3 && f.wire == PB_VARINT) {
      if (f.u64 < SPM_NORMAL || f.u64 > SPM_BYTE)
        return malformed(err, "unknown piece type", f.offset);
      e->type = (enum spm_piece_type)f.u64;
    }
  }
  return TOLK_OK;
}

static tolk_status parse_trainer(struct pb *r, struct spm_model *m, tolk_error *err) {
  struct pb_field f;
  const char *why;
  while (!pb_eof(r)) {
    if (!pb_next(r, &f, &why)) return malformed(err, why, pb_offset(r));
    if (f.wire == PB_VARINT) {
      switch (f.number) {
      case 3: m->type = (enum spm_model_type)f.u64; break;
      case 24: m->treat_ws_as_suffix = f.u64 != 0; break;
      case 35: m->byte_fallback = f.u64 != 0; break;
      default: break;
      }
    } else if (f.wire == PB_LEN && f.number == 44) {
      m->unk_surface = (const char *)f.data;
      m->unk_surface_len = f.len;
    }
  }
  return TOLK_OK;
}

static tolk_status parse_normalizer(struct pb *r, struct spm_norm_spec *n, tolk_error *err) {
  struct pb_field f;
  const char *why;
  n->present = true;
  n->add_dummy_prefix = n->remove_extra_ws = n->escape_ws = true;
  while (!pb_eof(r)) {
    if (!pb_next(r, &f, &why)) return malformed(err, why, pb_offset(r));
    if (f.wire == PB_LEN && f.number == 2) {
      n->charsmap = f.data;
      n->charsmap_len = f.len;
    } else if (f.wire == PB_VARINT) {
      if (f.number == 3) n->add_dummy_prefix = f.u64 != 0;
      if (f.number == 4) n->remove_extra_ws = f.u64 != 0;
      if (f.number == 5) n->escape_ws = f.u64 != 0;
    }
  }
  return TOLK_OK;
}

/* First pass: count pieces so the table is allocated once. */
static tolk_status count_pieces(const uint8_t *data, size_t size, size_t *n, tolk_error *err) {
  struct pb r = pb_init(data, size);
  struct pb_field f;
  const char *why;
  *n = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return malformed(err, why, pb_offset(&r));
    if (f.number == 1 && f.wire == PB_LEN && ++*n > SPM_MAX_PIECES)
      return tolk_fail(err, TOLK_ERR_LIMIT, "sentencepiece model: more than %d pieces",
                       SPM_MAX_PIECES);
  }
  return TOLK_OK;
}

static int parse_byte_piece(const struct spm_entry *e) {
  /* "<0xAB>" */
  if (e->len != 6 || memcmp(e->text, "<0x", 3) != 0 || e->text[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = e->text[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* The checks the reference makes when it initialises its piece tables. */
static tolk_status index_pieces(struct spm_model *m, tolk_error *err) {
  if (!piece_map_init(&m->normal, m->n_pieces) || !piece_map_init(&m->reserved, m->n_pieces))
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sentencepiece model: out of memory");
  m->unk_id = -1;
  /* The reference starts from FLT_MAX / FLT_MIN (the smallest positive
   * float, not the most negative): user-defined pieces score from it. */
  m->min_score = FLT_MAX;
  m->max_score = FLT_MIN;
  bool bytes_seen[256] = {false};
  for (size_t i = 0; i < m->n_pieces; i++) {
    struct spm_entry *e = &m->pieces[i];
    if (e->len == 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: piece %zu is empty", i);
    struct piece_map *map = spm_in_trie(e->type) ? &m->normal : &m->reserved;
    if (!piece_map_insert(map, m, (int)i))
      return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: piece %zu '%.*s' is defined twice",
                       i, (int)(e->len > 64 ? 64 : e->len), e->text);
    if (e->type == SPM_USER_DEFINED) m->has_user_defined = true;
    if (e->type == SPM_UNKNOWN) {
      if (m->unk_id >= 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: two unknown pieces");
      m->unk_id = (int)i;
    }
    if (e->type == SPM_BYTE) {
      if (!m->byte_fallback)
        return tolk_fail(err, TOLK_ERR_MALFORMED,
                         "sentencepiece model: byte piece %zu although byte_fallback is off", i);
      int b = parse_byte_piece(e);
      if (b < 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: invalid byte piece %zu", i);
      bytes_seen[b] = true;
      m->byte_id[b] = (int)i;
    }
    if (e->type == SPM_NORMAL) {
      if (e->score < m->min_score) m->min_score = e->score;
      if (e->score > m->max_score) m->max_score = e->score;
    }
  }
  if (m->unk_id < 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: no unknown piece");
  if (m->byte_fallback)
    for (int b = 0; b < 256; b++)
      if (!bytes_seen[b])
        return tolk_fail(err, TOLK_ERR_MALFORMED,
                         "sentencepiece model: byte_fallback without all 256 byte pieces");
  return TOLK_OK;
}

static tolk_status parse_model(struct spm_model *m, tolk_error *err) {
  size_t n;
  tolk_status st = count_pieces(m->bytes, m->size, &n, err);
  if (st) return st;
  if (n == 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece model: no pieces");
  m->pieces = calloc(n, sizeof *m->pieces);
  if (!m->pieces) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sentencepiece model: out of memory");
  m->type = SPM_UNIGRAM;
  /* A model without a normalizer_spec gets the proto defaults. */
  m->norm.add_dummy_prefix = m->norm.remove_extra_ws = m->norm.escape_ws = true;
  m->unk_surface = " \xE2\x81\x87 ";
  m->unk_surface_len = 5;
  struct pb r = pb_init(m->bytes, m->size);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return malformed(err, why, pb_offset(&r));
    if (f.wire != PB_LEN) continue;
    struct pb sub = pb_sub(&r, &f);
    if (f.number == 1) st = parse_piece(&sub, &m->pieces[m->n_pieces++], err);
    else if (f.number == 2) st = parse_trainer(&sub, m, err);
    else if (f.number == 3) st = parse_normalizer(&sub, &m->norm, err);
    else if (f.number == 5) st = parse_normalizer(&sub, &m->denorm, err);
    if (st) return st;
  }
  if (m->type != SPM_UNIGRAM && m->type != SPM_BPE)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "sentencepiece model: model type %d (only unigram and BPE)", (int)m->type);
  if ((st = index_pieces(m, err))) return st;
  if ((st = spm_charsmap_init(&m->norm, err))) return st;
  if ((st = spm_charsmap_init(&m->denorm, err))) return st;
  return trie_build(m, err);
}

tolk_status spm_model_load(const void *data, size_t size, struct spm_model **out,
                           tolk_error *err) {
  *out = NULL;
  if (size > SPM_MAX_FILE_BYTES)
    return tolk_fail(err, TOLK_ERR_LIMIT, "sentencepiece model: %zu bytes is too large", size);
  struct spm_model *m = calloc(1, sizeof *m);
  uint8_t *copy = malloc(size ? size : 1);
  if (!m || !copy) {
    free(m);
    free(copy);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sentencepiece model: out of memory");
  }
  if (size) memcpy(copy, data, size);
  m->bytes = copy;
  m->size = size;
  tolk_status st = parse_model(m, err);
  if (st) {
    spm_model_free(m);
    return st;
  }
  *out = m;
  return TOLK_OK;
}

tolk_status spm_model_load_file(const char *path, struct spm_model **out, tolk_error *err) {
  *out = NULL;
  char *data;
  size_t len;
  tolk_status st = tolk_read_file(path, SPM_MAX_FILE_BYTES, &data, &len, err);
  if (st) return st;
  st = spm_model_load(data, len, out, err);
  if (st) tolk_error_prefix(err, "%s", path);
  free(data);
  return st;
}

void spm_model_free(struct spm_model *m) {
  if (!m) return;
  free(m->pieces);
  free(m->normal.slots);
  free(m->reserved.slots);
  free(m->trie.edge_keys);
  free(m->trie.edge_child);
  free(m->trie.value);
  spm_charsmap_release(&m->norm);
  spm_charsmap_release(&m->denorm);
  free(m->bytes);
  free(m);
}

size_t spm_piece_count(const struct spm_model *m) { return m->n_pieces; }
int spm_unk_id(const struct spm_model *m) { return m->unk_id; }
enum spm_model_type spm_type(const struct spm_model *m) { return m->type; }

const char *spm_id_to_piece(const struct spm_model *m, int id, size_t *len) {
  if (id < 0 || (size_t)id >= m->n_pieces) return NULL;
  if (len) *len = m->pieces[id].len;
  return m->pieces[id].text;
}

enum spm_piece_type spm_piece_type(const struct spm_model *m, int id) {
  if (id < 0 || (size_t)id >= m->n_pieces) return SPM_UNKNOWN;
  return m->pieces[id].type;
}

int spm_piece_to_id(const struct spm_model *m, const char *piece, size_t len) {
  int id = spm_map_find(&m->reserved, m, piece, len);
  if (id >= 0) return id;
  id = spm_map_find(&m->normal, m, piece, len);
  return id >= 0 ? id : m->unk_id;
}

/* ------------------------------------------------------------- buffers */

void spm_buf_free(struct spm_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

bool spm_buf_append(struct spm_buf *b, const void *data, size_t len) {
  if (len > SPM_MAX_FILE_BYTES || b->len > SPM_MAX_FILE_BYTES - len) return false;
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + len + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return false;
    b->data = p;
    b->cap = cap;
  }
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  return true;
}

void spm_encoding_free(struct spm_encoding *e) {
  spm_buf_free(&e->norm);
  free(e->pieces);
  e->pieces = NULL;
  e->n_pieces = e->cap_pieces = 0;
}
