/*
 * pool.c — thread pool (serial stand-in: runs every range inline until the
 * threaded pool lands; the interface is final).
 */
#include "pool.h"

#include <stdlib.h>

struct tolk_pool {
  int threads;
};

tolk_status tolk_pool_create(int threads, struct tolk_pool **out, tolk_error *err) {
  struct tolk_pool *p = calloc(1, sizeof *p);
  if (!p) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "thread pool: out of memory");
  p->threads = 1;
  (void)threads;
  *out = p;
  return TOLK_OK;
}

void tolk_pool_free(struct tolk_pool *pool) { free(pool); }

int tolk_pool_threads(const struct tolk_pool *pool) { return pool ? pool->threads : 1; }

void tolk_pool_for(struct tolk_pool *pool, int64_t n, int64_t grain, tolk_range_fn fn,
                   void *arg) {
  (void)pool;
  (void)grain;
  if (n > 0) fn(arg, 0, n);
}
