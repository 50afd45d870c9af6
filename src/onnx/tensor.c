/*
 * tensor.c — TensorProto, SparseTensorProto and TypeProto decoding, and the
 * test-data value messages (SequenceProto, MapProto, OptionalProto).
 *
 * A TensorProto stores its elements in exactly one of: raw_data (little-endian
 * bytes), a typed repeated field (float_data, int32_data, int64_data,
 * double_data, uint64_data, string_data — packed or not, possibly split over
 * several occurrences), or an external file. Decoding is two passes over the
 * message: the first counts (so every allocation is sized from counts
 * checked against the bytes present and against the declared dims, with
 * overflow checks), the second converts. raw_data that is aligned for its
 * dtype is used where it lies in the mapping (zero-copy).
 */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tolk reads ONNX raw_data in place and assumes a little-endian host"
#endif

/* ------------------------------------------------------------------ dtypes */

size_t onnx_dtype_bits(int32_t dtype) {
  switch (dtype) {
  case TOLK_FLOAT: case TOLK_INT32: case TOLK_UINT32: return 32;
  case TOLK_UINT8: case TOLK_INT8: case TOLK_BOOL: return 8;
  case TOLK_UINT16: case TOLK_INT16: case TOLK_FLOAT16: case TOLK_BFLOAT16: return 16;
  case TOLK_INT64: case TOLK_UINT64: case TOLK_DOUBLE: case TOLK_COMPLEX64: return 64;
  case TOLK_COMPLEX128: return 128;
  case TOLK_STRING: return 8 * sizeof(struct ir_bytes);
  case ONNX_FLOAT8E4M3FN: case ONNX_FLOAT8E4M3FNUZ: case ONNX_FLOAT8E5M2:
  case ONNX_FLOAT8E5M2FNUZ: case ONNX_FLOAT8E8M0: return 8;
  case ONNX_UINT4: case ONNX_INT4: case ONNX_FLOAT4E2M1: return 4;
  default: return 0;
  }
}

bool onnx_dtype_nbytes(int32_t dtype, int64_t numel, size_t *out) {
  size_t bits = onnx_dtype_bits(dtype);
  if (!bits || numel < 0 || (uint64_t)numel > SIZE_MAX) return false;
  if (bits == 4) {
    *out = (size_t)(numel / 2 + (numel & 1));
    return true;
  }
  return tolk_mul_size((size_t)numel, bits / 8, out);
}

/* Alignment the executor may assume for data of this dtype. */

static size_t dtype_align(int32_t dtype) {
  size_t bits = onnx_dtype_bits(dtype);
  if (dtype == TOLK_COMPLEX64) return 4;
  if (bits >= 64) return 8;
  return bits >= 8 ? bits / 8 : 1;
}

/* ------------------------------------------------------------------ helpers */

tolk_status onnx_malformed(struct onnx_loader *l, const char *what, size_t offset,
                           const char *why) {
  return tolk_fail(l->err, TOLK_ERR_MALFORMED, "%s at byte %zu: %s", what, offset, why);
}

const char *onnx_str(struct onnx_loader *l, const struct pb_field *f) {
  return tolk_arena_strndup(l->arena, (const char *)f->data, f->len);
}

static struct pb sub_reader(const struct onnx_loader *l, const uint8_t *p, size_t len) {
  struct pb r = {p, p + len, l->base ? l->base : p};
  /* Offsets in messages are relative to the model buffer when the bytes lie
   * inside it, else to this message. */
  if (!l->base || p < l->base || p > l->base + l->size) r.base = p;
  return r;
}

static tolk_status no_memory(struct onnx_loader *l, const char *what) {
  return tolk_fail(l->err, TOLK_ERR_NO_MEMORY, "out of memory for %s", what);
}

/* Element kind of a repeated numeric field. */
enum num_kind { NUM_VARINT, NUM_FIXED32, NUM_FIXED64 };

static enum pb_wire num_wire(enum num_kind k) {
  return k == NUM_VARINT ? PB_VARINT : k == NUM_FIXED32 ? PB_FIXED32 : PB_FIXED64;
}

/* Adds the elements of one occurrence of a repeated numeric field (packed
 * or not) to *count. */
static bool count_numbers(const struct pb_field *f, enum num_kind k, size_t *count,
                          const char **why) {
  size_t n;
  if (f->wire == PB_LEN) {
    if (k == NUM_VARINT) {
      if (!pb_count_varints(f->data, f->len, &n)) {
        *why = "packed varints end mid-value";
        return false;
      }
    } else {
      size_t w = k == NUM_FIXED32 ? 4 : 8;
      if (f->len % w) {
        *why = "packed fixed-width values are not a whole number of elements";
        return false;
      }
      n = f->len / w;
    }
  } else if (f->wire == num_wire(k)) {
    n = 1;
  } else {
    *why = "wrong wire type for a repeated number";
    return false;
  }
  if (!tolk_add_size(*count, n, count)) {
    *why = "element count overflows";
    return false;
  }
  return true;
}

