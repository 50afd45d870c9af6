/*
 * tasks.c — a request's texts in the scheduler: submission, the callbacks
 * (on the scheduler thread: they only record, append and resume the
 * connection), suspension while the texts are translated, the mapping of
 * their outcome to HTTP statuses, and streamed answers as Server-Sent
 * Events whose content reader suspends itself while it has nothing to send
 * (libmicrohttpd would otherwise call it again at once, spinning).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service.h"

/* Under r->mu: lets MHD run the connection again. */
static void wake_locked(struct req *r) {
  if (!r->suspended || r->closed) return;
  r->suspended = false;
  watch_resume(r->svc->watch, r->slot);
  MHD_resume_connection(r->conn);
}

static void task_sentence(void *user, const struct sched_sentence *s) {
  struct task *t = user;
  struct req *r = t->r;
  pthread_mutex_lock(&r->mu);
  if (r->stream && r->on_sentence && !r->closed) {
    r->on_sentence(r, t, s);
    wake_locked(r);
  }
  pthread_mutex_unlock(&r->mu);
}

static void task_done(void *user, struct sched_result *res) {
  struct task *t = user;
  struct req *r = t->r;
  pthread_mutex_lock(&r->mu);
  t->res = res;
  r->pending--;
  for (size_t i = 0; res && i < res->n_sentences; i++) {
    const struct sched_sentence *s = &res->sentences[i];
    if (s->queue_ms > r->queue_ms) r->queue_ms = s->queue_ms;
    r->compute_ms += s->encode_ms + s->decode_ms;
  }
  if (res) r->sentences += res->n_sentences;
  if (r->pending == 0 || r->stream) wake_locked(r);
  pthread_mutex_unlock(&r->mu);
  req_unref(r); /* the task's reference */
}

bool req_tasks(struct req *r, size_t n) {
  r->tasks = calloc(n ? n : 1, sizeof *r->tasks);
  if (!r->tasks) return false;
  r->n_tasks = n;
  for (size_t i = 0; i < n; i++) {
    r->tasks[i].r = r;
    r->tasks[i].index = i;
  }
  return true;
}

struct sched_text_params req_text_params(const struct req *r) {
  struct sched_text_params p = {0};
  if (r->svc->cfg.timeout_s > 0) p.deadline_ns = r->t0 + (int64_t)(r->svc->cfg.timeout_s * 1e9);
  return p;
}

