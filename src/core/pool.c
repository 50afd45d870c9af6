/*
 * pool.c — the intra-op thread pool: N-1 worker threads plus the caller.
 *
 * One job runs at a time. tolk_pool_for posts the job (function, argument,
 * chunking) under the mutex with a new generation number, wakes sleeping
 * workers, takes chunks itself, and waits until every chunk is done. Chunks
 * are claimed from a 64-bit counter whose high half is the generation, so a
 * worker that wakes late with a stale copy of the job can never claim a chunk
 * of the next one.
 *
 * Workers spin briefly before sleeping, since kernels of one run come in
 * quick succession and a futex wake costs tens of microseconds. Briefly is
 * SPIN_NS of wall time, not a count of PAUSEs (whose length differs
 * between CPUs by 5x or more): on the 2-vCPU Zen 4 VM this was tuned on, a
 * worker spinning 500 us (20,000 PAUSEs) through the caller's serial parts
 * slowed the caller itself, the vCPUs sharing the host's cores, and a
 * translation of the bundled model took 5.5 ms at the median, with the same
 * sentence 2.6x slower at P99; at ~50 us 4.5 ms and 1.5-1.8x. Calls from
 * inside a task run inline (nested parallelism), and a call that finds the
 * pool busy with another thread's job runs inline too: two concurrent runs on
 * one session never put more threads to work than the pool has.
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { SPIN_NS = 50000, MAX_THREADS = 256, CHUNKS_PER_THREAD = 4 };

struct tolk_pool {
  int threads; /* the caller included */
  int n_workers;
  pthread_t *tids;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  int sleepers;        /* under mu */
  bool stop;           /* under mu, and read atomically below */
  _Atomic uint32_t gen;
  _Atomic bool stopping;
  /* The current job, written under mu before gen is bumped. */
  tolk_range_fn fn;
  void *arg;
  int64_t n, chunk;
  uint32_t n_chunks;
  _Atomic uint64_t next; /* gen << 32 | next chunk index */
  _Atomic uint32_t done; /* chunks finished in the current job */
  atomic_flag busy;      /* a job is posted */
};

static _Thread_local bool in_task;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A spin loop's budget: spin_on() is false once SPIN_NS have passed since
 * its first call (the clock read every 64 calls), and a PAUSE before that. */
struct spin {
  int64_t start;
  unsigned calls;
  bool over;
};

static inline bool spin_on(struct spin *s) {
  if (s->over) return false;
  if ((s->calls++ & 63) == 0) {
    const int64_t t = now_ns();
    if (!s->start) s->start = t;
    else if (t - s->start > SPIN_NS) return !(s->over = true);
  }
  cpu_relax();
  return true;
}

/* Claims and runs chunks of job `gen` until none are left. */
static void work(struct tolk_pool *p, uint32_t gen, tolk_range_fn fn, void *arg, int64_t n,
                 int64_t chunk, uint32_t n_chunks) {
  uint64_t v = atomic_load_explicit(&p->next, memory_order_acquire);
  for (;;) {
    if ((uint32_t)(v >> 32) != gen || (uint32_t)v >= n_chunks) return;
    if (!atomic_compare_exchange_weak_explicit(&p->next, &v, v + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    uint32_t c = (uint32_t)v;
    int64_t begin = (int64_t)c * chunk;
    int64_t end = begin + chunk < n ? begin + chunk : n;
    fn(arg, begin, end);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel);
    v = atomic_load_explicit(&p->next, memory_order_acquire);
  }
}

static void *worker_main(void *arg) {
  struct tolk_pool *p = arg;
  in_task = true; /* anything a worker calls runs nested, inline */
  uint32_t seen = atomic_load(&p->gen);
  for (;;) {
    struct spin sp = {0};
    do {
      if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen ||
          atomic_load_explicit(&p->stopping, memory_order_relaxed))
        break;
    } while (spin_on(&sp));
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->gen) == seen && !p->stop) {
      p->sleepers++;
      pthread_cond_wait(&p->wake, &p->mu);
      p->sleepers--;
    }
    if (p->stop) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    const uint32_t g = atomic_load(&p->gen);
    tolk_range_fn fn = p->fn;
    void *a = p->arg;
    int64_t n = p->n, chunk = p->chunk;
    uint32_t n_chunks = p->n_chunks;
    pthread_mutex_unlock(&p->mu);
    seen = g;
    work(p, g, fn, a, n, chunk, n_chunks);
  }
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

tolk_status tolk_pool_create(int threads, struct tolk_pool **out, tolk_error *err) {
  *out = NULL;
  if (threads <= 0) threads = online_cpus();
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  struct tolk_pool *p = calloc(1, sizeof *p);
  if (!p) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "thread pool: out of memory");
  p->threads = threads;
  atomic_flag_clear(&p->busy);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (threads > 1) {
    p->tids = calloc((size_t)threads - 1, sizeof *p->tids);
    if (!p->tids) {
      tolk_pool_free(p);
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "thread pool: out of memory");
    }
    for (int i = 0; i < threads - 1; i++) {
      if (pthread_create(&p->tids[i], NULL, worker_main, p) != 0) {
        /* Fewer threads than asked: still a working pool. */
        p->threads = i + 1;
        break;
      }
      p->n_workers++;
    }
  }
  *out = p;
  return TOLK_OK;
}

void tolk_pool_free(struct tolk_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  atomic_store(&p->stopping, true);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->tids[i], NULL);
  free(p->tids);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int tolk_pool_threads(const struct tolk_pool *p) { return p ? p->threads : 1; }

void tolk_pool_for(struct tolk_pool *p, int64_t n, int64_t grain, tolk_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->threads <= 1 || in_task || n < 2 * grain || atomic_flag_test_and_set(&p->busy)) {
    fn(arg, 0, n);
    return;
  }
  int64_t max_chunks = (int64_t)p->threads * CHUNKS_PER_THREAD;
  int64_t n_chunks = n / grain;
  if (n_chunks > max_chunks) n_chunks = max_chunks;
  int64_t chunk = (n + n_chunks - 1) / n_chunks;
  n_chunks = (n + chunk - 1) / chunk;

  pthread_mutex_lock(&p->mu);
  uint32_t g = atomic_load(&p->gen) + 1;
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->chunk = chunk;
  p->n_chunks = (uint32_t)n_chunks;
  atomic_store(&p->done, 0);
  atomic_store(&p->next, (uint64_t)g << 32);
  atomic_store_explicit(&p->gen, g, memory_order_release);
  if (p->sleepers) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  in_task = true;
  work(p, g, fn, arg, n, chunk, (uint32_t)n_chunks);
  in_task = false;
  struct spin sp = {0};
  while (atomic_load_explicit(&p->done, memory_order_acquire) < (uint32_t)n_chunks)
    if (!spin_on(&sp)) sched_yield();
  atomic_flag_clear(&p->busy);
}
