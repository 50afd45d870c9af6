/*
 * test_exec_plan_place.c — the arena layout of a recorded run
 * (exec_plan_place): on random traces shaped like a model's — many short
 * lives, a few long ones, lives of no ticks, lives ending on bucket edges,
 * half the buffers one 64-byte granule — the offsets are those of the plain
 * placement below (the oracle: the greedy by size comparing every placed
 * buffer with every other, n², then the granules in slots above it), and no
 * two buffers live at one tick share a byte.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "testutil.h"

static const struct rec_alloc *ref_recs;

static int ref_by_size_desc(const void *a, const void *b) {
  const struct rec_alloc *x = &ref_recs[*(const uint32_t *)a];
  const struct rec_alloc *y = &ref_recs[*(const uint32_t *)b];
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->born != y->born) return x->born < y->born ? -1 : 1;
  return 0;
}

static bool live_together(const struct rec_alloc *p, const struct rec_alloc *b) {
  return p->born < b->died && b->born < p->died;
}

/* Buffers over 64 bytes biggest first, each at the lowest offset clear of
 * every placed buffer live with it, the placed ones scanned in offset order;
 * then the 64-byte ones by birth, each in the first 64-byte slot above those
 * whose last buffer ended by its birth. */
static uint64_t ref_place(const struct rec_alloc *recs, uint32_t n, uint64_t *off) {
  uint32_t *ord = malloc((n + 1) * sizeof *ord), *placed = malloc((n + 1) * sizeof *placed);
  uint32_t n_big = 0;
  for (uint32_t i = 0; i < n; i++)
    if (recs[i].bytes > 64) ord[n_big++] = i;
  ref_recs = recs;
  qsort(ord, n_big, sizeof *ord, ref_by_size_desc);
  uint64_t top = 0;
  for (uint32_t i = 0, n_placed = 0; i < n_big; i++, n_placed++) {
    const struct rec_alloc *b = &recs[ord[i]];
    uint64_t cand = 0;
    for (uint32_t j = 0; j < n_placed; j++) {
      const struct rec_alloc *p = &recs[placed[j]];
      if (!live_together(p, b)) continue;
      if (cand + b->bytes <= off[placed[j]]) break;
      if (off[placed[j]] + p->bytes > cand) cand = off[placed[j]] + p->bytes;
    }
    off[ord[i]] = cand;
    uint32_t at = n_placed;
    while (at > 0 && off[placed[at - 1]] > cand) at--;
    memmove(placed + at + 1, placed + at, (n_placed - at) * sizeof *placed);
    placed[at] = ord[i];
    if (cand + b->bytes > top) top = cand + b->bytes;
  }
  /* The granules by birth (ord reused), then placed[s]: the end tick of
   * slot s's last buffer. */
  uint32_t n_small = 0, slots = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (recs[i].bytes > 64) continue;
    uint32_t at = n_small++;
    for (; at > 0 && recs[ord[at - 1]].born > recs[i].born; at--) ord[at] = ord[at - 1];
    ord[at] = i;
  }
  for (uint32_t g = 0; g < n_small; g++) {
    uint32_t i = ord[g], s = 0;
    while (s < slots && placed[s] > recs[i].born) s++;
    if (s == slots) slots++;
    placed[s] = (uint32_t)(recs[i].died > recs[i].born ? recs[i].died : recs[i].born);
    off[i] = top + 64 * (uint64_t)s;
  }
  free(ord);
  free(placed);
  return top + 64 * (uint64_t)slots;
}

/* A trace of n buffers born at increasing ticks: lives of 1-40 ticks, one in
 * `long_every` lasting to the end, one in 16 of no ticks, sizes from a few
 * values (ties are common in models) or any multiple of 64. */
static void make_trace(struct rec_alloc *recs, uint32_t n, uint32_t long_every) {
  uint64_t tick = 0;
  uint64_t end = 3 * (uint64_t)n + 50;
  static const uint64_t common[] = {64, 2048, 8192, 131072};
  for (uint32_t i = 0; i < n; i++) {
    tick += 1 + (uint64_t)tu_below(3);
    recs[i].born = tick;
    int64_t kind = tu_below(16);
    if (long_every && i % long_every == 0)
      recs[i].died = end;
    else if (kind == 0)
      recs[i].died = tick;
    else if (kind == 1) /* ending on a bucket's edge, or just past it */
      recs[i].died = (tick / 64 + 1) * 64 + (uint64_t)tu_below(2);
    else
      recs[i].died = tick + 1 + (uint64_t)tu_below(40);
    recs[i].bytes = tu_below(2) ? common[tu_below(4)] : 64 * (uint64_t)(1 + tu_below(512));
  }
}