tolk_status req_submit(struct req *r, size_t i, const struct engine *e, const char *text, size_t len,
                       const struct sched_text_params *p, tolk_error *err) {
  static const struct sched_callbacks cb = {task_sentence, task_done};
  struct task *t = &r->tasks[i];
  t->e = e;
  pthread_mutex_lock(&r->mu);
  r->pending++;
  r->refs++;
  struct sched_text_params tp = *p;
  tp.follows = i > 0;
  tp.later_texts = r->n_tasks - 1 - i;
  tp.request = r;
  tolk_status st = sched_submit(e->sched, text, len, &tp, &cb, t, &t->job, err);
  if (st) {
    r->pending--;
    r->refs--;
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

void req_cancel_unlocked(struct req *r) {
  for (size_t i = 0; i < r->n_tasks; i++)
    if (r->tasks[i].job) sched_cancel(r->tasks[i].job);
}

void req_cancel(struct req *r) {
  pthread_mutex_lock(&r->mu);
  req_cancel_unlocked(r);
  pthread_mutex_unlock(&r->mu);
}

enum req_next req_submit_failed(struct req *r, const tolk_error *err) {
  req_cancel(r);
  switch (err->status) {
  case TOLK_ERR_LIMIT:
    if (!strncmp(err->message, SCHED_QUEUE_FULL, strlen(SCHED_QUEUE_FULL))) {
      r->retry_after = 1;
      return req_fail(r, 503, REJ_QUEUE, "The translation queue is full; retry shortly");
    }
    return req_fail(r, 400, REJ_TEXT_LIMIT, "Invalid request: %s", err->message);
  case TOLK_ERR_INVALID_ARGUMENT: return req_fail(r, 400, REJ_BAD_REQUEST, "Invalid request: %s", err->message);
  case TOLK_ERR_CANCELLED:
    r->retry_after = 1;
    return req_fail(r, 503, REJ_UNAVAILABLE, "shutting down");
  default: return req_fail(r, 500, -1, "Cannot translate text: %s", err->message);
  }
}

enum req_next req_wait(struct req *r) {
  pthread_mutex_lock(&r->mu);
  if (r->pending == 0) {
    pthread_mutex_unlock(&r->mu);
    return r->route->finish(r);
  }
  r->suspended = true;
  watch_suspend(r->svc->watch, r->slot, r);
  MHD_suspend_connection(r->conn);
  pthread_mutex_unlock(&r->mu);
  return NEXT_WAIT;
}

int req_tasks_failed(struct req *r, enum req_next *next) {
  for (size_t i = 0; i < r->n_tasks; i++) {
    const struct sched_result *res = r->tasks[i].res;
    if (!res) {
      *next = req_fail(r, 500, -1, "Cannot translate text: out of memory");
      return 500;
    }
    if (res->status == TOLK_OK) continue;
    if (res->status == TOLK_ERR_CANCELLED && res->deadline) {
      *next = req_fail(r, 504, REJ_DEADLINE, "Translation timed out after %g s (--timeout)", r->svc->cfg.timeout_s);
      return 504;
    }
    if (res->status == TOLK_ERR_CANCELLED) {
      r->retry_after = 1;
      *next = req_fail(r, 503, REJ_UNAVAILABLE, "Translation cancelled: %s", res->message);
      return 503;
    }
    *next = req_fail(r, 500, -1, "Cannot translate text: %s", res->message);
    return 500;
  }
  return 0;
}

/* ------------------------------------------------------------------ Server-Sent Events */

void req_sse_event(struct req *r, const char *event, const char *data) {
  size_t need = strlen(event) + strlen(data) + 16;
  if (r->sse_len + need > r->sse_cap) {
    size_t cap = r->sse_cap ? r->sse_cap : 4096;
    while (cap < r->sse_len + need) cap *= 2;
    char *p = realloc(r->sse, cap);
    if (!p) return; /* the event is lost; the final one says what is missing */
    r->sse = p;
    r->sse_cap = cap;
  }
  r->sse_len += (size_t)snprintf(r->sse + r->sse_len, r->sse_cap - r->sse_len, "event: %s\ndata: %s\n\n", event, data);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  struct req *r = cls;
  pthread_mutex_lock(&r->mu);
  if (r->sse_off == r->sse_len && r->pending == 0 && !r->stream_end) {
    r->stream_end = true;
    if (r->on_stream_end) r->on_stream_end(r);
  }
  ssize_t n;
  if (r->sse_off < r->sse_len) {
    size_t k = r->sse_len - r->sse_off < max ? r->sse_len - r->sse_off : max;
    memcpy(buf, r->sse + r->sse_off, k);
    r->sse_off += k;
    if (r->sse_off == r->sse_len) r->sse_off = r->sse_len = 0;
    n = (ssize_t)k;
  } else if (r->stream_end) {
    n = MHD_CONTENT_READER_END_OF_STREAM;
  } else {
    /* Nothing yet: park the connection until a callback has something. */
    r->suspended = true;
    watch_suspend(r->svc->watch, r->slot, r);
    MHD_suspend_connection(r->conn);
    n = 0;
  }
  pthread_mutex_unlock(&r->mu);
  return n;
}

static void sse_free(void *cls) { req_unref(cls); }

enum req_next req_stream(struct req *r) {
  struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, r, sse_free);
  if (!resp) {
    req_cancel(r);
    return NEXT_FAIL;
  }
  pthread_mutex_lock(&r->mu);
  r->refs++; /* the response's */
  pthread_mutex_unlock(&r->mu);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  MHD_add_response_header(resp, "X-Accel-Buffering", "no");
  req_decorate(r, resp);
  enum MHD_Result ok = MHD_queue_response(r->conn, 200, resp);
  MHD_destroy_response(resp); /* MHD holds it now, or it is freed (sse_free) */
  r->status = 200;
  return ok == MHD_YES ? NEXT_REPLIED : NEXT_FAIL;
}
