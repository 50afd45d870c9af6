/*
 * test_kern_weights.c — memory for packed weights (src/kern/weights.c):
 * blocks of every size class are 64-byte aligned, disjoint and keep what is
 * written to them; a page of a slab whose blocks are all freed is given back
 * (mincore), while a page a live block still touches stays; a slab goes
 * with its last block; two threads allocating and freeing at once (run
 * under TSan in CI) leave nothing behind.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kern/kern.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define HUGE ((size_t)2 << 20)

/* Whether the page at p (of the system's page size) is resident. */
static bool resident(const void *p) {
  long ps = sysconf(_SC_PAGESIZE);
  unsigned char v = 0;
  void *page = (void *)((uintptr_t)p & ~(uintptr_t)(ps - 1));
  return mincore(page, (size_t)ps, &v) == 0 && (v & 1);
}

static void fill(unsigned char *p, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
  p[n - 1] = seed;
}

static bool intact(const unsigned char *p, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i += 4096)
    if (i != n - 1 && p[i] != (unsigned char)(seed + i / 4096)) return false;
  return p[n - 1] == seed;
}

/* Every size class at once: heap (< 256 KiB), slab, own mapping (>= 8 MiB). */
static void sizes(void) {
  const size_t n[] = {1000, 200 * 1024, 256 * 1024, MIB, MIB + 8, 3 * MIB, 4 * MIB, 8 * MIB - 64, 8 * MIB, 9 * MIB + 3};
  enum { N = sizeof n / sizeof *n };
  unsigned char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = kern_alloc_weights(n[i]);
    CHECK_MSG(p[i] && ((uintptr_t)p[i] & 63) == 0, "%zu bytes at %p", n[i], (void *)p[i]);
    if (p[i]) fill(p[i], n[i], (unsigned char)(17 * i + 1));
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      if (i != j && p[i] && p[j]) CHECK(p[i] + n[i] <= p[j] || p[j] + n[j] <= p[i]);
  CHECK(kern_weights_slab_bytes() > 0);
  for (int i = 0; i < N; i += 2) kern_free_weights(p[i]); /* out of order */
  for (int i = 1; i < N; i += 2) CHECK_MSG(p[i] && intact(p[i], n[i], (unsigned char)(17 * i + 1)), "block %d", i);
  for (int i = 1; i < N; i += 2) kern_free_weights(p[i]);
  CHECK_MSG(kern_weights_slab_bytes() == 0, "%zu bytes of slabs left", kern_weights_slab_bytes());
  kern_free_weights(NULL);
}

/* Four 1 MiB blocks from a fresh slab fill its first two pages. Freeing the
 * first two gives page 0 back; freeing one of the next two keeps page 1. */
static void pages_given_back(void) {
  CHECK(kern_weights_slab_bytes() == 0);
  unsigned char *b[5];
  for (int i = 0; i < 5; i++) {
    b[i] = kern_alloc_weights(MIB);
    CHECK(b[i] != NULL);
    if (b[i]) memset(b[i], 0x5a, MIB);
  }
  if (!b[0] || !b[4]) return;
  CHECK_MSG(((uintptr_t)b[0] & (HUGE - 1)) == 0, "a fresh slab starts on a huge page: %p", (void *)b[0]);
  CHECK(b[1] == b[0] + MIB && b[2] == b[0] + 2 * MIB);
  CHECK(resident(b[0]) && resident(b[2]));
  kern_free_weights(b[0]);
  CHECK(resident(b[1])); /* page 0 still has b[1] */
  kern_free_weights(b[1]);
  CHECK(!resident(b[0]) && !resident(b[0] + MIB));
  kern_free_weights(b[2]);
  CHECK(resident(b[3]) && b[3][MIB - 1] == 0x5a);
  CHECK(kern_weights_slab_bytes() > 0);
  kern_free_weights(b[3]);
  kern_free_weights(b[4]);
  CHECK(kern_weights_slab_bytes() == 0);
}

static void *churn(void *arg) {
  unsigned char seed = (unsigned char)(uintptr_t)arg;
  for (int round = 0; round < 40; round++) {
    unsigned char *p[6];
    for (int i = 0; i < 6; i++) {
      size_t n = (size_t)(256 + 97 * ((round + i) % 7)) << 10;
      p[i] = kern_alloc_weights(n);
      if (p[i]) fill(p[i], n, (unsigned char)(seed + i));
    }
    for (int i = 0; i < 6; i++) {
      size_t n = (size_t)(256 + 97 * ((round + i) % 7)) << 10;
      if (p[i] && !intact(p[i], n, (unsigned char)(seed + i))) return (void *)1;
      kern_free_weights(p[i]);
    }
  }
  return NULL;
}

static void two_threads(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, churn, (void *)(uintptr_t)100) == 0);
  void *mine = churn((void *)(uintptr_t)7), *theirs = (void *)1;
  pthread_join(t, &theirs);
  CHECK(mine == NULL && theirs == NULL);
  CHECK(kern_weights_slab_bytes() == 0);
}

int main(void) {
  pages_given_back();
  sizes();
  two_threads();
  return tu_finish("test_kern_weights");
}
