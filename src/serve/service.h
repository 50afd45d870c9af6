/*
 * service.h — the service's internals shared by its parts: the running
 * service, one request as it goes through libmicrohttpd (http.c), the
 * scheduler (tasks.c) and an API handler (api_*.c), and the route table
 * that ties a path to its handler.
 *
 * A request's life:
 *   headers in   http.c makes a `struct req`, routes it (404, 405, OPTIONS
 *                and an over-long Content-Length answer here, before any
 *                body is read), reads the body into a bounded buffer;
 *   body in      the fields are parsed (parse.c), the key and the rate limit
 *                checked, then the route's start() runs: it validates, and
 *                either answers at once or submits texts to the scheduler
 *                (req_submit) and returns NEXT_WAIT: the connection is
 *                suspended;
 *   texts done   each task's done() arrives on the scheduler thread; the
 *                last one resumes the connection, and http.c calls the
 *                route's finish() to answer. A streamed (SSE) answer
 *                instead suspends and resumes its content reader per event.
 *   completed    MHD's completion callback writes the access log line and
 *                drops MHD's reference; the request is freed when the
 *                scheduler has dropped its own (one per task still pending).
 *
 * Locking: req->mu guards the tasks, their results, the SSE buffer and the
 * suspended/closed flags. Order: req->mu, then the watch's lock, then MHD's
 * own; the watch's `gone` takes no req->mu (it only cancels jobs).
 */
#ifndef TOLK_SERVE_SERVICE_H
#define TOLK_SERVE_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "api.h"
#include "auth.h"
#include "html.h"
#include "lang.h"
#include "metrics.h"
#include "models.h"
#include "sched.h"
#include "tolk_serve.h"
#include "watch.h"

struct service {
  struct tolk_serve_config cfg;
  struct metrics *metrics;
  struct models *models;
  struct keyring keys;
  _Atomic uint64_t *key_chars; /* characters translated per key (/v2/usage) */
  _Atomic uint64_t chars_total;
  struct buckets *buckets;
  struct cidr trusted[TOLK_SERVE_MAX_LIST];
  size_t n_trusted;
  FILE *alog;
  pthread_mutex_t alog_mu;
  struct MHD_Daemon *daemon;
  int quiesced_fd;           /* the listening socket after http_quiesce, -1 before */
  char host[128];
  unsigned port;
  atomic_bool loaded, draining;
  struct watch *watch;
  pthread_mutex_t live_mu;
  struct req *live;            /* every request not yet freed */
  atomic_long n_live;
  _Atomic uint64_t next_id;
  uint64_t id_salt;
};

enum err_style { ERR_LIBRE, ERR_DEEPL, ERR_NATIVE };
enum { M_GET = 1, M_POST = 2 };

enum req_next {
  NEXT_REPLIED, /* a response is queued */
  NEXT_WAIT,    /* suspended until the tasks are done (or streaming) */
  NEXT_FAIL     /* nothing could be queued: close the connection */
};

struct req;

struct route {
  const char *path;
  unsigned methods;
  enum metric_endpoint ep;
  enum err_style style;
  bool models;  /* needs the models loaded (503 while loading) */
  bool auth;    /* a key is required when --api-keys is given */
  bool limited; /* counts against --rate-limit (or the key's rate) */
  enum req_next (*start)(struct req *r);
  enum req_next (*finish)(struct req *r); /* after NEXT_WAIT, with every task done */
};

/* The routes (NULL path ends the table) and the one for a path (NULL: 404). */
extern const struct route serve_routes[];
const struct route *route_find(const char *path);

/* One text of a request in the scheduler. */
struct task {
  struct req *r;
  size_t index;
  const struct engine *e;
  struct sched_job *job;
  struct sched_result *res;  /* set by done() */
  struct html_doc html;      /* format=html: the document's texts */
  char *source;              /* the document (html) or NULL */
  size_t source_len;
  struct detection detected; /* source "auto" */
  size_t chars;              /* the text as sent, in code points (DeepL's billed_characters) */
};

enum req_phase { PH_BODY, PH_WORK, PH_ANSWERED };

#define REQ_MAX_HEADERS 4

struct req {
  struct service *svc;
  struct MHD_Connection *conn;
  struct watch_slot *slot;
  const struct route *route;
  struct req *prev, *next;   /* service's live list */
  pthread_mutex_t mu;
  int refs;                  /* MHD's, the streamed response's, one per pending task */
  bool suspended, closed;
  atomic_bool gone;          /* the client hung up while we worked */
  enum req_phase phase;
  int64_t t0;
  bool head;                 /* HEAD: answer as GET, MHD sends no body */
  bool post;                 /* POST: the body holds the fields */
  char id[80], client[64], origin[256];
  char path[256];            /* the URL's path */
  bool cors;                 /* Origin allowed: add CORS headers */
  char content_type[160];
  char *body;
  size_t len, cap, received;
  bool too_big;
  cJSON *fields;
  int key;                   /* index into svc->keys, -1 */
  struct model_set *ms;
  struct task *tasks;
  size_t n_tasks, pending;
  void *api;                 /* the handler's own state */
  void (*api_free)(void *api);
  /* streamed answers (tasks.c) */
  bool stream, stream_end;
  char *sse;
  size_t sse_len, sse_cap, sse_off;
  void (*on_sentence)(struct req *r, struct task *t, const struct sched_sentence *s); /* under mu */
  void (*on_stream_end)(struct req *r);                                               /* under mu */
  /* for the answer and the access log */
  int status;
  char error[160];
  size_t chars, sentences;
  double queue_ms, compute_ms;
  int retry_after;
  struct {
    const char *name;
    char value[128];
  } headers[REQ_MAX_HEADERS];
  size_t n_headers;
};

