/*
 * pbw.c — protobuf wire-format writer and the atomic file write (pbw.h).
 */
#include "pbw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pbw_init(struct pbw *b, size_t limit) {
  memset(b, 0, sizeof *b);
  b->limit = limit;
}

void pbw_release(struct pbw *b) {
  free(b->p);
  pbw_init(b, b->limit);
}

tolk_status pbw_status(const struct pbw *b, const char *what, tolk_error *err) {
  if (b->status == TOLK_ERR_LIMIT)
    return tolk_fail(err, TOLK_ERR_LIMIT, "%s: would be larger than %zu bytes", what, b->limit);
  if (b->status) return tolk_fail(err, b->status, "%s: out of memory after %zu bytes", what, b->n);
  return TOLK_OK;
}

/* Room for `len` more bytes; false (and the status set) when there is none. */
static bool reserve(struct pbw *b, size_t len) {
  if (b->status) return false;
  size_t need;
  if (!tolk_add_size(b->n, len, &need) || need > b->limit) {
    b->status = TOLK_ERR_LIMIT;
    return false;
  }
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > b->limit / 2 ? b->limit : cap * 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) {
    b->status = TOLK_ERR_NO_MEMORY;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void pbw_raw(struct pbw *b, const void *data, size_t len) {
  if (!len || !reserve(b, len)) return;
  memcpy(b->p + b->n, data, len);
  b->n += len;
}

/* The varint encoding of v into out[10]; returns its length. */
static size_t varint_bytes(uint64_t v, uint8_t *out) {
  size_t n = 0;
  do {
    out[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) out[n] |= 0x80;
    n++;
  } while (v);
  return n;
}

void pbw_varint(struct pbw *b, uint64_t v) {
  uint8_t t[10];
  pbw_raw(b, t, varint_bytes(v, t));
}

void pbw_key(struct pbw *b, uint32_t field, enum pb_wire wire) {
  pbw_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

void pbw_uint(struct pbw *b, uint32_t field, uint64_t v) {
  pbw_key(b, field, PB_VARINT);
  pbw_varint(b, v);
}

void pbw_fixed32(struct pbw *b, uint32_t field, uint32_t v) {
  uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  pbw_key(b, field, PB_FIXED32);
  pbw_raw(b, t, 4);
}

void pbw_fixed64(struct pbw *b, uint32_t field, uint64_t v) {
  uint8_t t[8];
  for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
  pbw_key(b, field, PB_FIXED64);
  pbw_raw(b, t, 8);
}

void pbw_float(struct pbw *b, uint32_t field, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  pbw_fixed32(b, field, u);
}

void pbw_bytes(struct pbw *b, uint32_t field, const void *data, size_t len) {
  pbw_key(b, field, PB_LEN);
  pbw_varint(b, len);
  pbw_raw(b, data, len);
}

void pbw_string(struct pbw *b, uint32_t field, const char *s) { pbw_bytes(b, field, s, strlen(s)); }

void pbw_copy(struct pbw *b, const uint8_t *start, const uint8_t *end) {
  pbw_raw(b, start, (size_t)(end - start));
}

size_t pbw_begin(struct pbw *b, uint32_t field) {
  pbw_key(b, field, PB_LEN);
  return b->n;
}

void pbw_end(struct pbw *b, size_t mark) {
  if (b->status) return;
  uint8_t t[10];
  size_t len = b->n - mark, k = varint_bytes(len, t);
  if (!reserve(b, k)) return;
  memmove(b->p + mark + k, b->p + mark, len);
  memcpy(b->p + mark, t, k);
  b->n += k;
}

/* ------------------------------------------------------------ atomic write */

static tolk_status write_all(int fd, const uint8_t *p, size_t len) {
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return TOLK_ERR_IO;
    p += w;
    len -= (size_t)w;
  }
  return TOLK_OK;
}

/* fsync of the folder holding `path`, so that the rename is durable. */
static void sync_folder(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  int n = slash ? snprintf(dir, sizeof dir, "%.*s", (int)(slash - path + (slash == path)), path)
                : snprintf(dir, sizeof dir, ".");
  if (n < 0 || (size_t)n >= sizeof dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

tolk_status tolk_write_file_atomic(const char *path, const void *data, size_t len, tolk_error *err) {
  char tmp[4200];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof tmp) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s", path);
  int fd = mkstemp(tmp);
  if (fd < 0)
    return tolk_fail(err, TOLK_ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
  const char *step = NULL;
  /* mkstemp makes it 0600; a model is read by the service's user too. */
  if (fchmod(fd, 0644)) step = "chmod";
  else if (write_all(fd, data, len)) step = "write";
  else if (fsync(fd)) step = "fsync";
  int saved = errno;
  if (close(fd) && !step) step = "close", saved = errno;
  if (!step && rename(tmp, path)) step = "rename", saved = errno;
  if (step) {
    unlink(tmp);
    return tolk_fail(err, TOLK_ERR_IO, "%s: %s failed: %s", path, step, strerror(saved));
  }
  sync_folder(path);
  return TOLK_OK;
}