/* Calls sink for each element of one occurrence (counted before, so the
 * decoding cannot fail on well-counted input except on overlong varints). */
static bool each_number(const struct pb_field *f, enum num_kind k,
                        void (*sink)(void *, uint64_t), void *arg) {
  if (f->wire != PB_LEN) {
    sink(arg, f->u64);
    return true;
  }
  const uint8_t *p = f->data, *end = f->data + f->len;
  if (k == NUM_VARINT) {
    struct pb r = {p, end, p};
    while (!pb_eof(&r)) {
      uint64_t v;
      if (!pb_varint(&r, &v)) return false;
      sink(arg, v);
    }
    return true;
  }
  size_t w = k == NUM_FIXED32 ? 4 : 8;
  for (; p + w <= end; p += w) {
    uint64_t v = 0;
    memcpy(&v, p, w);
    sink(arg, v);
  }
  return true;
}

/* Decodes a repeated int64 field (dims and the like) into an arena array;
 * *n receives the count. */
static tolk_status read_int64s(struct onnx_loader *l, const uint8_t *msg, size_t len,
                               uint32_t number, const char *what, int64_t **out, size_t *n) {
  struct pb r = sub_reader(l, msg, len);
  struct pb_field f;
  const char *why;
  size_t count = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, what, f.offset, why);
    if (f.number == number && !count_numbers(&f, NUM_VARINT, &count, &why))
      return onnx_malformed(l, what, f.offset, why);
  }
  *n = count;
  *out = NULL;
  if (!count) return TOLK_OK;
  int64_t *a = tolk_arena_array(l->arena, count, sizeof *a);
  if (!a) return no_memory(l, what);
  r = sub_reader(l, msg, len);
  size_t k = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, what, f.offset, why);
    if (f.number != number) continue;
    if (f.wire != PB_LEN) {
      a[k++] = pb_i64(f.u64);
      continue;
    }
    struct pb in = {f.data, f.data + f.len, r.base};
    while (!pb_eof(&in)) {
      uint64_t v;
      if (!pb_varint(&in, &v)) return onnx_malformed(l, what, pb_offset(&in), "bad varint");
      a[k++] = pb_i64(v);
    }
  }
  *out = a;
  return TOLK_OK;
}

/* ------------------------------------------------------------------ TensorProto */

enum {
  TF_DIMS = 1, TF_DATA_TYPE = 2, TF_SEGMENT = 3, TF_FLOAT = 4, TF_INT32 = 5,
  TF_STRING = 6, TF_INT64 = 7, TF_NAME = 8, TF_RAW = 9, TF_DOUBLE = 10,
  TF_UINT64 = 11, TF_DOC = 12, TF_EXTERNAL = 13, TF_LOCATION = 14
};

struct tensor_scan {
  size_t counts[12]; /* elements per typed field number (4..11) */
  const uint8_t *raw;
  size_t raw_len;
  bool has_raw, has_segment, has_type;
  size_t n_external;
  int64_t location;
};

/* The typed field a dtype's elements may be stored in, and how many stored
 * values `numel` elements take. */
static int typed_field(int32_t dtype) {
  switch (dtype) {
  case TOLK_FLOAT: case TOLK_COMPLEX64: return TF_FLOAT;
  case TOLK_DOUBLE: case TOLK_COMPLEX128: return TF_DOUBLE;
  case TOLK_INT64: return TF_INT64;
  case TOLK_UINT32: case TOLK_UINT64: return TF_UINT64;
  case TOLK_STRING: return TF_STRING;
  case TOLK_UNDEFINED: return 0;
  default: return onnx_dtype_bits(dtype) ? TF_INT32 : 0;
  }
}

static const char *field_name(int f) {
  switch (f) {
  case TF_FLOAT: return "float_data";
  case TF_INT32: return "int32_data";
  case TF_STRING: return "string_data";
  case TF_INT64: return "int64_data";
  case TF_DOUBLE: return "double_data";
  case TF_UINT64: return "uint64_data";
  default: return "?";
  }
}

static size_t stored_values(int32_t dtype, size_t numel) {
  if (dtype == TOLK_COMPLEX64 || dtype == TOLK_COMPLEX128) return numel * 2; /* checked by caller */
  if (onnx_dtype_bits(dtype) == 4) return numel / 2 + (numel & 1);
  return numel;
}

struct store {
  uint8_t *dst;
  size_t width, k;
  bool boolean;
};

static void store_value(void *arg, uint64_t v) {
  struct store *s = arg;
  if (s->boolean) v = v != 0;
  memcpy(s->dst + s->k * s->width, &v, s->width); /* low bytes: little-endian */
  s->k++;
}

static void dims_str(const struct ir_tensor *t, char *buf, size_t size) {
  size_t o = 0;
  o += (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < t->rank && o < size; i++)
    o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  if (o < size) snprintf(buf + o, size - o, "]");
}

