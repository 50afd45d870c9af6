/*
 * spm_internal.h — the SentencePiece model's private layout, shared by the
 * loader (spm_model.c), the normaliser (spm_norm.c), the encoders
 * (spm_encode.c) and the decoder (spm_decode.c).
 */
#ifndef TOLK_SPM_INTERNAL_H
#define TOLK_SPM_INTERNAL_H

#include "spm.h"

struct spm_entry {
  const char *text; /* points into spm_model.bytes */
  size_t len;
  float score;
  enum spm_piece_type type;
};

struct piece_map {
  int *slots;
  size_t mask;
};

/* Byte trie over the pieces the encoder may emit. */
struct spm_trie {
  uint64_t *edge_keys; /* (node << 8 | byte) + 1; 0 = empty */
  uint32_t *edge_child;
  uint32_t edge_mask;
  int32_t *value; /* per node: piece id ending here, or -1 */
  uint32_t n_nodes;
};

/* A normaliser spec with its decoded precompiled charsmap (a darts-clone
 * double array followed by NUL-separated replacement strings). */
struct spm_norm_spec {
  bool present;
  bool add_dummy_prefix, remove_extra_ws, escape_ws;
  const uint8_t *charsmap;
  size_t charsmap_len;
  const uint32_t *units; /* double-array units (copied aligned) */
  size_t n_units;
  const char *replacements;
  size_t replacements_len;
  uint32_t *units_store;
};

struct spm_model {
  uint8_t *bytes; /* the model file (owned copy) */
  size_t size;
  struct spm_entry *pieces;
  size_t n_pieces;
  enum spm_model_type type;
  bool byte_fallback, treat_ws_as_suffix, has_user_defined;
  float min_score, max_score;
  int unk_id;
  int byte_id[256];
  const char *unk_surface;
  size_t unk_surface_len;
  struct piece_map normal;   /* NORMAL, USER_DEFINED, UNUSED */
  struct piece_map reserved; /* CONTROL, UNKNOWN, BYTE */
  struct spm_trie trie;
  struct spm_norm_spec norm, denorm;
};

static inline bool spm_in_trie(enum spm_piece_type t) {
  return t == SPM_NORMAL || t == SPM_USER_DEFINED || t == SPM_UNUSED;
}

int spm_map_find(const struct piece_map *m, const struct spm_model *sm, const char *s,
                 size_t len);
/* Child of `node` along `byte`, or -1. */
int32_t spm_trie_child(const struct spm_trie *t, uint32_t node, uint8_t byte);

/* Validates and decodes the charsmap blob of a spec (no-op without one). */
tolk_status spm_charsmap_init(struct spm_norm_spec *n, tolk_error *err);
void spm_charsmap_release(struct spm_norm_spec *n);

/* Normalises with spec `n` (the model's normaliser or denormaliser). */
tolk_status spm_normalize_spec(const struct spm_model *m, const struct spm_norm_spec *n,
                               bool treat_ws_as_suffix, const char *text, size_t len,
                               struct spm_buf *out, tolk_error *err);

/* Length of the longest user-defined piece that prefixes s[0..len), or 0. */
size_t spm_user_defined_prefix(const struct spm_model *m, const char *s, size_t len);

/* The reference's UTF-8 decoder: the length of the character at s (1 for an
 * invalid byte) and whether it is valid. */
bool spm_utf8_char(const char *s, size_t len, size_t *mblen);

#endif /* TOLK_SPM_INTERNAL_H */
