/*
 * test_exec_pool.c — the thread pool: every index visited exactly once,
 * chunks no smaller than the grain, nested calls running inline, and several
 * threads calling one pool at once (the one that finds it busy runs inline).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/pool.h"
#include "testutil.h"

struct job {
  _Atomic int *hits;
  int64_t grain, n;
  _Atomic int small_chunks;
  struct tolk_pool *pool;
  _Atomic long nested_sum;
};

static void count(void *arg, int64_t b, int64_t e) {
  struct job *j = arg;
  if (e - b < j->grain && e != j->n) atomic_fetch_add(&j->small_chunks, 1);
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&j->hits[i], 1);
}

static void inner(void *arg, int64_t b, int64_t e) {
  struct job *j = arg;
  atomic_fetch_add(&j->nested_sum, (long)(e - b));
}

static void outer(void *arg, int64_t b, int64_t e) {
  struct job *j = arg;
  for (int64_t i = b; i < e; i++) tolk_pool_for(j->pool, 100, 1, inner, j);
}

/* Runs one job; returns the number of problems (no CHECK here: it is
 * called from several threads at once). */
static int run_once(struct tolk_pool *p, int64_t n, int64_t grain) {
  struct job j = {0};
  j.hits = calloc((size_t)n + 1, sizeof *j.hits);
  j.grain = grain;
  j.n = n;
  tolk_pool_for(p, n, grain, count, &j);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad += j.hits[i] != 1;
  bad += atomic_load(&j.small_chunks);
  free(j.hits);
  return bad;
}

static void check_once(struct tolk_pool *p, int64_t n, int64_t grain) {
  int bad = run_once(p, n, grain);
  CHECK_MSG(bad == 0, "n=%lld grain=%lld: %d indices not visited exactly once or short chunks",
            (long long)n, (long long)grain, bad);
}

static _Atomic int hammer_bad;

static void *hammer(void *arg) {
  struct tolk_pool *p = arg;
  for (int rep = 0; rep < 300; rep++) atomic_fetch_add(&hammer_bad, run_once(p, 1000 + rep, 7));
  return NULL;
}

int main(void) {
  tolk_error err = {0};
  struct tolk_pool *p = NULL;
  CHECK(tolk_pool_create(4, &p, &err) == TOLK_OK);
  CHECK(tolk_pool_threads(p) == 4);
  for (int64_t n = 0; n < 200; n++) check_once(p, n, 1 + n % 5);
  check_once(p, 1000000, 1000);
  for (int rep = 0; rep < 2000; rep++) check_once(p, 64, 1); /* many tiny jobs */

  struct job j = {0};
  j.pool = p;
  tolk_pool_for(p, 50, 1, outer, &j);
  CHECK(atomic_load(&j.nested_sum) == 50 * 100);

  pthread_t th[3];
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, hammer, p);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  CHECK(atomic_load(&hammer_bad) == 0);
  tolk_pool_free(p);

  /* One thread: no workers, everything inline; NULL pool too. */
  CHECK(tolk_pool_create(1, &p, &err) == TOLK_OK);
  check_once(p, 1000, 10);
  tolk_pool_free(p);
  check_once(NULL, 1000, 10);
  CHECK(tolk_pool_create(0, &p, &err) == TOLK_OK && tolk_pool_threads(p) >= 1);
  tolk_pool_free(p);
  return tu_finish("test_exec_pool");
}
