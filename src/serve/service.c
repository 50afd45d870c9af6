/*
 * service.c — the service's life (tolk_serve.h): set up from the configuration,
 * listen, load the models, announce, then wait for signals on the main
 * thread — SIGHUP reloads, SIGTERM/SIGINT drain and stop. Signals are
 * blocked in every thread and taken with sigtimedwait here, so no handler
 * ever runs in the middle of the server's code.
 *
 * The drain: /ready turns 503 and the listening socket closes at once;
 * requests in flight get up to --drain seconds; then whatever is left is
 * cancelled (its clients get 503), the daemon stops once no connection is
 * suspended (stopping MHD with one suspended is undefined), the schedulers
 * stop, and tolk_serve_run returns 0.
 *
 * Memory: every TOLK_SERVE_HEAP_TRIM_S seconds the main thread gives malloc's free
 * pages back to the system (tolk_serve_heap_give_back).
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "service.h"

struct tolk_serve_config tolk_serve_default_config(void) {
  struct tolk_serve_config c = {0};
  struct sched_params sp = sched_default_params();
  c.host = "127.0.0.1";
  c.port = 8080;
  c.max_batch_tokens = sp.max_batch_tokens;
  c.max_wait_ms = sp.max_wait_ms;
  c.max_queue = sp.max_queue;
  c.max_batch_rows = sp.max_batch_rows;
  c.max_step_growth = sp.max_step_growth;
  c.timeout_s = 60;
  c.drain_s = 30;
  c.conn_timeout_s = 10;
  c.max_body = 1 << 20;
  c.max_chars = 10000;
  c.max_texts = 64;
  c.max_connections = 256;
  return c;
}

static bool loopback(const char *host) {
  return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

int tolk_serve_validate(const struct tolk_serve_config *c, char *msg, size_t msgsz) {
  struct cidr cd;
  for (size_t i = 0; i < c->n_trusted; i++)
    if (!cidr_parse(c->trusted[i], &cd)) {
      snprintf(msg, msgsz, "--trusted-proxy %s: not an address or CIDR range (10.0.0.0/8, fd00::/8)", c->trusted[i]);
      return -1;
    }
  for (size_t i = 0; i < c->n_cors; i++)
    if (strcmp(c->cors[i], "*") && strncmp(c->cors[i], "http://", 7) && strncmp(c->cors[i], "https://", 8)) {
      snprintf(msg, msgsz, "--cors-origin %s: an origin is scheme://host[:port], or *", c->cors[i]);
      return -1;
    }
  if (c->n_models > METRICS_MAX_MODELS) {
    snprintf(msg, msgsz, "at most %d -m folders", METRICS_MAX_MODELS);
    return -1;
  }
  if (c->api_keys) {
    struct keyring k;
    char inner[300];
    if (keyring_load(c->api_keys, &k, inner, sizeof inner)) {
      snprintf(msg, msgsz, "--api-keys %s", inner);
      return -1;
    }
    keyring_free(&k);
  }
  return 0;
}

static struct models_config models_config(const struct tolk_serve_config *c) {
  struct models_config mc = {c->models, c->n_models, c->threads, c->int8, sched_default_params(),
                            c->int8_lm_head, c->vmap, c->bf16};
  mc.sched.max_batch_tokens = c->max_batch_tokens;
  mc.sched.max_wait_ms = c->max_wait_ms;
  mc.sched.max_queue = c->max_queue;
  mc.sched.max_batch_rows = c->max_batch_rows;
  mc.sched.max_step_growth = c->max_step_growth;
  mc.sched.max_queue_wait_ms = (int)(c->max_queue_wait_s * 1e3 + 0.5);
  mc.sched.max_queue_wait_stays = c->max_queue_wait_stays;
  return mc;
}

int tolk_serve_check(const struct tolk_serve_config *c) {
  char msg[1200];
  if (tolk_serve_validate(c, msg, sizeof msg)) {
    fprintf(stderr, "tolk serve: %s\n", msg);
    return 1;
  }
  struct models_config mc = models_config(c);
  struct metrics *m = metrics_create();
  int rc = 0;
  for (size_t i = 0; i < c->n_models; i++) {
    struct engine *e;
    if (engine_open(c->models[i], i, &mc, m, &e, msg, sizeof msg)) {
      fprintf(stderr, "tolk serve: %s\n", msg);
      rc = 1;
      continue;
    }
    printf("ok  %s: %s ->", e->dir, e->source);
    for (size_t k = 0; k < e->n_targets; k++) printf(" %s", e->targets[k].code);
    printf("  (%s%s%s, checksums %s, version %s)\n", e->int8 ? "int8" : "fp32",
           c->int8_lm_head ? ", int8 LM head" : "", c->bf16 == TOLK_BF16_PRODUCTS ? ", bfloat16 products" : c->bf16 ? ", bfloat16 weights" : "", e->verified ? "match tolk-manifest.json" : "not checked: no manifest", e->version);
    engine_close(e);
  }
  metrics_free(m);
  return rc;
}

/* ------------------------------------------------------------------ serving */

