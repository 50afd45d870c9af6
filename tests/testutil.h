/*
 * testutil.h — the few macros tolk's C tests share. A failed CHECK prints the
 * file, line and expression and the test keeps going, so one run shows every
 * failure; the program's exit status is what ctest reads.
 */
#ifndef TOLK_TESTUTIL_H
#define TOLK_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int tu_checks, tu_failures;

#define CHECK(cond)                                                        \
  do {                                                                     \
    tu_checks++;                                                           \
    if (!(cond)) {                                                         \
      tu_failures++;                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

#define CHECK_MSG(cond, ...)                                               \
  do {                                                                     \
    tu_checks++;                                                           \
    if (!(cond)) {                                                         \
      tu_failures++;                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
    }                                                                      \
  } while (0)

#define CHECK_NEAR(a, b, tol) \
  CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g", (double)(a), (double)(b))

/* The tests' pseudo-random cases: xorshift64, seeded by each test file with
 * tu_seed() so that a failing case reproduces from the file alone. */
static uint64_t tu_rng = 0x9e3779b97f4a7c15ull;

static inline void tu_seed(uint64_t seed) { tu_rng = seed ? seed : 1; }

static inline uint64_t tu_next(void) {
  tu_rng ^= tu_rng << 13;
  tu_rng ^= tu_rng >> 7;
  tu_rng ^= tu_rng << 17;
  return tu_rng;
}

/* Uniform in [0, n), n > 0. */
static inline int64_t tu_below(int64_t n) { return (int64_t)(tu_next() % (uint64_t)n); }

/* Uniform in [-1, 1). */
static inline double tu_unit(void) { return (double)(tu_next() >> 11) / 9007199254740992.0 * 2 - 1; }

/* The process's resident set in kB (/proc/self/statm), -1 if unreadable. */
static inline long tu_rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Ends main(): prints the count and returns the exit status. */
static inline int tu_finish(const char *name) {
  printf("%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
  return tu_failures ? 1 : 0;
}

/* The whole file at path, NUL-terminated (free() it), or NULL; *len (may be
 * NULL) receives its size. */
static inline char *tu_slurp(const char *path, size_t *len) {
  if (len) *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!buf) return NULL;
  buf[got] = '\0';
  if (len) *len = got;
  return buf;
}

/* The fixtures folder (tests/fixtures), from the environment ctest sets. */
static inline const char *tu_fixtures(void) {
  const char *d = getenv("TOLK_FIXTURES");
  return d ? d : "tests/fixtures";
}

#endif /* TOLK_TESTUTIL_H */
