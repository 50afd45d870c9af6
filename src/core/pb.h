/*
 * pb.h — a bounds-checked reader for the protocol buffers wire format.
 *
 * ONNX models and SentencePiece models are protobuf messages. tolk decodes them
 * straight from the (memory-mapped) bytes without generated code: a reader is a
 * window [p, end) over the buffer, and every read checks that the bytes it
 * needs are there before touching them. Length-delimited fields hand out a
 * sub-window that points into the same buffer (zero-copy).
 */
#ifndef TOLK_PB_H
#define TOLK_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pb_wire {
  PB_VARINT = 0,
  PB_FIXED64 = 1,
  PB_LEN = 2,
  PB_SGROUP = 3, /* deprecated groups: rejected */
  PB_EGROUP = 4,
  PB_FIXED32 = 5
};

struct pb {
  const uint8_t *p, *end;
  const uint8_t *base; /* start of the whole buffer, for error offsets */
};

/* One decoded field header plus its payload. */
struct pb_field {
  uint32_t number;
  enum pb_wire wire;
  uint64_t u64;          /* VARINT, FIXED64, FIXED32 payloads */
  const uint8_t *data;   /* LEN payload: points into the buffer */
  size_t len;
  size_t offset;         /* byte offset of the field header from base */
};

static inline struct pb pb_init(const void *data, size_t len) {
  struct pb r = {(const uint8_t *)data, (const uint8_t *)data + len, (const uint8_t *)data};
  return r;
}

/* A reader over a LEN field's payload, keeping the parent's base. */
static inline struct pb pb_sub(const struct pb *parent, const struct pb_field *f) {
  struct pb r = {f->data, f->data + f->len, parent->base};
  return r;
}

static inline bool pb_eof(const struct pb *r) { return r->p >= r->end; }
static inline size_t pb_offset(const struct pb *r) { return (size_t)(r->p - r->base); }

/* Reads a varint (at most 10 bytes). false on truncation or overlong encoding. */
bool pb_varint(struct pb *r, uint64_t *out);

/* Reads the next field. Returns false at a malformed field and sets *why to a
 * static description ("truncated varint", "length past end of message",
 * "field number 0", "group wire type", "unknown wire type 7"). */
bool pb_next(struct pb *r, struct pb_field *f, const char **why);

/* Packed repeated numbers inside a LEN payload. Counts first (so the caller can
 * allocate once with an overflow check), then decodes. The count functions
 * return false when the payload is not a whole number of elements. */
bool pb_count_varints(const uint8_t *data, size_t len, size_t *count);
bool pb_read_varints(const uint8_t *data, size_t len, uint64_t *out, size_t count);

/* Interprets a varint as protobuf int32/int64 (two's complement, 64-bit). */
static inline int64_t pb_i64(uint64_t v) { return (int64_t)v; }
static inline float pb_f32(uint64_t v) {
  union { uint32_t u; float f; } x = {(uint32_t)v};
  return x.f;
}
static inline double pb_f64(uint64_t v) {
  union { uint64_t u; double d; } x = {v};
  return x.d;
}

#endif /* TOLK_PB_H */
