/*
 * testutil.h — the few macros tolk's C tests share. A failed CHECK prints the
 * file, line and expression and the test keeps going, so one run shows every
 * failure; the program's exit status is what ctest reads.
 */
#ifndef TOLK_TESTUTIL_H
#define TOLK_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

/* Ends main(): prints the count and returns the exit status. */
static inline int tu_finish(const char *name) {
  printf("%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
  return tu_failures ? 1 : 0;
}

/* The fixtures folder (tests/fixtures), from the environment ctest sets. */
static inline const char *tu_fixtures(void) {
  const char *d = getenv("TOLK_FIXTURES");
  return d ? d : "tests/fixtures";
}

#endif /* TOLK_TESTUTIL_H */
