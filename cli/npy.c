/*
 * npy.c — the .npy reader and writer (see npy.h). The header is a Python
 * dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * which we parse just far enough: the three keys, a quoted string, a
 * boolean and a tuple of non-negative integers.
 */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records a failure in err (may be NULL) as the library does; returns st. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static tolk_status npy_fail(tolk_error *err, tolk_status st, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->status = st;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return st;
}

static const struct {
  const char *descr; /* without the byte-order character */
  tolk_dtype dtype;
} kinds[] = {
    {"f4", TOLK_FLOAT},  {"f8", TOLK_DOUBLE}, {"f2", TOLK_FLOAT16}, {"i1", TOLK_INT8},
    {"i2", TOLK_INT16},  {"i4", TOLK_INT32},  {"i8", TOLK_INT64},   {"u1", TOLK_UINT8},
    {"u2", TOLK_UINT16}, {"u4", TOLK_UINT32}, {"u8", TOLK_UINT64},  {"b1", TOLK_BOOL},
    {"?", TOLK_BOOL},
};

/* Finds 'key': in the header and returns the position after the colon. */
static const char *find_key(const char *h, const char *end, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = h; p + kl + 2 < end; p++)
    if ((*p == '\'' || *p == '"') && !memcmp(p + 1, key, kl) && p[kl + 1] == *p) {
      const char *q = p + kl + 2;
      while (q < end && (*q == ' ' || *q == '\t')) q++;
      if (q < end && *q == ':') return q + 1;
      return NULL;
    }
  return NULL;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n')) p++;
  return p;
}

/* The header dict of a .npy file: [h, end), and what names the file in
 * errors. */
struct npy_header {
  const char *h, *end;
  const char *what;
};

/* The magic, the version and the header's length: where the dict starts
 * (*hstart) and how long it is (*hlen), checked against len. */
static tolk_status read_preamble(const uint8_t *buf, size_t len, const char *what, size_t *hstart,
                                 size_t *hlen, tolk_error *err) {
  if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
    return npy_fail(err, TOLK_ERR_MALFORMED, "%s: not a .npy file (no \\x93NUMPY magic)", what);
  int major = buf[6];
  if (major == 1) {
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    *hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return npy_fail(err, TOLK_ERR_MALFORMED, "%s: truncated .npy header", what);
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    *hstart = 12;
  } else {
    return npy_fail(err, TOLK_ERR_UNSUPPORTED, "%s: .npy format version %d.%d", what, major,
                     buf[7]);
  }
  if (*hlen > len - *hstart)
    return npy_fail(err, TOLK_ERR_MALFORMED,
                     "%s: .npy header of %zu bytes runs past the end of the file (%zu bytes)",
                     what, *hlen, len);
  return TOLK_OK;
}

/* 'descr': a little-endian (or single-byte) element type tolk has. */
static tolk_status parse_descr(const struct npy_header *hd, tolk_dtype *dtype, tolk_error *err) {
  const char *what = hd->what, *end = hd->end;
  const char *p = find_key(hd->h, end, "descr");
  if (!p) return npy_fail(err, TOLK_ERR_MALFORMED, "%s: .npy header has no 'descr'", what);
  p = skip_ws(p, end);
  if (p >= end || (*p != '\'' && *p != '"'))
    return npy_fail(err, TOLK_ERR_MALFORMED, "%s: .npy 'descr' is not a string", what);
  char quote = *p++;
  const char *q = memchr(p, quote, (size_t)(end - p));
  if (!q || q - p > 16)
    return npy_fail(err, TOLK_ERR_MALFORMED, "%s: bad .npy 'descr'", what);
  char descr[20];
  memcpy(descr, p, (size_t)(q - p));
  descr[q - p] = '\0';
  const char *dk = descr;
  if (*dk == '>' && strcmp(dk + 1, "i1") && strcmp(dk + 1, "u1") && strcmp(dk + 1, "b1"))
    return npy_fail(err, TOLK_ERR_UNSUPPORTED, "%s: big-endian .npy data ('%s')", what, descr);
  if (*dk == '<' || *dk == '|' || *dk == '=' || *dk == '>') dk++;
  *dtype = TOLK_UNDEFINED;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(dk, kinds[i].descr)) *dtype = kinds[i].dtype;
  if (*dtype == TOLK_UNDEFINED)
    return npy_fail(err, TOLK_ERR_UNSUPPORTED, "%s: .npy element type '%s' is not supported",
                     what, descr);
  return TOLK_OK;
}

/* 'fortran_order': must be False. */
static tolk_status check_c_order(const struct npy_header *hd, tolk_error *err) {
  const char *what = hd->what, *end = hd->end;
  const char *p = find_key(hd->h, end, "fortran_order");
  if (!p) return npy_fail(err, TOLK_ERR_MALFORMED, "%s: .npy header has no 'fortran_order'", what);
  p = skip_ws(p, end);
  if (end - p >= 4 && !memcmp(p, "True", 4))
    return npy_fail(err, TOLK_ERR_UNSUPPORTED,
                     "%s: Fortran-order .npy data (save with np.ascontiguousarray)", what);
  if (end - p < 5 || memcmp(p, "False", 5))
    return npy_fail(err, TOLK_ERR_MALFORMED, "%s: bad .npy 'fortran_order'", what);
  return TOLK_OK;
}

