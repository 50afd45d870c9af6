/*
 * pbw.h — a writer for the protocol buffers wire format, the counterpart of
 * pb.h, for tools that write models (a quantizer rewriting a ModelProto).
 *
 * The buffer grows up to a hard limit given at init. Errors are sticky: after
 * an allocation failure or the limit, every later write does nothing and
 * pbw_status() reports the first problem, so a writer checks once at the
 * end instead of after each field. Nested messages are written in place:
 * pbw_begin() notes where the message starts, pbw_end() inserts its length in
 * front (moving only that message's bytes), so lengths are always minimal
 * varints and a message copied field by field comes out byte for byte.
 */
#ifndef TOLK_PBW_H
#define TOLK_PBW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "pb.h"

struct pbw {
  uint8_t *p;
  size_t n, cap;
  size_t limit;       /* bytes the buffer may hold */
  tolk_status status; /* TOLK_OK until a write fails */
};

/* An empty buffer holding at most `limit` bytes. */
void pbw_init(struct pbw *b, size_t limit);
/* Frees the bytes; the buffer is empty (and usable) again. */
void pbw_release(struct pbw *b);
/* TOLK_OK, or the first failure (TOLK_ERR_NO_MEMORY, TOLK_ERR_LIMIT) with
 * a message naming what was being written. */
tolk_status pbw_status(const struct pbw *b, const char *what, tolk_error *err);

void pbw_raw(struct pbw *b, const void *data, size_t len);
void pbw_varint(struct pbw *b, uint64_t v);
void pbw_key(struct pbw *b, uint32_t field, enum pb_wire wire);

/* field = v as a varint (int32/int64 values as their 64-bit two's
 * complement, as protobuf does). */
void pbw_uint(struct pbw *b, uint32_t field, uint64_t v);
static inline void pbw_int(struct pbw *b, uint32_t field, int64_t v) { pbw_uint(b, field, (uint64_t)v); }
void pbw_fixed32(struct pbw *b, uint32_t field, uint32_t v);
void pbw_fixed64(struct pbw *b, uint32_t field, uint64_t v);
void pbw_float(struct pbw *b, uint32_t field, float v);
/* A LEN field: bytes, a string (without its NUL), a packed array. */
void pbw_bytes(struct pbw *b, uint32_t field, const void *data, size_t len);
void pbw_string(struct pbw *b, uint32_t field, const char *s);

/* Copies a field as it was read: [start, end) are its bytes, key included
 * (base + f.offset up to the reader's position after pb_next). Fields a
 * writer does not know travel through this unchanged. */
void pbw_copy(struct pbw *b, const uint8_t *start, const uint8_t *end);

/* A nested message: pbw_begin writes the key and returns a mark;
 * pbw_end(mark) puts the message's length in front of its bytes. Marks
 * nest like parentheses. */
size_t pbw_begin(struct pbw *b, uint32_t field);
void pbw_end(struct pbw *b, size_t mark);

/* Writes `len` bytes to `path` so that the file is either complete or
 * absent (its previous content kept): a temporary file in the same folder,
 * written (mode 0644), fsynced, renamed over `path`, and the folder fsynced. On failure
 * the temporary file is removed and err names the path and the step. */
tolk_status tolk_write_file_atomic(const char *path, const void *data, size_t len, tolk_error *err);

#endif /* TOLK_PBW_H */
