/*
 * core.h — internal helpers shared by every part of libtolk: error reporting,
 * overflow-checked arithmetic, and the bump arena that owns IR memory.
 * Nothing here is public; include/tolk.h is the only public header.
 */
#ifndef TOLK_CORE_H
#define TOLK_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tolk.h"

#if defined(__GNUC__)
#define TOLK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TOLK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TOLK_PRINTF(f, a)
#define TOLK_UNLIKELY(x) (x)
#endif

/* Records `status` and a formatted message in `err` (may be NULL) and returns
 * `status`, so that error paths read `return tolk_fail(err, ...);`. */
tolk_status tolk_fail(tolk_error *err, tolk_status status, const char *fmt, ...)
    TOLK_PRINTF(3, 4);

/* Prepends "context: " to the message already in err, for adding where an
 * error happened as it travels up (file name, node, graph). */
void tolk_error_prefix(tolk_error *err, const char *fmt, ...) TOLK_PRINTF(2, 3);

/* Formats one line (cut at TOLK_ERROR_MESSAGE_MAX - 1 bytes) and hands it
 * to the caller's tolk_report_fn; nothing when `report` is NULL. For the
 * calls that report as they go (check, quantize, verify). */
void tolk_report_line(tolk_report_fn report, void *user, const char *fmt, ...) TOLK_PRINTF(3, 4);
/* The same with the arguments as a va_list, for reporting wrappers. */
void tolk_report_vline(tolk_report_fn report, void *user, const char *fmt, va_list ap)
    TOLK_PRINTF(3, 0);

/* Reads the whole file at `path` into a new NUL-terminated buffer (*data,
 * freed with free(); *len excludes the NUL). Files larger than `max` bytes
 * fail with TOLK_ERR_LIMIT; a missing file with TOLK_ERR_NOT_FOUND. */
tolk_status tolk_read_file(const char *path, size_t max, char **data, size_t *len,
                           tolk_error *err);

/* Gives back the whole pages inside [p, p + n) of a read-only private file
 * mapping (madvise MADV_DONTNEED): they stop counting as resident, and a
 * later read faults the file's bytes back. Only for such mappings — in
 * anonymous or writable memory it would zero data. */
void tolk_drop_mapped_pages(const void *p, size_t n);

/* Overflow-checked arithmetic: return false (leaving *out unspecified) when the
 * exact result does not fit. */
static inline bool tolk_mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool tolk_add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool tolk_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* ------------------------------------------------------------------ arena */

/* A bump allocator: many small allocations, one free. Chunks are kept in a
 * list; allocations are 16-byte aligned and zeroed. Used for IR objects so a
 * model (or a pass) frees everything it made at once. */
struct tolk_arena {
  struct arena_chunk *head;
  size_t used_total; /* bytes handed out, for stats */
  size_t limit;      /* 0: unbounded; else allocation beyond fails */
};

void tolk_arena_init(struct tolk_arena *a, size_t limit);
void tolk_arena_release(struct tolk_arena *a);
/* NULL on overflow, on exceeding the limit or when out of memory. */
void *tolk_arena_alloc(struct tolk_arena *a, size_t size);
/* Array allocation with the count × size overflow check. */
void *tolk_arena_array(struct tolk_arena *a, size_t count, size_t elem);
/* A NUL-terminated copy of `len` bytes. */
char *tolk_arena_strndup(struct tolk_arena *a, const char *s, size_t len);

#endif /* TOLK_CORE_H */
