/*
 * pool.h — the intra-op thread pool. A session owns one, sized by its options
 * (default: the machine's cores). Kernels split work with tolk_pool_for();
 * nested calls from inside a task run inline, so a kernel that calls another
 * parallel kernel never oversubscribes.
 */
#ifndef TOLK_POOL_H
#define TOLK_POOL_H

#include <stdint.h>

#include "core.h"

struct tolk_pool;

typedef void (*tolk_range_fn)(void *arg, int64_t begin, int64_t end);

/* threads <= 0: the number of online CPUs. A pool of 1 thread spawns none. */
tolk_status tolk_pool_create(int threads, struct tolk_pool **out, tolk_error *err);
void tolk_pool_free(struct tolk_pool *pool);
int tolk_pool_threads(const struct tolk_pool *pool);

/* Runs fn over [0, n) in chunks of at least `grain` items and waits for all
 * of them. pool may be NULL (runs inline). */
void tolk_pool_for(struct tolk_pool *pool, int64_t n, int64_t grain, tolk_range_fn fn,
                   void *arg);

#endif /* TOLK_POOL_H */
