/*
 * core.c — status strings, error formatting, dtype tables and the arena.
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *tolk_version(void) { return "0.1.0"; }

const char *tolk_status_str(tolk_status status) {
  switch (status) {
  case TOLK_OK: return "ok";
  case TOLK_ERR_INVALID_ARGUMENT: return "invalid argument";
  case TOLK_ERR_IO: return "i/o error";
  case TOLK_ERR_MALFORMED: return "malformed input";
  case TOLK_ERR_INVALID_MODEL: return "invalid model";
  case TOLK_ERR_UNSUPPORTED: return "unsupported";
  case TOLK_ERR_NO_MEMORY: return "out of memory";
  case TOLK_ERR_LIMIT: return "limit exceeded";
  case TOLK_ERR_SHAPE: return "shape mismatch";
  case TOLK_ERR_TYPE: return "type mismatch";
  case TOLK_ERR_NOT_FOUND: return "not found";
  case TOLK_ERR_INTERNAL: return "internal error";
  case TOLK_ERR_CANCELLED: return "cancelled";
  }
  return "unknown status";
}

tolk_status tolk_fail(tolk_error *err, tolk_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

void tolk_error_prefix(tolk_error *err, const char *fmt, ...) {
  if (!err) return;
  char head[TOLK_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(head, sizeof head - 2, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t hl = strlen(head);
  memcpy(head + hl, ": ", 3);
  hl += 2;
  /* Shift the old message right to make room; the tail is cut if needed. */
  size_t cap = sizeof err->message - 1;
  size_t ol = strnlen(err->message, cap);
  if (hl >= cap) hl = cap;
  if (ol > cap - hl) ol = cap - hl;
  memmove(err->message + hl, err->message, ol);
  memcpy(err->message, head, hl);
  err->message[hl + ol] = '\0';
}

void tolk_report_vline(tolk_report_fn report, void *user, const char *fmt, va_list ap) {
  if (!report) return;
  char line[TOLK_ERROR_MESSAGE_MAX];
  vsnprintf(line, sizeof line, fmt, ap);
  report(user, line);
}

void tolk_report_line(tolk_report_fn report, void *user, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tolk_report_vline(report, user, fmt, ap);
  va_end(ap);
}

tolk_status tolk_read_file(const char *path, size_t max, char **data, size_t *len,
                           tolk_error *err) {
  *data = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return tolk_fail(err, TOLK_ERR_NOT_FOUND, "%s: cannot open", path);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  tolk_status st = buf ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", path);
  while (!st) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n > max) {
      st = tolk_fail(err, TOLK_ERR_LIMIT, "%s: larger than %zu bytes", path, max);
    } else if (n == cap) {
      /* Grow geometrically; the +1 keeps room for the NUL. */
      char *p = cap <= max ? realloc(buf, 2 * cap + 1) : NULL;
      if (!p) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "%s: out of memory", path);
      else buf = p, cap *= 2;
    } else if (ferror(f)) {
      st = tolk_fail(err, TOLK_ERR_IO, "%s: read error", path);
    } else {
      break;
    }
  }
  fclose(f);
  if (st) {
    free(buf);
    return st;
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return TOLK_OK;
}

/* ------------------------------------------------------------------ dtypes */

static const struct {
  const char *name;
  size_t size;
} dtype_info[] = {
    [TOLK_UNDEFINED] = {"undefined", 0}, [TOLK_FLOAT] = {"float", 4},
    [TOLK_UINT8] = {"uint8", 1},         [TOLK_INT8] = {"int8", 1},
    [TOLK_UINT16] = {"uint16", 2},       [TOLK_INT16] = {"int16", 2},
    [TOLK_INT32] = {"int32", 4},         [TOLK_INT64] = {"int64", 8},
    [TOLK_STRING] = {"string", 0},       [TOLK_BOOL] = {"bool", 1},
    [TOLK_FLOAT16] = {"float16", 2},     [TOLK_DOUBLE] = {"double", 8},
    [TOLK_UINT32] = {"uint32", 4},       [TOLK_UINT64] = {"uint64", 8},
    [TOLK_COMPLEX64] = {"complex64", 8}, [TOLK_COMPLEX128] = {"complex128", 16},
    [TOLK_BFLOAT16] = {"bfloat16", 2},
    /* Size 0: stored, but no tolk_tensor of them can be created. */
    [TOLK_FLOAT8E4M3FN] = {"float8e4m3fn", 0}, [TOLK_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 0},
    [TOLK_FLOAT8E5M2] = {"float8e5m2", 0},     [TOLK_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 0},
    [TOLK_UINT4] = {"uint4", 0},               [TOLK_INT4] = {"int4", 0},
    [TOLK_FLOAT4E2M1] = {"float4e2m1", 0},     [TOLK_FLOAT8E8M0] = {"float8e8m0", 0},
};

const char *tolk_dtype_name(tolk_dtype dtype) {
  if ((unsigned)dtype >= sizeof dtype_info / sizeof dtype_info[0]) return "undefined";
  return dtype_info[dtype].name;
}

size_t tolk_dtype_size(tolk_dtype dtype) {
  if ((unsigned)dtype >= sizeof dtype_info / sizeof dtype_info[0]) return 0;
  return dtype_info[dtype].size;
}

/* ------------------------------------------------------------------ arena */

struct arena_chunk {
  struct arena_chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_CHUNK_MIN = 64 * 1024 };

void tolk_arena_init(struct tolk_arena *a, size_t limit) {
  a->head = NULL;
  a->used_total = 0;
  a->limit = limit;
}

void tolk_arena_release(struct tolk_arena *a) {
  struct arena_chunk *c = a->head;
  while (c) {
    struct arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->used_total = 0;
}

void *tolk_arena_alloc(struct tolk_arena *a, size_t size) {
  size_t rounded;
  if (!tolk_add_size(size, 15, &rounded)) return NULL;
  rounded &= ~(size_t)15;
  if (rounded == 0) rounded = 16;
  if (a->limit && (rounded > a->limit || a->used_total > a->limit - rounded)) return NULL;
  struct arena_chunk *c = a->head;
  if (!c || c->size - c->used < rounded) {
    size_t cap = rounded > ARENA_CHUNK_MIN ? rounded : ARENA_CHUNK_MIN;
    size_t total;
    if (!tolk_add_size(sizeof *c, cap, &total)) return NULL;
    c = malloc(total);
    if (!c) return NULL;
    c->size = cap;
    c->used = 0;
    /* A big block goes behind the current chunk so the current one keeps
     * serving small allocations. */
    if (a->head && cap > ARENA_CHUNK_MIN) {
      c->next = a->head->next;
      a->head->next = c;
    } else {
      c->next = a->head;
      a->head = c;
    }
  }
  void *p = c->data + c->used;
  c->used += rounded;
  a->used_total += rounded;
  memset(p, 0, rounded);
  return p;
}

void *tolk_arena_array(struct tolk_arena *a, size_t count, size_t elem) {
  size_t bytes;
  if (!tolk_mul_size(count, elem, &bytes)) return NULL;
  return tolk_arena_alloc(a, bytes);
}

char *tolk_arena_strndup(struct tolk_arena *a, const char *s, size_t len) {
  size_t n;
  if (!tolk_add_size(len, 1, &n)) return NULL;
  char *p = tolk_arena_alloc(a, n);
  if (p && len) memcpy(p, s, len);
  return p;
}

void tolk_drop_mapped_pages(const void *p, size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  if (ps <= 0) return;
  uintptr_t b = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
  uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
  if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
}