static void check_trace(const struct rec_alloc *recs, uint32_t n, const char *what) {
  uint64_t *got = malloc((n + 1) * sizeof *got), *want = malloc((n + 1) * sizeof *want);
  uint64_t total = 12345;
  CHECK_MSG(exec_plan_place(recs, n, got, &total), "%s: placement failed", what);
  uint64_t want_total = ref_place(recs, n, want);
  CHECK_MSG(total == want_total, "%s: arena %llu bytes, the oracle %llu", what,
            (unsigned long long)total, (unsigned long long)want_total);
  uint32_t moved = 0, clashes = 0;
  for (uint32_t i = 0; i < n; i++) {
    moved += got[i] != want[i];
    CHECK_MSG(got[i] + recs[i].bytes <= total, "%s: buffer %u past the arena", what, i);
    for (uint32_t j = i + 1; j < n; j++)
      if (live_together(&recs[i], &recs[j]) && got[i] < got[j] + recs[j].bytes &&
          got[j] < got[i] + recs[i].bytes)
        clashes++;
  }
  CHECK_MSG(moved == 0, "%s: %u of %u offsets differ from the oracle's", what, moved, n);
  CHECK_MSG(clashes == 0, "%s: %u pairs live together share bytes", what, clashes);
  free(got);
  free(want);
}

/* Traces in any order of birth (a merge of two recordings, say). */
static void shuffle(struct rec_alloc *recs, uint32_t n) {
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = (uint32_t)tu_below(i);
    struct rec_alloc t = recs[i - 1];
    recs[i - 1] = recs[j];
    recs[j] = t;
  }
}

static void test_random_traces(void) {
  enum { N = 1500 };
  struct rec_alloc *recs = malloc(N * sizeof *recs);
  static const uint32_t sizes[] = {1, 2, 7, 64, 300, N};
  static const uint32_t long_every[] = {0, 97, 9};
  char what[64];
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t l = 0; l < sizeof long_every / sizeof *long_every; l++)
      for (int rep = 0; rep < 3; rep++) {
        make_trace(recs, sizes[s], long_every[l]);
        if (rep == 2) shuffle(recs, sizes[s]);
        snprintf(what, sizeof what, "n %u, long every %u, #%d%s", sizes[s], long_every[l], rep,
                 rep == 2 ? " shuffled" : "");
        check_trace(recs, sizes[s], what);
      }
  free(recs);
}

/* Every buffer live the whole run: they stack, the arena is their sum. */
static void test_all_live(void) {
  struct rec_alloc recs[200];
  uint64_t sum = 0;
  for (uint32_t i = 0; i < 200; i++) {
    recs[i] = (struct rec_alloc){64 * (1 + (uint64_t)tu_below(100)), i, 1000};
    sum += recs[i].bytes;
  }
  check_trace(recs, 200, "all live");
  uint64_t off[200], total = 0;
  CHECK(exec_plan_place(recs, 200, off, &total) && total == sum);
}

/* One after another, none live with the next: all at offset 0. */
static void test_none_together(void) {
  struct rec_alloc recs[300];
  for (uint32_t i = 0; i < 300; i++) recs[i] = (struct rec_alloc){64 * (2 + (uint64_t)tu_below(9)), 2 * i, 2 * i + 1};
  uint64_t off[300], total = 0;
  CHECK(exec_plan_place(recs, 300, off, &total));
  uint64_t biggest = 0;
  bool all_zero = true;
  for (uint32_t i = 0; i < 300; i++) {
    all_zero &= off[i] == 0;
    if (recs[i].bytes > biggest) biggest = recs[i].bytes;
  }
  CHECK(all_zero && total == biggest);
}

static void test_empty(void) {
  uint64_t total = 99;
  CHECK(exec_plan_place(NULL, 0, NULL, &total) && total == 0);
}

int main(void) {
  tu_seed(20261206);
  test_random_traces();
  test_all_live();
  test_none_together();
  test_empty();
  return tu_finish("test_exec_plan_place");
}