static tolk_status parse_external(struct onnx_loader *l, struct ir_tensor *t, const uint8_t *msg,
                                  size_t len);

/* First pass: validates wire types and counts what each field holds. */
static tolk_status scan_tensor(struct onnx_loader *l, const uint8_t *p, size_t len,
                               struct ir_tensor *t, struct tensor_scan *s) {
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorProto", f.offset, why);
    switch (f.number) {
    case TF_DATA_TYPE:
    case TF_LOCATION:
      if (f.wire != PB_VARINT)
        return onnx_malformed(l, "TensorProto", f.offset, "data_type/data_location is not a varint");
      if (f.number == TF_DATA_TYPE) {
        t->dtype = (int32_t)pb_i64(f.u64);
        if ((int64_t)t->dtype != pb_i64(f.u64)) t->dtype = -1;
        s->has_type = true;
      } else {
        s->location = pb_i64(f.u64);
      }
      break;
    case TF_SEGMENT: s->has_segment = true; break;
    case TF_FLOAT: case TF_INT32: case TF_INT64: case TF_DOUBLE: case TF_UINT64: {
      enum num_kind k = f.number == TF_FLOAT ? NUM_FIXED32
                        : f.number == TF_DOUBLE ? NUM_FIXED64 : NUM_VARINT;
      if (!count_numbers(&f, k, &s->counts[f.number], &why))
        return onnx_malformed(l, field_name((int)f.number), f.offset, why);
      break;
    }
    case TF_STRING:
    case TF_NAME:
    case TF_RAW:
    case TF_DOC:
    case TF_EXTERNAL:
      if (f.wire != PB_LEN)
        return onnx_malformed(l, "TensorProto", f.offset, "expected a length-delimited field");
      if (f.number == TF_STRING) s->counts[TF_STRING]++;
      else if (f.number == TF_NAME) { if (!(t->name = onnx_str(l, &f))) return no_memory(l, "name"); }
      else if (f.number == TF_DOC) { if (!(t->doc = onnx_str(l, &f))) return no_memory(l, "doc"); }
      else if (f.number == TF_RAW) { s->raw = f.data; s->raw_len = f.len; s->has_raw = true; }
      else s->n_external++;
      break;
    default:
      break; /* unknown fields (metadata_props, newer additions) are skipped */
    }
  }
  return TOLK_OK;
}

/* Second pass for typed fields: converts the stored values into `dst`. */
static tolk_status fill_typed(struct onnx_loader *l, const uint8_t *p, size_t len, int field,
                              int32_t dtype, uint8_t *dst) {
  struct store st = {dst, 0, 0, dtype == TOLK_BOOL};
  enum num_kind k = NUM_VARINT;
  if (field == TF_FLOAT) { st.width = 4; k = NUM_FIXED32; }
  else if (field == TF_DOUBLE) { st.width = 8; k = NUM_FIXED64; }
  else if (field == TF_INT64) st.width = 8;
  else { size_t b = onnx_dtype_bits(dtype); st.width = b < 8 ? 1 : b / 8; }
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorProto", f.offset, why);
    if ((int)f.number == field && !each_number(&f, k, store_value, &st))
      return onnx_malformed(l, field_name(field), f.offset, "bad varint");
  }
  return TOLK_OK;
}

static tolk_status fill_strings(struct onnx_loader *l, const uint8_t *p, size_t len,
                                struct ir_bytes *out) {
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  size_t k = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorProto", f.offset, why);
    if (f.number != TF_STRING) continue;
    out[k].len = f.len;
    if (l->copy) {
      uint8_t *c = tolk_arena_alloc(l->arena, f.len ? f.len : 1);
      if (!c) return no_memory(l, "string_data");
      if (f.len) memcpy(c, f.data, f.len);
      out[k].data = c;
    } else {
      out[k].data = f.data;
    }
    k++;
  }
  return TOLK_OK;
}

