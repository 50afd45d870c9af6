/*
 * weights.c — memory for packed weights, on 2 MiB pages.
 *
 * A decoder step streams every weight from DRAM. On 4 KiB pages each page
 * costs a TLB miss and stops the hardware prefetchers at its boundary; a
 * batch-1 step of the full-size OPUS model spent a quarter longer on its
 * 1 MiB matrices than their bytes take at the machine's read bandwidth
 * (Zen 2: 27.5 against ~20 µs each). Matrices of 8 MiB and more get their
 * own huge-page mapping (under one page wasted in their last page); smaller
 * ones are cut from shared 32 MiB slabs of huge pages, since rounding a
 * 1 MiB matrix up to its own 2 MiB page would double its memory. Below
 * 256 KiB a matrix stays in cache between uses and takes the heap.
 *
 * A slab hands out blocks front to back and never reuses a freed one:
 * weights are allocated when a session is made and freed when it goes. A
 * page whose blocks are all freed, and that no later block can reach, is
 * given back to the kernel at once (a reload's old model leaves no resident
 * pages behind in a slab the new model shares); the slab is unmapped with
 * its last block. Huge pages are a hint (madvise): where the kernel grants
 * none the slab is ordinary memory.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kern.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEIGHTS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEIGHTS_ASAN 1
#endif
#endif
#ifdef WEIGHTS_ASAN
#include <sanitizer/asan_interface.h>
/* What no live block covers stays poisoned: a read past a matrix's end
 * into its slab is reported as it is on the heap. */
#define W_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define W_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define W_POISON(p, n) ((void)(p), (void)(n))
#define W_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HUGE_PAGE ((size_t)2 << 20)
#define SLAB_PAGES 16
#define SLAB_BYTES (HUGE_PAGE * SLAB_PAGES)
#define SLAB_MIN ((size_t)256 << 10)
#define OWN_MIN (SLAB_BYTES / 4)
#define SLAB_BLOCKS ((int)(SLAB_BYTES / SLAB_MIN))

struct block {
  size_t off, bytes; /* bytes 0: freed */
};

struct slab {
  struct slab *next;
  char *base;
  size_t used; /* blocks are cut from [used, SLAB_BYTES) */
  int live, n_blocks;
  int page_live[SLAB_PAGES]; /* live blocks touching each page */
  struct block blocks[SLAB_BLOCKS];
};

static pthread_mutex_t slab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slab *slabs; /* newest first */

static void hint_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

/* SLAB_BYTES of address space aligned to a huge page, or NULL. */
static char *map_aligned(void) {
  size_t span = SLAB_BYTES + HUGE_PAGE;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *base = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (base > raw) munmap(raw, (size_t)(base - raw));
  size_t tail = (size_t)(raw + span - (base + SLAB_BYTES));
  if (tail) munmap(base + SLAB_BYTES, tail);
  return base;
}

static struct slab *slab_new(void) {
  struct slab *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  if (!(s->base = map_aligned())) {
    free(s);
    return NULL;
  }
  hint_huge(s->base, SLAB_BYTES);
  W_POISON(s->base, SLAB_BYTES);
  return s;
}

/* The first slab with room for `rounded` bytes: a 4 MiB matrix that no
 * longer fits one slab leaves its tail to the 1 MiB ones that follow, so
 * that only the newest slab's last page is partly unused (a huge page is
 * resident whole once touched). */
static struct slab *slab_with_room(size_t rounded) {
  for (struct slab *s = slabs; s; s = s->next)
    if (s->n_blocks < SLAB_BLOCKS && SLAB_BYTES - s->used >= rounded) return s;
  return NULL;
}

static void *slab_take(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  struct slab *s = slab_with_room(rounded);
  if (!s) {
    if (!(s = slab_new())) return NULL;
    s->next = slabs;
    slabs = s;
  }
  size_t off = s->used;
  s->used += rounded;
  s->blocks[s->n_blocks++] = (struct block){off, bytes};
  s->live++;
  for (size_t pg = off / HUGE_PAGE; pg <= (off + bytes - 1) / HUGE_PAGE; pg++) s->page_live[pg]++;
  W_UNPOISON(s->base + off, bytes);
  return s->base + off;
}

/* Frees p if a slab holds it; false if none does. */
static bool slab_give(void *p) {
  struct slab **link = &slabs;
  for (struct slab *s = slabs; s; link = &s->next, s = s->next) {
    char *c = p;
    if (c < s->base || c >= s->base + SLAB_BYTES) continue;
    size_t off = (size_t)(c - s->base);
    struct block *b = NULL;
    for (int i = 0; i < s->n_blocks && !b; i++)
      if (s->blocks[i].off == off && s->blocks[i].bytes) b = &s->blocks[i];
    if (!b) abort(); /* not a block's start, or freed twice */
    W_POISON(c, b->bytes);
    for (size_t pg = off / HUGE_PAGE; pg <= (off + b->bytes - 1) / HUGE_PAGE; pg++)
      if (--s->page_live[pg] == 0 && (pg + 1) * HUGE_PAGE <= s->used)
        madvise(s->base + pg * HUGE_PAGE, HUGE_PAGE, MADV_DONTNEED);
    b->bytes = 0;
    if (--s->live == 0) {
      *link = s->next;
      /* ASan keeps the shadow of unmapped memory: a later mapping at these
       * addresses (a model file) would read as poisoned. */
      W_UNPOISON(s->base, SLAB_BYTES);
      munmap(s->base, SLAB_BYTES);
      free(s);
    }
    return true;
  }
  return false;
}

void *kern_alloc_weights(size_t bytes) {
  if (bytes < SLAB_MIN) return aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (bytes < OWN_MIN) {
    pthread_mutex_lock(&slab_mu);
    void *p = slab_take(bytes);
    pthread_mutex_unlock(&slab_mu);
    return p;
  }
  if (bytes > SIZE_MAX - HUGE_PAGE) return NULL;
  size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  void *p = aligned_alloc(HUGE_PAGE, rounded);
  if (p) hint_huge(p, rounded);
  return p;
}

void kern_free_weights(void *p) {
  if (!p) return;
  pthread_mutex_lock(&slab_mu);
  bool slab = slab_give(p);
  pthread_mutex_unlock(&slab_mu);
  if (!slab) free(p);
}

size_t kern_weights_slab_bytes(void) {
  size_t n = 0;
  pthread_mutex_lock(&slab_mu);
  for (struct slab *s = slabs; s; s = s->next) n += SLAB_BYTES;
  pthread_mutex_unlock(&slab_mu);
  return n;
}
