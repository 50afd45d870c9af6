/*
 * spm_norm.c — SentencePiece normalisation: the precompiled charsmap (a
 * darts-clone double-array trie of rewrite rules, longest match first), then
 * whitespace handling — leading/trailing/duplicate spaces removed, spaces
 * escaped as U+2581 "▁", and the dummy-prefix ▁ — exactly as the reference
 * normaliser, including its handling of invalid UTF-8 (each bad byte becomes
 * U+FFFD).
 */
#include <string.h>

#include "spm_internal.h"

#include <stdlib.h>

static const char kSpace[] = "\xe2\x96\x81"; /* ▁ */
static const char kReplacement[] = "\xEF\xBF\xBD";

bool spm_utf8_char(const char *s, size_t len, size_t *mblen) {
  const uint8_t *b = (const uint8_t *)s;
#define TRAIL(x) (((x) & 0xC0) == 0x80)
  uint32_t cp;
  if (b[0] < 0x80) {
    *mblen = 1;
    return true;
  }
  if (len >= 2 && (b[0] & 0xE0) == 0xC0) {
    cp = (uint32_t)(b[0] & 0x1F) << 6 | (b[1] & 0x3F);
    if (TRAIL(b[1]) && cp >= 0x80) {
      *mblen = 2;
      return true;
    }
  } else if (len >= 3 && (b[0] & 0xF0) == 0xE0) {
    cp = (uint32_t)(b[0] & 0x0F) << 12 | (uint32_t)(b[1] & 0x3F) << 6 | (b[2] & 0x3F);
    if (TRAIL(b[1]) && TRAIL(b[2]) && cp >= 0x800 && (cp < 0xD800 || cp >= 0xE000)) {
      *mblen = 3;
      return true;
    }
  } else if (len >= 4 && (b[0] & 0xF8) == 0xF0) {
    cp = (uint32_t)(b[0] & 0x07) << 18 | (uint32_t)(b[1] & 0x3F) << 12 |
         (uint32_t)(b[2] & 0x3F) << 6 | (b[3] & 0x3F);
    if (TRAIL(b[1]) && TRAIL(b[2]) && TRAIL(b[3]) && cp >= 0x10000 && cp <= 0x10FFFF) {
      *mblen = 4;
      return true;
    }
  }
#undef TRAIL
  *mblen = 1;
  return false;
}