tolk_status onnx_tensor_proto(struct onnx_loader *l, const uint8_t *p, size_t len,
                              struct ir_tensor **out) {
  *out = NULL;
  struct ir_tensor *t = tolk_arena_alloc(l->arena, sizeof *t);
  if (!t) return no_memory(l, "tensor");
  t->ext_offset = t->ext_length = -1;
  struct tensor_scan s = {0};
  tolk_status st = scan_tensor(l, p, len, t, &s);
  if (st) return st;
  const char *nm = t->name ? t->name : "";
  if (!t->name) t->name = "";

  size_t rank;
  st = read_int64s(l, p, len, TF_DIMS, "TensorProto dims", &t->dims, &rank);
  if (st) return st;
  if (rank > IR_MAX_RANK)
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "tensor '%s' has rank %zu; tolk supports up to %d",
                     nm, rank, IR_MAX_RANK);
  t->rank = (int)rank;
  int64_t numel = 1;
  for (size_t i = 0; i < rank; i++) {
    if (t->dims[i] < 0)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': dim %zu is negative (%lld)", nm,
                       i, (long long)t->dims[i]);
    if (!tolk_mul_i64(numel, t->dims[i], &numel))
      return tolk_fail(l->err, TOLK_ERR_LIMIT, "tensor '%s': the product of its dims overflows", nm);
  }
  t->numel = numel;
  if (!s.has_type || t->dtype == TOLK_UNDEFINED)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s' has no data_type", nm);
  if (!onnx_dtype_bits(t->dtype))
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "tensor '%s' has unknown data_type %d", nm,
                     (int)t->dtype);
  if (s.has_segment)
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "tensor '%s' is a segment of a larger tensor", nm);
  if (!onnx_dtype_nbytes(t->dtype, numel, &t->nbytes))
    return tolk_fail(l->err, TOLK_ERR_LIMIT, "tensor '%s': %lld elements of %s overflow the byte size",
                     nm, (long long)numel, tolk_dtype_name((tolk_dtype)t->dtype));
  char dbuf[160];

  /* Which storage is used: exactly one of raw, one typed field, external. */
  static const int typed_fields[] = {TF_FLOAT, TF_INT32, TF_INT64, TF_DOUBLE, TF_UINT64, TF_STRING};
  int typed = 0, n_forms = s.has_raw ? 1 : 0;
  for (size_t i = 0; i < sizeof typed_fields / sizeof typed_fields[0]; i++) {
    if (s.counts[typed_fields[i]]) {
      if (typed_fields[i] != TF_STRING) typed = typed_fields[i];
      n_forms++;
    }
  }
  bool external = s.location == 1;
  if (s.location != 0 && s.location != 1)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': unknown data_location %lld", nm,
                     (long long)s.location);
  if (s.n_external && !external)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s' has external_data entries but data_location is not EXTERNAL", nm);
  if (external) n_forms++;
  if (n_forms > 1)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s' stores its data in more than one form (raw_data, %s, external)", nm,
                     typed ? field_name(typed) : "typed fields");

  if (external) {
    if (t->dtype == TOLK_STRING)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': strings cannot be external", nm);
    t->location = IR_DATA_EXTERNAL;
    st = parse_external(l, t, p, len);
    if (st) return st;
    *out = t;
    if (!l->params.load_external_data) return TOLK_OK;
    st = onnx_external_resolve(l, t);
    if (st) *out = NULL;
    return st;
  }

  if (s.has_raw) {
    if (t->dtype == TOLK_STRING)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': strings cannot be in raw_data", nm);
    if (s.raw_len != t->nbytes) {
      dims_str(t, dbuf, sizeof dbuf);
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                       "tensor '%s': raw_data has %zu bytes, dims %s of %s need %zu", nm, s.raw_len,
                       dbuf, tolk_dtype_name((tolk_dtype)t->dtype), t->nbytes);
    }
    if (!t->nbytes) {
      *out = t;
      return TOLK_OK;
    }
    bool aligned = ((uintptr_t)s.raw % dtype_align(t->dtype)) == 0;
    if (!l->copy && (aligned || l->borrow_misaligned)) {
      t->data = s.raw;
      t->zero_copy = true;
      t->file_pages = l->file_mapped;
      t->misaligned = !aligned;
    } else {
      uint8_t *d = tolk_arena_alloc(l->arena, t->nbytes);
      if (!d) return no_memory(l, "tensor data");
      memcpy(d, s.raw, t->nbytes);
      t->data = d;
      /* The copy's source pages would otherwise stay resident beside it. */
      if (l->file_mapped) tolk_drop_mapped_pages(s.raw, t->nbytes);
    }
    *out = t;
    return TOLK_OK;
  }

  size_t have = typed ? s.counts[typed] : s.counts[TF_STRING];
  int want_field = typed_field(t->dtype);
  if (t->dtype == TOLK_STRING) {
    if (typed)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': %s given for a string tensor",
                       nm, field_name(typed));
  } else if (s.counts[TF_STRING]) {
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': string_data given for a %s tensor",
                     nm, tolk_dtype_name((tolk_dtype)t->dtype));
  } else if (typed && typed != want_field) {
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': %s given for a %s tensor", nm,
                     field_name(typed), tolk_dtype_name((tolk_dtype)t->dtype));
  }
  size_t need = stored_values(t->dtype, (size_t)numel);
  if (have != need) {
    dims_str(t, dbuf, sizeof dbuf);
    if (!have && numel)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': dims %s of %s but no data", nm,
                       dbuf, tolk_dtype_name((tolk_dtype)t->dtype));
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': %s has %zu values, dims %s of %s need %zu",
                     nm, field_name(want_field), have, dbuf, tolk_dtype_name((tolk_dtype)t->dtype), need);
  }
  if (!numel) {
    *out = t;
    return TOLK_OK;
  }
  uint8_t *d = tolk_arena_alloc(l->arena, t->nbytes);
  if (!d) return no_memory(l, "tensor data");
  st = t->dtype == TOLK_STRING ? fill_strings(l, p, len, (struct ir_bytes *)(void *)d)
                               : fill_typed(l, p, len, want_field, t->dtype, d);
  if (st) return st;
  t->data = d;
  *out = t;
  return TOLK_OK;
}

