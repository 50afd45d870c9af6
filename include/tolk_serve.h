/*
 * tolk_serve.h — the HTTP translation service (`tolk serve`) as a library
 * call: its whole configuration in one struct, a check that validates it
 * (and the models) without serving, and the server itself, which returns
 * when SIGTERM or SIGINT has drained it. Built on tolk.h; links
 * libmicrohttpd and cJSON. Everything under src/serve/ is internal.
 */
#ifndef TOLK_SERVE_H
#define TOLK_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#define TOLK_SERVE_MAX_LIST 16

struct tolk_serve_config {
  const char *models[TOLK_SERVE_MAX_LIST]; /* -m folders; none: the caller's default */
  size_t n_models;
  const char *host;                   /* bind address (default 127.0.0.1) */
  int port;                           /* 0: any free port */
  int threads;                        /* intra-op threads per model; 0: all cores */
  bool int8;
  int max_batch_tokens, max_wait_ms, max_queue; /* the scheduler's (sched.h) */
  int max_batch_rows;                 /* rows (beams count) in one decoding batch; 0: no bound */
  double max_step_growth;             /* bound the rows where a step would take over this many times a
                                         one-sentence step, as measured (sched.h; 0: no such bound) */
  double timeout_s;                   /* a request's translation deadline (504 past it) */
  double max_queue_wait_s;            /* refuse (503) what would wait longer to start; 0: only the deadline */
  double max_queue_wait_stays;        /* the same bound as a multiple of a sentence's expected time in the
                                         batch at the current load (when max_queue_wait_s is 0; 0: none) */
  double drain_s;                     /* SIGTERM: how long in-flight requests may take */
  double conn_timeout_s;              /* idle connections, and the time to send a request */
  size_t max_body;                    /* bytes (413 past it) */
  long max_chars;                     /* per text, in characters (code points) */
  long max_texts;                     /* per request */
  int max_connections;
  const char *api_keys;               /* key file, or NULL: no keys */
  double rate_per_min;                /* per client (or key); 0: no limit */
  const char *cors[TOLK_SERVE_MAX_LIST];   /* allowed Origin values ("*": any) */
  size_t n_cors;
  const char *trusted[TOLK_SERVE_MAX_LIST];/* --trusted-proxy CIDRs */
  size_t n_trusted;
  const char *access_log;             /* file, "-" for stdout, NULL for none */
  bool int8_lm_head;                  /* tolk_translator_params.int8_lm_head */
  int bf16;                           /* tolk_translator_params.bf16 (TOLK_BF16_*) */
  const char *vmap;                   /* tolk_translator_params.vmap (NULL: none) */
};

struct tolk_serve_config tolk_serve_default_config(void);

/* Validates the flags (addresses, CIDRs, the key file) into msg; 0 when
 * usable. Touches no model. */
int tolk_serve_validate(const struct tolk_serve_config *c, char *msg, size_t msgsz);

/* --check: tolk_serve_validate, then every model opened and verified (manifest,
 * graphs, a smoke translation), a line per model on stdout. 0 all good, 1
 * not. */
int tolk_serve_check(const struct tolk_serve_config *c);

/* Serves until SIGTERM/SIGINT (then drains, see DESIGN.md's "The service")
 * and returns the exit status: 0 after a drain (what was left past
 * drain_s is cancelled and answered 503), 1 when it could not start, or
 * when cancelled requests were still held 30 s later (their memory is then
 * left to the process's exit). Prints "listening on http://HOST:PORT" on stdout once the models
 * are loaded; SIGHUP reloads them. */
int tolk_serve_run(const struct tolk_serve_config *c);

/* The service's allocator policy, for any process that is to run or be
 * measured as tolk serve runs (tolk doctor): glibc's blocks of 256 KiB and
 * more mapped on their own (tolk_serve_heap_setup, before any thread
 * starts) and, every TOLK_SERVE_HEAP_TRIM_S seconds, the free pages inside
 * its arenas given back (tolk_serve_heap_give_back), so that RSS follows the
 * memory in use. No-ops where the C library is not glibc. */
#define TOLK_SERVE_HEAP_TRIM_S 10
void tolk_serve_heap_setup(void);
void tolk_serve_heap_give_back(void);
/* Heap bytes allocated and not freed (malloc's arenas and its mapped
 * blocks): what a leak grows, to the byte. False where the allocator does
 * not say (glibc before 2.33, other C libraries). */
bool tolk_serve_heap_in_use(size_t *bytes);

#endif /* TOLK_SERVE_H */