/* 'shape': a tuple of at most TOLK_MAX_RANK non-negative integers. */
static tolk_status parse_shape(const struct npy_header *hd, int64_t *dims, int *rank,
                               tolk_error *err) {
  const char *what = hd->what, *end = hd->end;
  const char *p = find_key(hd->h, end, "shape");
  if (!p) return npy_fail(err, TOLK_ERR_MALFORMED, "%s: .npy header has no 'shape'", what);
  p = skip_ws(p, end);
  if (p >= end || *p != '(')
    return npy_fail(err, TOLK_ERR_MALFORMED, "%s: .npy 'shape' is not a tuple", what);
  p++;
  *rank = 0;
  for (;;) {
    p = skip_ws(p, end);
    if (p < end && *p == ')') break;
    if (p >= end || *p < '0' || *p > '9')
      return npy_fail(err, TOLK_ERR_MALFORMED, "%s: bad .npy 'shape'", what);
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      if (v > (INT64_MAX - 9) / 10)
        return npy_fail(err, TOLK_ERR_LIMIT, "%s: .npy dimension too large", what);
      v = v * 10 + (*p++ - '0');
    }
    if (p < end && *p == 'L') p++; /* Python 2 longs */
    if (*rank == TOLK_MAX_RANK)
      return npy_fail(err, TOLK_ERR_LIMIT, "%s: .npy array has more than %d dimensions", what,
                       TOLK_MAX_RANK);
    dims[(*rank)++] = v;
    p = skip_ws(p, end);
    if (p < end && *p == ',') p++;
  }
  return TOLK_OK;
}

tolk_status npy_decode(const uint8_t *buf, size_t len, const char *what, tolk_tensor **out,
                       tolk_error *err) {
  *out = NULL;
  size_t hstart = 0, hlen = 0;
  tolk_dtype dtype = TOLK_UNDEFINED;
  int64_t dims[TOLK_MAX_RANK];
  int rank = 0;
  tolk_status st = read_preamble(buf, len, what, &hstart, &hlen, err);
  if (st) return st;
  struct npy_header hd = {(const char *)buf + hstart, (const char *)buf + hstart + hlen, what};
  st = parse_descr(&hd, &dtype, err);
  if (!st) st = check_c_order(&hd, err);
  if (!st) st = parse_shape(&hd, dims, &rank, err);
  if (st) return st;
  size_t es = tolk_dtype_size(dtype), numel = 1, nbytes;
  for (int i = 0; i < rank; i++)
    if ((uint64_t)dims[i] > SIZE_MAX || __builtin_mul_overflow(numel, (size_t)dims[i], &numel))
      return npy_fail(err, TOLK_ERR_LIMIT, "%s: .npy element count overflows", what);
  if (__builtin_mul_overflow(numel, es, &nbytes))
    return npy_fail(err, TOLK_ERR_LIMIT, "%s: .npy data size overflows", what);
  size_t have = len - hstart - hlen;
  if (have != nbytes)
    return npy_fail(err, TOLK_ERR_MALFORMED,
                     "%s: .npy header declares %zu elements of %s (%zu bytes) but %zu data "
                     "bytes follow",
                     what, numel, tolk_dtype_name(dtype), nbytes, have);
  return tolk_tensor_create(dtype, rank, dims, buf + hstart + hlen, nbytes, out, err);
}

tolk_status npy_read(const char *path, tolk_tensor **out, tolk_error *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return npy_fail(err, TOLK_ERR_IO, "%s: %s", path, strerror(errno));
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return npy_fail(err, TOLK_ERR_NO_MEMORY, "%s: reading", path);
      }
      buf = nb;
    }
    size_t k = fread(buf + len, 1, cap - len, f);
    len += k;
    if (k == 0) break;
  }
  bool bad = ferror(f);
  fclose(f);
  tolk_status st = bad ? npy_fail(err, TOLK_ERR_IO, "%s: read error", path)
                       : npy_decode(buf, len, path, out, err);
  free(buf);
  return st;
}

tolk_status npy_write(const char *path, const tolk_tensor *t, tolk_error *err) {
  const char *descr = NULL;
  tolk_dtype dt = tolk_tensor_dtype(t);
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].dtype == dt) {
      descr = kinds[i].descr;
      break;
    }
  if (dt == TOLK_BFLOAT16) descr = "u2";
  if (!descr)
    return npy_fail(err, TOLK_ERR_UNSUPPORTED, "%s: no .npy type for %s", path,
                     tolk_dtype_name(dt));
  char shape[TOLK_MAX_RANK * 24 + 4];
  size_t n = 0;
  int rank = tolk_tensor_rank(t);
  const int64_t *dims = tolk_tensor_dims(t);
  shape[0] = '\0';
  for (int i = 0; i < rank && n < sizeof shape; i++) {
    int w = snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (w > 0) n += (size_t)w;
  }
  if (rank == 1 && n + 1 < sizeof shape) memcpy(shape + n, ",", 2); /* (3,) is a tuple */
  char header[512];
  int hl = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                    dt == TOLK_BOOL || dt == TOLK_INT8 || dt == TOLK_UINT8 ? '|' : '<', descr, shape);
  if (hl < 0 || (size_t)hl + 80 > sizeof header)
    return npy_fail(err, TOLK_ERR_INTERNAL, "%s: header too long", path);
  /* Pad with spaces so data starts at a multiple of 64, ending in '\n'. */
  size_t total = 10 + (size_t)hl + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(header + hl, ' ', pad);
  header[(size_t)hl + pad] = '\n';
  size_t hlen = (size_t)hl + pad + 1;
  uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 255), (uint8_t)(hlen >> 8)};
  FILE *f = fopen(path, "wb");
  if (!f) return npy_fail(err, TOLK_ERR_IO, "%s: %s", path, strerror(errno));
  size_t nb = tolk_tensor_nbytes(t);
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen &&
            (nb == 0 || fwrite(tolk_tensor_data(t), 1, nb, f) == nb);
  ok = (fclose(f) == 0) && ok;
  return ok ? TOLK_OK : npy_fail(err, TOLK_ERR_IO, "%s: write failed", path);
}