/* ---------------------------------------------------------------- external keys */

/* A non-negative decimal integer, digits only. */
static bool parse_u63(const uint8_t *s, size_t n, int64_t *out) {
  if (!n || n > 19) return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (INT64_MAX - (s[i] - '0')) / 10) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

static tolk_status parse_external(struct onnx_loader *l, struct ir_tensor *t, const uint8_t *msg,
                                  size_t len) {
  struct pb r = sub_reader(l, msg, len);
  struct pb_field f, kv;
  const char *why;
  const char *nm = t->name;
  bool seen_off = false, seen_len = false;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorProto", f.offset, why);
    if (f.number != TF_EXTERNAL) continue;
    struct pb e = pb_sub(&r, &f);
    const uint8_t *key = NULL, *val = NULL;
    size_t klen = 0, vlen = 0;
    while (!pb_eof(&e)) {
      if (!pb_next(&e, &kv, &why)) return onnx_malformed(l, "external_data entry", kv.offset, why);
      if (kv.number != 1 && kv.number != 2) continue;
      if (kv.wire != PB_LEN)
        return onnx_malformed(l, "external_data entry", kv.offset, "key/value is not a string");
      if (kv.number == 1) { key = kv.data; klen = kv.len; }
      else { val = kv.data; vlen = kv.len; }
    }
    if (!val) { val = (const uint8_t *)""; vlen = 0; }
#define KEY_IS(s) (key && klen == sizeof(s) - 1 && !memcmp(key, s, klen))
    if (KEY_IS("location")) {
      if (t->ext_location)
        return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': external_data gives location twice", nm);
      if (memchr(val, 0, vlen))
        return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': external location contains a NUL byte", nm);
      t->ext_location = tolk_arena_strndup(l->arena, (const char *)val, vlen);
      if (!t->ext_location) return no_memory(l, "location");
    } else if (KEY_IS("offset") || KEY_IS("length")) {
      bool is_off = key[0] == 'o';
      if (is_off ? seen_off : seen_len)
        return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': external_data gives %s twice", nm,
                         is_off ? "offset" : "length");
      int64_t v;
      if (!parse_u63(val, vlen, &v))
        return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                         "tensor '%s': external %s '%.*s' is not a non-negative integer", nm,
                         is_off ? "offset" : "length", (int)(vlen > 40 ? 40 : vlen), (const char *)val);
      if (is_off) { t->ext_offset = v; seen_off = true; }
      else { t->ext_length = v; seen_len = true; }
    } else if (KEY_IS("checksum")) {
      /* Recorded by some writers; tolk does not verify it. */
    } else {
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': unknown external_data key '%.*s'", nm,
                       (int)(klen > 40 ? 40 : klen), key ? (const char *)key : "");
    }
#undef KEY_IS
  }
  if (!t->ext_location || !t->ext_location[0])
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "tensor '%s': external data without a location", nm);
  if (t->ext_length >= 0 && (uint64_t)t->ext_length != (uint64_t)t->nbytes)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s': external length %lld but dims and dtype need %zu bytes", nm,
                     (long long)t->ext_length, t->nbytes);
  return TOLK_OK;
}

/* ---------------------------------------------------------------- sparse */