static void svc_free(struct service *svc) {
  watch_free(svc->watch);
  models_free(svc->models);
  buckets_free(svc->buckets);
  keyring_free(&svc->keys);
  free(svc->key_chars);
  if (svc->alog && svc->alog != stdout) fclose(svc->alog);
  metrics_free(svc->metrics);
  pthread_mutex_destroy(&svc->alog_mu);
  pthread_mutex_destroy(&svc->live_mu);
  free(svc);
}

static struct service *svc_new(const struct tolk_serve_config *c, char *msg, size_t msgsz) {
  struct service *svc = calloc(1, sizeof *svc);
  if (!svc) return NULL;
  svc->cfg = *c;
  svc->quiesced_fd = -1;
  pthread_mutex_init(&svc->alog_mu, NULL);
  pthread_mutex_init(&svc->live_mu, NULL);
  if (getrandom(&svc->id_salt, sizeof svc->id_salt, 0) != (ssize_t)sizeof svc->id_salt)
    svc->id_salt = (uint64_t)time(NULL) ^ (uint64_t)getpid();
  for (size_t i = 0; i < c->n_trusted; i++) cidr_parse(c->trusted[i], &svc->trusted[i]);
  svc->n_trusted = c->n_trusted;
  struct models_config mc = models_config(c);
  bool ok = (svc->metrics = metrics_create()) && (svc->models = models_create(&mc, svc->metrics)) &&
            (svc->buckets = buckets_create(4096)) &&
            (svc->watch = watch_create(c->conn_timeout_s, (size_t)c->max_connections, svc->metrics, http_gone));
  if (ok && c->api_keys && keyring_load(c->api_keys, &svc->keys, msg, msgsz)) ok = false;
  if (ok && svc->keys.n && !(svc->key_chars = calloc(svc->keys.n, sizeof *svc->key_chars))) ok = false;
  if (ok && c->access_log) {
    svc->alog = !strcmp(c->access_log, "-") ? stdout : fopen(c->access_log, "a");
    if (!svc->alog) {
      snprintf(msg, msgsz, "--access-log %s: %s", c->access_log, strerror(errno));
      ok = false;
    }
  }
  if (!ok) {
    if (!msg[0]) snprintf(msg, msgsz, "out of memory");
    svc_free(svc);
    return NULL;
  }
  return svc;
}

/* How long cancelled requests get to leave the scheduler (one decoder step
 * each, normally milliseconds) before the server exits without them. */
enum { DRAIN_CANCEL_S = 30 };

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits up to `seconds` for every request to be freed. */
static bool wait_idle(struct service *svc, double seconds) {
  for (int waited = 0; atomic_load(&svc->n_live) > 0; waited += 20) {
    if (waited >= (int)(seconds * 1000)) return false;
    models_collect(svc->models);
    sleep_ms(20);
  }
  return true;
}

/* Waits for the requests in flight (up to --drain), then cancels the rest.
 * false when some are still held after that: a cancelled request leaves at
 * the scheduler's next step boundary, and MHD_stop_daemon aborts the
 * process while a connection is still suspended. */
