/*
 * watch.c — read deadlines and hang-up detection for MHD's connections
 * (watch.h).
 */
#include "watch.h"

#include "metrics.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct watch_slot {
  bool used;
  bool cut;           /* shut down: MHD will close it and give the slot back */
  bool served;        /* a response has been sent on it */
  bool waiting;       /* for a request: none is being served */
  int fd;
  uint32_t gen;       /* bumped at each open: a stale poll result is ignored */
  int64_t deadline;   /* CLOCK_MONOTONIC ns; 0: none */
  int64_t since;      /* waiting for a request since (open or last response) */
  void *req;          /* suspended for this request */
};

struct watch {
  pthread_mutex_t mu;
  pthread_t thread;
  int wake;           /* eventfd */
  bool stop;
  int64_t timeout_ns;
  struct watch_slot *slots;
  size_t n;
  size_t max_conns;   /* MHD's limit; n is a little larger */
  size_t reserve;     /* shed waiting connections to keep this many free */
  void (*gone)(void *req);
  struct metrics *metrics;
  struct pollfd *pfd;
  size_t *pslot;
  uint32_t *pgen;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void poke(struct watch *w) {
  uint64_t one = 1;
  if (write(w->wake, &one, sizeof one) < 0) { /* full counter: it is awake anyway */ }
}

/* Under the lock: the slot's socket is shut down, not closed (watch.h). */
static void cut(struct watch *w, struct watch_slot *s, enum metric_conn_cut why) {
  shutdown(s->fd, SHUT_RDWR);
  s->cut = true;
  s->waiting = false;
  s->deadline = 0;
  metrics_conn_cut(w->metrics, why);
}

/* Under the lock: the waiting connection to shed first, other than `keep`
 * (the one just opened): never served before served, then the longest
 * waiting. NULL when every other connection is being served. */
static struct watch_slot *victim(struct watch *w, const struct watch_slot *keep) {
  struct watch_slot *best = NULL;
  for (size_t i = 0; i < w->n; i++) {
    struct watch_slot *s = &w->slots[i];
    if (!s->used || !s->waiting || s == keep) continue;
    if (!best || s->served < best->served || (s->served == best->served && s->since < best->since)) best = s;
  }
  return best;
}

/* Under the lock: connections MHD could still take before its limit. */
static size_t room(const struct watch *w) {
  size_t held = 0;
  for (size_t i = 0; i < w->n; i++) held += w->slots[i].used && !w->slots[i].cut;
  return held < w->max_conns ? w->max_conns - held : 0;
}

/* Under the lock: deadlines passed are cut; the suspended sockets go into
 * the poll set. Returns the poll timeout in ms. */
static int prepare(struct watch *w, size_t *np) {
  int64_t now = now_ns(), next = now + 250 * 1000000LL;
  size_t np_ = 1;
  for (size_t i = 0; i < w->n; i++) {
    struct watch_slot *s = &w->slots[i];
    if (!s->used) continue;
    if (s->deadline && s->deadline <= now) {
      cut(w, s, CONN_CUT_SLOW);
    } else if (s->deadline && s->deadline < next) {
      next = s->deadline;
    }
    if (s->req) {
      w->pfd[np_] = (struct pollfd){s->fd, POLLRDHUP, 0};
      w->pslot[np_] = i;
      w->pgen[np_] = s->gen;
      np_++;
    }
  }
  *np = np_;
  int64_t ms = (next - now) / 1000000 + 1;
  return ms < 1 ? 1 : (int)ms;
}

static void *run(void *arg) {
  struct watch *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    size_t np;
    int timeout = prepare(w, &np);
    w->pfd[0] = (struct pollfd){w->wake, POLLIN, 0};
    pthread_mutex_unlock(&w->mu);
    int k = poll(w->pfd, np, timeout);
    pthread_mutex_lock(&w->mu);
    if (k <= 0) continue;
    if (w->pfd[0].revents) {
      uint64_t v;
      if (read(w->wake, &v, sizeof v) < 0) { /* nothing to drain */ }
    }
    for (size_t i = 1; i < np; i++) {
      if (!(w->pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
      struct watch_slot *s = &w->slots[w->pslot[i]];
      if (!s->used || s->gen != w->pgen[i] || !s->req) continue;
      void *req = s->req;
      s->req = NULL; /* once */
      w->gone(req);
    }
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

struct watch *watch_create(double conn_timeout_s, size_t max_conns, struct metrics *metrics,
                           void (*gone)(void *req)) {
  struct watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->max_conns = max_conns ? max_conns : 1;
  w->reserve = w->max_conns / 16 + 1;
  w->n = w->max_conns + 16;
  w->metrics = metrics;
  w->slots = calloc(w->n, sizeof *w->slots);
  w->pfd = calloc(w->n + 1, sizeof *w->pfd);
  w->pslot = calloc(w->n + 1, sizeof *w->pslot);
  w->pgen = calloc(w->n + 1, sizeof *w->pgen);
  w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  w->timeout_ns = (int64_t)(conn_timeout_s * 1e9);
  w->gone = gone;
  pthread_mutex_init(&w->mu, NULL);
  if (!w->slots || !w->pfd || !w->pslot || !w->pgen || w->wake < 0 || pthread_create(&w->thread, NULL, run, w)) {
    if (w->wake >= 0) close(w->wake);
    free(w->slots);
    free(w->pfd);
    free(w->pslot);
    free(w->pgen);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

void watch_free(struct watch *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_mutex_unlock(&w->mu);
  poke(w);
  pthread_join(w->thread, NULL);
  close(w->wake);
  pthread_mutex_destroy(&w->mu);
  free(w->slots);
  free(w->pfd);
  free(w->pslot);
  free(w->pgen);
  free(w);
}

struct watch_slot *watch_open(struct watch *w, int fd) {
  struct watch_slot *got = NULL;
  pthread_mutex_lock(&w->mu);
  int64_t now = now_ns();
  for (size_t i = 0; i < w->n && !got; i++)
    if (!w->slots[i].used) {
      got = &w->slots[i];
      *got = (struct watch_slot){.used = true, .waiting = true, .fd = fd, .gen = got->gen + 1,
                                 .since = now, .deadline = w->timeout_ns ? now + w->timeout_ns : 0};
    }
  struct watch_slot *v;
  while (room(w) < w->reserve && (v = victim(w, got))) cut(w, v, CONN_CUT_SHED);
  pthread_mutex_unlock(&w->mu);
  poke(w);
  return got;
}

void watch_close(struct watch *w, struct watch_slot *s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  s->used = s->cut = s->waiting = false;
  s->req = NULL;
  s->deadline = 0;
  pthread_mutex_unlock(&w->mu);
}

void watch_request_read(struct watch *w, struct watch_slot *s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  s->deadline = 0;
  s->waiting = false;
  pthread_mutex_unlock(&w->mu);
}

void watch_request_done(struct watch *w, struct watch_slot *s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  if (s->used && !s->cut) {
    s->served = s->waiting = true;
    s->since = now_ns();
    s->deadline = w->timeout_ns ? s->since + w->timeout_ns : 0;
  }
  pthread_mutex_unlock(&w->mu);
  poke(w);
}

void watch_suspend(struct watch *w, struct watch_slot *s, void *req) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  s->req = req;
  pthread_mutex_unlock(&w->mu);
  poke(w);
}

void watch_resume(struct watch *w, struct watch_slot *s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  s->req = NULL;
  pthread_mutex_unlock(&w->mu);
}