tolk_status onnx_sparse_tensor_proto(struct onnx_loader *l, const uint8_t *p, size_t len,
                                     struct ir_tensor **out) {
  *out = NULL;
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  struct ir_tensor *values = NULL, *indices = NULL;
  tolk_status st;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "SparseTensorProto", f.offset, why);
    if (f.number == 1 || f.number == 2) {
      if (f.wire != PB_LEN)
        return onnx_malformed(l, "SparseTensorProto", f.offset, "values/indices is not a message");
      st = onnx_tensor_proto(l, f.data, f.len, f.number == 1 ? &values : &indices);
      if (st) return st;
    }
  }
  if (!values || !indices)
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "sparse tensor without values or indices");
  const char *nm = values->name;
  int64_t *dims;
  size_t rank;
  st = read_int64s(l, p, len, 3, "SparseTensorProto dims", &dims, &rank);
  if (st) return st;
  if (rank > IR_MAX_RANK)
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "sparse tensor '%s' has rank %zu", nm, rank);
  int64_t numel = 1;
  for (size_t i = 0; i < rank; i++) {
    if (dims[i] < 0 || !tolk_mul_i64(numel, dims[i], &numel))
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "sparse tensor '%s': bad dims", nm);
  }
  size_t bits = onnx_dtype_bits(values->dtype), nbytes;
  if (bits < 8 || !onnx_dtype_nbytes(values->dtype, numel, &nbytes))
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "sparse tensor '%s': unsupported dtype or size", nm);
  if (nbytes > ONNX_SPARSE_DENSE_MAX)
    return tolk_fail(l->err, TOLK_ERR_LIMIT, "sparse tensor '%s' densifies to %zu bytes (limit %zu)",
                     nm, nbytes, ONNX_SPARSE_DENSE_MAX);
  int64_t nnz = values->rank == 1 ? values->dims[0] : -1;
  if (nnz < 0 || indices->dtype != TOLK_INT64 ||
      !((indices->rank == 1 && indices->dims[0] == nnz) ||
        (indices->rank == 2 && indices->dims[0] == nnz && indices->dims[1] == (int64_t)rank)))
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL,
                     "sparse tensor '%s': values must be [NNZ] and indices int64 [NNZ] or [NNZ, rank]", nm);
  if (nnz && (!values->data || !indices->data))
    return tolk_fail(l->err, TOLK_ERR_UNSUPPORTED, "sparse tensor '%s': external data not loaded", nm);
  struct ir_tensor *t = tolk_arena_alloc(l->arena, sizeof *t);
  uint8_t *d = nbytes ? tolk_arena_alloc(l->arena, nbytes) : NULL;
  if (!t || (nbytes && !d)) return no_memory(l, "sparse tensor");
  *t = *values;
  t->rank = (int)rank;
  t->dims = dims;
  t->numel = numel;
  t->nbytes = nbytes;
  t->zero_copy = false;
  t->file_pages = false;
  t->location = IR_DATA_INLINE;
  size_t es = bits / 8;
  const int64_t *ix = indices->data;
  for (int64_t k = 0; k < nnz; k++) {
    int64_t lin = 0;
    if (indices->rank == 1) {
      lin = ix[k];
      if (lin < 0 || lin >= numel) lin = -1;
    } else {
      for (size_t a = 0; a < rank && lin >= 0; a++) {
        int64_t c = ix[(size_t)k * rank + a];
        lin = (c < 0 || c >= dims[a]) ? -1 : lin * dims[a] + c;
      }
    }
    if (lin < 0)
      return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "sparse tensor '%s': index %lld out of range", nm,
                       (long long)k);
    memcpy(d + (size_t)lin * es, (const uint8_t *)values->data + (size_t)k * es, es);
  }
  t->data = d;
  *out = t;
  return TOLK_OK;
}

/* ---------------------------------------------------------------- TypeProto */

static tolk_status read_shape(struct onnx_loader *l, const uint8_t *p, size_t len, struct ir_type *t) {
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  size_t n = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorShapeProto", f.offset, why);
    if (f.number == 1) {
      if (f.wire != PB_LEN) return onnx_malformed(l, "TensorShapeProto", f.offset, "dim is not a message");
      n++;
    }
  }
  if (n > INT32_MAX) return tolk_fail(l->err, TOLK_ERR_LIMIT, "shape with %zu dims", n);
  t->rank = (int)n;
  t->dims = n ? tolk_arena_array(l->arena, n, sizeof *t->dims) : NULL;
  if (n && !t->dims) return no_memory(l, "shape");
  r = sub_reader(l, p, len);
  size_t k = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TensorShapeProto", f.offset, why);
    if (f.number != 1) continue;
    struct ir_dim *d = &t->dims[k++];
    d->value = -1;
    struct pb dr = pb_sub(&r, &f);
    struct pb_field g;
    while (!pb_eof(&dr)) {
      if (!pb_next(&dr, &g, &why)) return onnx_malformed(l, "Dimension", g.offset, why);
      if (g.number == 1 && g.wire == PB_VARINT) {
        d->value = pb_i64(g.u64) >= 0 ? pb_i64(g.u64) : -1;
        d->param = NULL;
      } else if (g.number == 2 && g.wire == PB_LEN) {
        if (!(d->param = onnx_str(l, &g))) return no_memory(l, "dim_param");
        d->value = -1;
      } else if (g.number == 1 || g.number == 2) {
        return onnx_malformed(l, "Dimension", g.offset, "wrong wire type");
      }
    }
  }
  return TOLK_OK;
}