static bool drain(struct service *svc) {
  atomic_store(&svc->draining, true);
  http_quiesce(svc);
  long live = atomic_load(&svc->n_live);
  if (live) fprintf(stderr, "tolk serve: draining %ld request(s), up to %g s\n", live, svc->cfg.drain_s);
  if (wait_idle(svc, svc->cfg.drain_s)) return true;
  fprintf(stderr, "tolk serve: drain time over: cancelling %ld request(s)\n", atomic_load(&svc->n_live));
  http_cancel_all(svc);
  if (wait_idle(svc, DRAIN_CANCEL_S)) return true;
  fprintf(stderr, "tolk serve: %ld request(s) still held %d s after their cancel; exiting without them\n",
          atomic_load(&svc->n_live), DRAIN_CANCEL_S);
  return false;
}

static void reload(struct service *svc) {
  char msg[1200] = "";
  fprintf(stderr, "tolk serve: SIGHUP: reloading the models\n");
  if (models_reload(svc->models, msg, sizeof msg))
    fprintf(stderr, "tolk serve: reload failed, the previous models keep serving: %s\n", msg);
  else
    fprintf(stderr, "tolk serve: reload done: the new models serve new requests\n");
}

/* glibc keeps what is freed in its arenas for reuse, and traffic of many
 * shapes (batches of every size, sources of every length) fragments them:
 * in a 30-minute soak the heap in use stayed at 39 MB while the free memory
 * malloc held grew from 11 to 19 MB and RSS with it. malloc_trim(0) returns
 * the free pages inside the arenas as well as at their tops, so RSS follows
 * the memory in use; the next use of such a page costs one page fault. */
void tolk_serve_heap_give_back(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* A batch's large buffers (the first run of each input shape allocates every
 * intermediate from the heap; arenas are reallocated as batches widen and
 * narrow) are mapped and unmapped on their own instead of carved from the
 * arenas, where they left free holes that small allocations then pinned:
 * after the same mix of bursts and calm, malloc held 62 MB free with
 * glibc's sliding threshold (which rises to the largest block freed, up to
 * 32 MB) and 5 MB with this one. Called before any thread starts. */
enum { HEAP_MMAP_THRESHOLD = 256 << 10 };

void tolk_serve_heap_setup(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD);
#endif
}

static void announce(struct service *svc) {
  const char *h = svc->cfg.host;
  bool v6 = strchr(h, ':') != NULL;
  if (!loopback(h) && !svc->keys.n)
    fprintf(stderr, "tolk serve: warning: listening on %s without --api-keys: anyone who can reach it can use it\n", h);
  printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", h, v6 ? "]" : "", svc->port);
  fflush(stdout);
}

int tolk_serve_run(const struct tolk_serve_config *c) {
  char msg[1200] = "";
  if (tolk_serve_validate(c, msg, sizeof msg)) {
    fprintf(stderr, "tolk serve: %s\n", msg);
    return 1;
  }
  /* Before any thread starts, so that every thread inherits the mask. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  tolk_serve_heap_setup();
  struct service *svc = svc_new(c, msg, sizeof msg);
  if (!svc) {
    fprintf(stderr, "tolk serve: %s\n", msg);
    return 1;
  }
  /* Listen first: /health answers 503 while the models load. */
  if (http_start(svc, msg, sizeof msg) || models_load(svc->models, msg, sizeof msg)) {
    fprintf(stderr, "tolk serve: %s\n", msg);
    http_stop(svc);
    svc_free(svc);
    return 1;
  }
  atomic_store(&svc->loaded, true);
  announce(svc);
  for (unsigned ticks = 1;; ticks++) {
    struct timespec tick = {0, 200 * 1000000L};
    int sig = sigtimedwait(&set, NULL, &tick);
    if (sig == SIGHUP) reload(svc);
    else if (sig == SIGTERM || sig == SIGINT) break;
    models_collect(svc->models);
    if (ticks % (TOLK_SERVE_HEAP_TRIM_S * 5) == 0) tolk_serve_heap_give_back();
  }
  fprintf(stderr, "tolk serve: shutting down\n");
  if (!drain(svc)) return 1; /* the scheduler still holds them: leave it all to the exit */
  http_stop(svc);
  svc_free(svc);
  return 0;
}
