/*
 * spm.h — SentencePiece models: loading (.spm / .model protobuf), the
 * normaliser (precompiled charsmap), unigram and BPE encoding, and decoding
 * pieces back to text — with the reference library's exact behaviour, since a
 * single differing id changes a translation.
 *
 * A model is immutable after loading and safe to use from many threads; each
 * call gets its output buffers from the caller (struct spm_buf).
 */
#ifndef TOLK_SPM_H
#define TOLK_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

enum spm_piece_type {
  SPM_NORMAL = 1,
  SPM_UNKNOWN = 2,
  SPM_CONTROL = 3,
  SPM_USER_DEFINED = 4,
  SPM_UNUSED = 5,
  SPM_BYTE = 6
};

enum spm_model_type { SPM_UNIGRAM = 1, SPM_BPE = 2, SPM_WORD = 3, SPM_CHAR = 4 };

struct spm_model;

/* Upper bounds that make a hostile model file fail cleanly instead of
 * exhausting memory. Real models have at most a few hundred thousand pieces. */
#define SPM_MAX_PIECES (1 << 22)
#define SPM_MAX_FILE_BYTES ((size_t)1 << 30)

/* Parses a SentencePiece ModelProto from `size` bytes (copied: the caller may
 * free `data` afterwards). On success *out is a model freed with
 * spm_model_free(). */
tolk_status spm_model_load(const void *data, size_t size, struct spm_model **out,
                           tolk_error *err);
/* Reads and parses the file at `path`. */
tolk_status spm_model_load_file(const char *path, struct spm_model **out, tolk_error *err);
void spm_model_free(struct spm_model *m);

size_t spm_piece_count(const struct spm_model *m);
/* The piece text of `id` (*len bytes, not NUL-terminated, borrowed), or NULL
 * if out of range. */
const char *spm_id_to_piece(const struct spm_model *m, int id, size_t *len);
enum spm_piece_type spm_piece_type(const struct spm_model *m, int id);
/* As the reference PieceToId: reserved pieces, then normal ones; unk id when
 * the piece is unknown. */
int spm_piece_to_id(const struct spm_model *m, const char *piece, size_t len);
int spm_unk_id(const struct spm_model *m);
enum spm_model_type spm_type(const struct spm_model *m);

/* A growable byte buffer with a hard cap, for outputs. */
struct spm_buf {
  char *data;
  size_t len, cap;
};
void spm_buf_free(struct spm_buf *b);

/* One encoded piece: a slice of the normalised text (in `norm`) and its id. A
 * run of unknown characters is merged into one piece, as the reference does. */
struct spm_piece {
  size_t begin, len; /* byte range in the normalised text */
  int id;
  bool byte_piece;   /* a byte-fallback piece: its text is the model's piece */
};

struct spm_encoding {
  struct spm_buf norm;       /* normalised text the pieces slice */
  struct spm_piece *pieces;
  size_t n_pieces, cap_pieces;
};
void spm_encoding_free(struct spm_encoding *e);

/* Normalises `text` (any bytes: invalid UTF-8 becomes U+FFFD per byte, as the
 * reference does) and encodes it. Output replaces the content of `out`. */
tolk_status spm_encode(const struct spm_model *m, const char *text, size_t len,
                       struct spm_encoding *out, tolk_error *err);

/* The piece text of piece i of an encoding (as the reference's out_type=str
 * gives it: merged unknown runs included). Borrowed from `e` or the model. */
const char *spm_encoding_piece(const struct spm_model *m, const struct spm_encoding *e,
                               size_t i, size_t *len);

/* Normalises only (for tests and `tolk tokenize --normalized`). */
tolk_status spm_normalize(const struct spm_model *m, const char *text, size_t len,
                          struct spm_buf *out, tolk_error *err);

/* Decodes pieces to text as the reference DecodePieces does: control pieces
 * vanish, <unk> becomes the unk surface, byte pieces are reassembled into
 * UTF-8 (invalid sequences become U+FFFD), ▁ becomes a space and the leading
 * dummy-prefix space is dropped. `pieces[i]` has `lens[i]` bytes. */
tolk_status spm_decode_pieces(const struct spm_model *m, const char *const *pieces,
                              const size_t *lens, size_t n, struct spm_buf *out,
                              tolk_error *err);

/* Appends bytes to a buffer; false when out of memory or past 1 GiB. */
bool spm_buf_append(struct spm_buf *b, const void *data, size_t len);

#endif /* TOLK_SPM_H */