tolk_status onnx_type_proto(struct onnx_loader *l, const uint8_t *p, size_t len, struct ir_type *t) {
  memset(t, 0, sizeof *t);
  t->rank = -1;
  for (int level = 0;; level++) {
    if (level > ONNX_TYPE_DEPTH_MAX)
      return tolk_fail(l->err, TOLK_ERR_LIMIT, "type nested deeper than %d levels", ONNX_TYPE_DEPTH_MAX);
    struct pb r = sub_reader(l, p, len);
    struct pb_field f, which = {0};
    const char *why;
    while (!pb_eof(&r)) {
      if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "TypeProto", f.offset, why);
      if (f.number == 1 || f.number == 4 || f.number == 5 || f.number == 8 || f.number == 9) {
        if (f.wire != PB_LEN) return onnx_malformed(l, "TypeProto", f.offset, "type is not a message");
        which = f;
      }
    }
    enum ir_type_kind kind = which.number == 1   ? IR_TYPE_TENSOR
                             : which.number == 8 ? IR_TYPE_SPARSE_TENSOR
                             : which.number == 4 ? IR_TYPE_SEQUENCE
                             : which.number == 5 ? IR_TYPE_MAP
                             : which.number == 9 ? IR_TYPE_OPTIONAL
                                                 : IR_TYPE_NONE;
    if (level == 0) t->kind = kind;
    else if (level == 1) t->elem_kind = kind;
    if (kind == IR_TYPE_NONE) return TOLK_OK;
    /* Tensor and SparseTensor: elem_type = 1, shape = 2. Sequence and
     * Optional: elem_type = 1 (a TypeProto). Map: value_type = 2. */
    struct pb in = pb_sub(&r, &which);
    const uint8_t *next = NULL;
    size_t next_len = 0;
    while (!pb_eof(&in)) {
      if (!pb_next(&in, &f, &why)) return onnx_malformed(l, "TypeProto", f.offset, why);
      if (kind == IR_TYPE_TENSOR || kind == IR_TYPE_SPARSE_TENSOR) {
        if (f.number == 1 && f.wire == PB_VARINT) {
          t->dtype = (int32_t)f.u64;
        } else if (f.number == 2 && f.wire == PB_LEN) {
          tolk_status st = read_shape(l, f.data, f.len, t);
          if (st) return st;
        } else if (f.number == 1 || f.number == 2) {
          return onnx_malformed(l, "TypeProto.Tensor", f.offset, "wrong wire type");
        }
      } else if ((f.number == 1 && kind != IR_TYPE_MAP) || (f.number == 2 && kind == IR_TYPE_MAP)) {
        if (f.wire != PB_LEN) return onnx_malformed(l, "TypeProto", f.offset, "element type is not a message");
        next = f.data;
        next_len = f.len;
      }
    }
    if (kind == IR_TYPE_TENSOR || kind == IR_TYPE_SPARSE_TENSOR || !next) return TOLK_OK;
    p = next;
    len = next_len;
  }
}

/* ---------------------------------------------------------------- test-data values */

static tolk_status decode_value(struct onnx_loader *l, const uint8_t *p, size_t len,
                                enum onnx_value_kind kind, int depth, struct onnx_value **out);

static tolk_status seq_or_opt(struct onnx_loader *l, const uint8_t *p, size_t len,
                              struct onnx_value *v, int depth) {
  bool seq = v->kind == ONNX_VALUE_SEQUENCE;
  struct pb r = sub_reader(l, p, len);
  struct pb_field f;
  const char *why;
  size_t n = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, seq ? "SequenceProto" : "OptionalProto", f.offset, why);
    if (f.number >= 3 && f.number <= 7) {
      if (f.wire != PB_LEN) return onnx_malformed(l, "SequenceProto", f.offset, "element is not a message");
      n++;
    } else if (f.number == 1 && f.wire == PB_LEN) {
      if (!(v->name = onnx_str(l, &f))) return no_memory(l, "name");
    }
  }
  if (!seq && n > 1) return tolk_fail(l->err, TOLK_ERR_MALFORMED, "OptionalProto with %zu values", n);
  v->items = n ? tolk_arena_array(l->arena, n, sizeof *v->items) : NULL;
  if (n && !v->items) return no_memory(l, "sequence");
  r = sub_reader(l, p, len);
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "SequenceProto", f.offset, why);
    if (f.number < 3 || f.number > 7) continue;
    enum onnx_value_kind k = (enum onnx_value_kind)(f.number - 2);
    tolk_status st = decode_value(l, f.data, f.len, k, depth + 1, &v->items[v->n_items]);
    if (st) return st;
    v->n_items++;
  }
  return TOLK_OK;
}

