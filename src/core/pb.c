/*
 * pb.c — protobuf wire-format primitives (see pb.h).
 */
#include "pb.h"

#include <string.h>

bool pb_varint(struct pb *r, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return false;
    uint8_t b = *r->p++;
    /* The 10th byte may only carry the top bit of a 64-bit value. */
    if (shift == 63 && (b & 0x7e)) return false;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

static uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

bool pb_next(struct pb *r, struct pb_field *f, const char **why) {
  f->offset = pb_offset(r);
  uint64_t key;
  if (!pb_varint(r, &key)) {
    *why = "truncated or overlong field key";
    return false;
  }
  if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) {
    *why = "invalid field number";
    return false;
  }
  f->number = (uint32_t)(key >> 3);
  f->wire = (enum pb_wire)(key & 7);
  f->data = NULL;
  f->len = 0;
  f->u64 = 0;
  size_t left;
  switch (f->wire) {
  case PB_VARINT:
    if (!pb_varint(r, &f->u64)) {
      *why = "truncated varint";
      return false;
    }
    return true;
  case PB_FIXED64:
  case PB_FIXED32: {
    int n = f->wire == PB_FIXED64 ? 8 : 4;
    if ((size_t)(r->end - r->p) < (size_t)n) {
      *why = "truncated fixed-width value";
      return false;
    }
    f->u64 = load_le(r->p, n);
    r->p += n;
    return true;
  }
  case PB_LEN: {
    uint64_t len;
    if (!pb_varint(r, &len)) {
      *why = "truncated length";
      return false;
    }
    left = (size_t)(r->end - r->p);
    if (len > left) {
      *why = "length past end of message";
      return false;
    }
    f->data = r->p;
    f->len = (size_t)len;
    r->p += len;
    return true;
  }
  case PB_SGROUP:
  case PB_EGROUP:
    *why = "group wire type (not used by ONNX)";
    return false;
  default:
    *why = "unknown wire type";
    return false;
  }
}

bool pb_count_varints(const uint8_t *data, size_t len, size_t *count) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (!(data[i] & 0x80)) n++;
  /* The last byte must end a varint, else the payload is truncated. */
  if (len && (data[len - 1] & 0x80)) return false;
  *count = n;
  return true;
}

bool pb_read_varints(const uint8_t *data, size_t len, uint64_t *out, size_t count) {
  struct pb r = {data, data + len, data};
  for (size_t i = 0; i < count; i++)
    if (!pb_varint(&r, &out[i])) return false;
  return pb_eof(&r);
}