tolk_status spm_charsmap_init(struct spm_norm_spec *n, tolk_error *err) {
  if (!n->present || n->charsmap_len == 0) return TOLK_OK;
  const uint8_t *blob = n->charsmap;
  size_t len = n->charsmap_len;
  if (len <= 4) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece charsmap: too short");
  uint32_t trie_size = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                       (uint32_t)blob[3] << 24;
  if (trie_size >= len || trie_size > len - 4 || trie_size % 4 != 0)
    return tolk_fail(err, TOLK_ERR_MALFORMED,
                     "sentencepiece charsmap: trie size %u exceeds the %zu-byte blob", trie_size, len);
  n->n_units = trie_size / 4;
  if (n->n_units == 0) return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece charsmap: empty trie");
  /* The blob sits at an arbitrary offset in the file: copy the units so they
   * are aligned. */
  n->units_store = malloc(trie_size);
  if (!n->units_store) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sentencepiece charsmap: out of memory");
  for (size_t i = 0; i < n->n_units; i++) {
    const uint8_t *u = blob + 4 + 4 * i;
    n->units_store[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
  }
  n->units = n->units_store;
  n->replacements = (const char *)blob + 4 + trie_size;
  n->replacements_len = len - 4 - trie_size;
  /* Every replacement must end inside the blob, so the last byte is a NUL. */
  if (n->replacements_len == 0 || n->replacements[n->replacements_len - 1] != '\0')
    return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece charsmap: strings not NUL-terminated");
  return TOLK_OK;
}

void spm_charsmap_release(struct spm_norm_spec *n) {
  free(n->units_store);
  n->units_store = NULL;
  n->units = NULL;
}

/* darts-clone unit fields. */
static inline bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
static inline uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static inline uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* The longest charsmap rule matching a prefix of s: its length (0: none) and
 * the offset of its replacement. Positions outside the array end the search,
 * so a hostile trie cannot make it read out of bounds. */
static size_t charsmap_longest(const struct spm_norm_spec *n, const char *s, size_t len,
                               uint32_t *value) {
  size_t best = 0;
  size_t pos = 0;
  uint32_t unit = n->units[0];
  pos ^= unit_offset(unit);
  for (size_t i = 0; i < len; i++) {
    uint8_t c = (uint8_t)s[i];
    pos ^= c;
    if (pos >= n->n_units) break;
    unit = n->units[pos];
    if (unit_label(unit) != c) break;
    pos ^= unit_offset(unit);
    if (pos >= n->n_units) break;
    if (unit_has_leaf(unit)) {
      best = i + 1;
      *value = unit_value(n->units[pos]);
    }
  }
  return best;
}

size_t spm_user_defined_prefix(const struct spm_model *m, const char *s, size_t len) {
  if (!m->has_user_defined) return 0;
  size_t best = 0;
  uint32_t node = 0;
  for (size_t i = 0; i < len; i++) {
    int32_t child = spm_trie_child(&m->trie, node, (uint8_t)s[i]);
    if (child < 0) break;
    node = (uint32_t)child;
    int32_t id = m->trie.value[node];
    if (id >= 0 && m->pieces[id].type == SPM_USER_DEFINED) best = i + 1;
  }
  return best;
}

/* One normalisation step: what the prefix of s becomes, and how many input
 * bytes it consumes. */
struct prefix {
  const char *out;
  size_t out_len, consumed;
};

static tolk_status normalize_prefix(const struct spm_model *m, const struct spm_norm_spec *n,
                                    const char *s, size_t len, struct prefix *p, tolk_error *err) {
  size_t ud = spm_user_defined_prefix(m, s, len);
  if (ud) {
    *p = (struct prefix){s, ud, ud};
    return TOLK_OK;
  }
  uint32_t value = 0;
  size_t match = n->units ? charsmap_longest(n, s, len, &value) : 0;
  if (match) {
    if (value >= n->replacements_len)
      return tolk_fail(err, TOLK_ERR_MALFORMED, "sentencepiece charsmap: rule points past its strings");
    const char *r = n->replacements + value;
    *p = (struct prefix){r, strlen(r), match};
    return TOLK_OK;
  }
  size_t mblen;
  if (!spm_utf8_char(s, len, &mblen)) {
    *p = (struct prefix){kReplacement, 3, 1};
  } else {
    *p = (struct prefix){s, mblen, mblen};
  }
  return TOLK_OK;
}

static bool ends_with(const struct spm_buf *b, const char *s, size_t len) {
  return b->len >= len && memcmp(b->data + b->len - len, s, len) == 0;
}

tolk_status spm_normalize_spec(const struct spm_model *m, const struct spm_norm_spec *n,
                               bool treat_ws_as_suffix, const char *text, size_t len,
                               struct spm_buf *out, tolk_error *err) {
  out->len = 0;
  if (!spm_buf_append(out, "", 0)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "normalize: out of memory");
  if (len == 0) return TOLK_OK;
  struct prefix p;
  tolk_status st;
  size_t pos = 0;
  if (n->remove_extra_ws) {
    while (pos < len) {
      if ((st = normalize_prefix(m, n, text + pos, len - pos, &p, err))) return st;
      if (!(p.out_len == 1 && p.out[0] == ' ')) break;
      pos += p.consumed;
    }
  }
  if (pos == len) return TOLK_OK;
  const char *ws = n->escape_ws ? kSpace : " ";
  size_t ws_len = n->escape_ws ? 3 : 1;
  bool ok = true;
  if (!treat_ws_as_suffix && n->add_dummy_prefix) ok = spm_buf_append(out, ws, ws_len);
  bool prev_space = n->remove_extra_ws;
  while (pos < len && ok) {
    if ((st = normalize_prefix(m, n, text + pos, len - pos, &p, err))) return st;
    const char *sp = p.out;
    size_t sp_len = p.out_len;
    while (prev_space && sp_len && sp[0] == ' ') sp++, sp_len--;
    if (sp_len) {
      for (size_t i = 0; i < sp_len && ok; i++)
        ok = sp[i] == ' ' && n->escape_ws ? spm_buf_append(out, kSpace, 3)
                                          : spm_buf_append(out, sp + i, 1);
      prev_space = sp[sp_len - 1] == ' ';
    }
    pos += p.consumed;
    if (!n->remove_extra_ws) prev_space = false;
  }
  if (ok && n->remove_extra_ws) {
    while (ends_with(out, ws, ws_len)) out->len -= ws_len;
    out->data[out->len] = '\0';
  }
  if (ok && treat_ws_as_suffix && n->add_dummy_prefix) ok = spm_buf_append(out, ws, ws_len);
  if (!ok) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "normalize: out of memory or input too large");
  return TOLK_OK;
}

tolk_status spm_normalize(const struct spm_model *m, const char *text, size_t len,
                          struct spm_buf *out, tolk_error *err) {
  return spm_normalize_spec(m, &m->norm, m->treat_ws_as_suffix, text, len, out, err);
}