static tolk_status decode_value(struct onnx_loader *l, const uint8_t *p, size_t len,
                                enum onnx_value_kind kind, int depth, struct onnx_value **out) {
  if (depth > ONNX_TYPE_DEPTH_MAX)
    return tolk_fail(l->err, TOLK_ERR_LIMIT, "value nested deeper than %d levels", ONNX_TYPE_DEPTH_MAX);
  struct onnx_value *v = tolk_arena_alloc(l->arena, sizeof *v);
  if (!v) return no_memory(l, "value");
  v->kind = kind;
  tolk_status st = TOLK_OK;
  switch (kind) {
  case ONNX_VALUE_TENSOR:
    st = onnx_tensor_proto(l, p, len, &v->tensor);
    if (!st) v->name = v->tensor->name;
    break;
  case ONNX_VALUE_SPARSE_TENSOR:
    st = onnx_sparse_tensor_proto(l, p, len, &v->tensor);
    if (!st) v->name = v->tensor->name;
    break;
  case ONNX_VALUE_SEQUENCE:
  case ONNX_VALUE_OPTIONAL:
    st = seq_or_opt(l, p, len, v, depth);
    break;
  case ONNX_VALUE_MAP: {
    struct pb r = sub_reader(l, p, len);
    struct pb_field f;
    const char *why;
    int64_t *keys = NULL;
    size_t n_keys = 0, n_str = 0;
    st = read_int64s(l, p, len, 3, "MapProto keys", &keys, &n_keys);
    if (st) return st;
    while (!pb_eof(&r)) {
      if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "MapProto", f.offset, why);
      if (f.number == 4 && f.wire == PB_LEN) n_str++;
      if (f.number == 5 && f.wire == PB_LEN) {
        st = decode_value(l, f.data, f.len, ONNX_VALUE_SEQUENCE, depth + 1, &v->values);
        if (st) return st;
      }
    }
    struct ir_tensor *k = tolk_arena_alloc(l->arena, sizeof *k);
    int64_t *kd = tolk_arena_alloc(l->arena, sizeof *kd);
    if (!k || !kd) return no_memory(l, "map");
    k->name = "";
    k->rank = 1;
    k->dims = kd;
    if (n_str) {
      struct ir_bytes *sb = tolk_arena_array(l->arena, n_str, sizeof *sb);
      if (!sb) return no_memory(l, "map keys");
      size_t i = 0;
      r = sub_reader(l, p, len);
      while (!pb_eof(&r) && pb_next(&r, &f, &why)) {
        if (f.number != 4 || f.wire != PB_LEN) continue;
        uint8_t *c = tolk_arena_alloc(l->arena, f.len ? f.len : 1);
        if (!c) return no_memory(l, "map keys");
        if (f.len) memcpy(c, f.data, f.len);
        sb[i].data = c;
        sb[i++].len = f.len;
      }
      k->dtype = TOLK_STRING;
      k->data = sb;
      k->numel = kd[0] = (int64_t)n_str;
      k->nbytes = n_str * sizeof *sb;
    } else {
      k->dtype = TOLK_INT64;
      k->data = keys;
      k->numel = kd[0] = (int64_t)n_keys;
      k->nbytes = n_keys * sizeof *keys;
    }
    v->keys = k;
    break;
  }
  }
  if (st) return st;
  *out = v;
  return TOLK_OK;
}

tolk_status onnx_value_decode(const uint8_t *buf, size_t len, enum onnx_value_kind kind,
                              struct tolk_arena *arena, struct onnx_value **out, tolk_error *err) {
  *out = NULL;
  struct onnx_loader l = {0};
  l.arena = arena;
  l.base = buf;
  l.size = len;
  l.copy = true;
  l.params = tolk_model_default_params();
  l.params.load_external_data = 0;
  l.err = err;
  tolk_status st = decode_value(&l, buf, len, kind, 0, out);
  if (st) return st;
  /* External data needs a model folder; a lone value file has none. */
  if ((*out)->tensor && (*out)->tensor->location == IR_DATA_EXTERNAL) {
    *out = NULL;
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "external data in a standalone tensor file");
  }
  return TOLK_OK;
}

tolk_status onnx_tensor_decode(const uint8_t *buf, size_t len, struct tolk_arena *arena,
                               struct ir_tensor **out, tolk_error *err) {
  *out = NULL;
  struct onnx_value *v;
  tolk_status st = onnx_value_decode(buf, len, ONNX_VALUE_TENSOR, arena, &v, err);
  if (st) return st;
  *out = v->tensor;
  return TOLK_OK;
}

/* Maps (or reads, for empty files) `path` and hands the bytes to fn. */
static tolk_status with_file(const char *path, tolk_error *err,
                             tolk_status (*fn)(const uint8_t *, size_t, void *), void *arg) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return tolk_fail(err, TOLK_ERR_IO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_IO, "%s: not a regular file", path);
  }
  size_t n = (size_t)sb.st_size;
  const uint8_t *p = (const uint8_t *)"";
  void *map = NULL;
  if (n) {
    map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      close(fd);
      return tolk_fail(err, TOLK_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    }
    p = map;
  }
  close(fd);
  tolk_status st = fn(p, n, arg);
  if (map) munmap(map, n);
  if (st) tolk_error_prefix(err, "%s", path);
  return st;
}

struct tensor_file_args {
  struct tolk_arena *arena;
  struct ir_tensor **out;
  tolk_error *err;
};

static tolk_status tensor_file_fn(const uint8_t *p, size_t n, void *arg) {
  struct tensor_file_args *a = arg;
  return onnx_tensor_decode(p, n, a->arena, a->out, a->err);
}

tolk_status onnx_tensor_load_file(const char *path, struct tolk_arena *arena,
                                  struct ir_tensor **out, tolk_error *err) {
  *out = NULL;
  struct tensor_file_args a = {arena, out, err};
  return with_file(path, err, tensor_file_fn, &a);
}