/* ------------------------------------------------------------------ http.c */

/* Binds and starts the daemon (svc->port gets the port bound). 0 / -1. */
int http_start(struct service *svc, char *msg, size_t msgsz);
/* Stops accepting connections (SIGTERM); requests in flight go on. */
void http_quiesce(struct service *svc);
/* Cancels the work of every live request (the drain's deadline passed). */
void http_cancel_all(struct service *svc);
void http_stop(struct service *svc);
/* The watch's hang-up callback: cancels a suspended request's jobs. */
void http_gone(void *req);

/* Drops one of the request's references (MHD's, the stream's, a task's). */
void req_unref(struct req *r);
/* Queues `body` (len bytes; freed by MHD when `take`, else copied) with the
 * request id, CORS and any added headers. */
enum req_next req_reply(struct req *r, int status, const char *content_type, char *body, size_t len,
                        bool take);
/* Queues cJSON's rendering of j (which it frees). */
enum req_next req_json(struct req *r, int status, cJSON *j);
/* An error in the route's style ({"error"} or DeepL's {"message"}); counts
 * `reject` (-1: none) in the rejections metric. */
enum req_next req_fail(struct req *r, int status, int reject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds a response header (name: a string constant). */
void req_add_header(struct req *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *req_header_in(struct req *r, const char *name);
/* Adds the standard headers to a response made elsewhere (SSE). */
void req_decorate(struct req *r, struct MHD_Response *resp);
/* The per-text character limit for this request (its key's, else --max-chars). */
long req_max_chars(const struct req *r);

/* ------------------------------------------------------------------ tasks.c */

/* Room for n tasks. false when out of memory. */
bool req_tasks(struct req *r, size_t n);
/* Submits task i's text to e's scheduler. On failure nothing is pending for
 * it and err says why. */
tolk_status req_submit(struct req *r, size_t i, const struct engine *e, const char *text, size_t len,
                       const struct sched_text_params *p, tolk_error *err);
/* Answers a failed submission (503 queue full, 400 too long, …), cancelling
 * the tasks already submitted. */
enum req_next req_submit_failed(struct req *r, const tolk_error *err);
/* Suspends until every task is done; if they already are, finishes now. */
enum req_next req_wait(struct req *r);
/* After the tasks: 0 when all succeeded, else an error answer queued
 * (504 past the deadline, 503 cancelled, 500) and its status returned. */
int req_tasks_failed(struct req *r, enum req_next *next);
/* Cancels every task (client gone, shutdown). req_cancel takes r->mu;
 * the _unlocked form is for the watch, which may not, and is safe only
 * while the request is suspended (its tasks are all submitted). */
void req_cancel(struct req *r);
void req_cancel_unlocked(struct req *r);
/* Starts a streamed text/event-stream answer over the pending tasks;
 * r->stream and the hooks must be set before the first submission. */
enum req_next req_stream(struct req *r);
/* Appends one SSE event (under r->mu, from on_sentence / on_stream_end). */
void req_sse_event(struct req *r, const char *event, const char *data);
/* A sched_text_params for this request: --timeout's deadline set. */
struct sched_text_params req_text_params(const struct req *r);

/* ------------------------------------------------------------------ the APIs */

enum req_next libre_translate(struct req *r);
enum req_next libre_translate_finish(struct req *r);
enum req_next libre_detect(struct req *r);
enum req_next libre_languages(struct req *r);
enum req_next libre_settings(struct req *r);
enum req_next deepl_translate(struct req *r);
enum req_next deepl_translate_finish(struct req *r);
enum req_next deepl_languages(struct req *r);
enum req_next deepl_usage(struct req *r);
enum req_next native_translate(struct req *r);
enum req_next native_translate_finish(struct req *r);
enum req_next ops_health(struct req *r);
enum req_next ops_ready(struct req *r);
enum req_next ops_metrics(struct req *r);
enum req_next ops_openapi(struct req *r);
enum req_next ops_web(struct req *r);

/* Shared by the translate APIs (api_libre.c): resolves source ("auto"
 * detects per text) and target for text i, storing the engine and the tag
 * in *e / *tag; on failure queues a 400 naming what is supported. */
bool api_resolve(struct req *r, const char *source, const char *target, const char *text, size_t len,
                 struct task *t, const char **tag, enum req_next *next);
/* Counts and checks the characters of n texts against the request's limit;
 * queues LibreTranslate's 400 when over. */
bool api_check_chars(struct req *r, const char *const *texts, size_t n, enum req_next *next);
/* A task's translation with hypothesis k of each sentence (0: the best),
 * lines as in the source; for format=html the document with its texts
 * replaced. A new string (caller frees), NULL when out of memory. */
char *api_output(const struct task *t, size_t k);
/* Parses text as HTML into t (a 400 queued when broken) and returns the
 * texts to translate, one a line (caller frees). */
char *api_html_input(struct req *r, struct task *t, const char *text, size_t *len, enum req_next *next);

/* ------------------------------------------------------------------ assets (generated) */

struct asset {
  const char *path;         /* "/", "/app.js", "/openapi.json" */
  const char *content_type;
  const unsigned char *data;
  size_t size;
  const char *etag;         /* quoted */
};

extern const struct asset serve_assets[]; /* NULL path ends it */
const struct asset *asset_find(const char *path);

#endif /* TOLK_SERVE_SERVICE_H */
