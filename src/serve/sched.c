/*
 * sched.c — INTERIM scheduler: sched.h's contract kept faithfully, batching
 * left out, so that the HTTP service can be built and tested end to end
 * before the continuous-batching scheduler lands in its place.
 *
 * How it behaves:
 *  - sched_submit splits and tokenizes on the caller's thread with the rules
 *    of tolk_translator_translate_text (lines, sentences, a leading >>tag<<,
 *    over-long sentences halved at a space, a word that never fits an error),
 *    so a text's sentence count is known before it is queued and a text
 *    whose sentences do not all fit is refused whole (TOLK_ERR_LIMIT,
 *    message "queue full: …").
 *  - One worker thread translates ONE SENTENCE AT A TIME with
 *    tolk_translator_generate (num_return_sequences = n_best), taking the
 *    texts round-robin: a long text does not hold up a short one behind it.
 *    A sentence's ids are therefore those of tolk translate on it alone.
 *  - Cancellation and deadlines are honoured between sentences: before each
 *    sentence the queue is swept, and a cancelled or late text leaves with
 *    done(TOLK_ERR_CANCELLED). A sentence already running finishes first.
 *  - max_batch_tokens and max_wait_ms have no effect (no batches); the
 *    batch histograms get one observation per sentence (its beams and
 *    beams × source length); encode_ms is 0 (generate() runs the encoder and
 *    the decoder in one call), so METRIC_H_ENCODE_MS is not observed.
 */
#include "sched.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "metrics.h"
#include "mt/mt.h"

struct sched_params sched_default_params(void) {
  struct sched_params p = {4096, 256, 2};
  return p;
}

struct piece {
  size_t begin, end, line;
  tolk_ids ids;
};

struct sched_job {
  _Atomic int refs;
  struct sched *s;
  struct sched_job *next; /* queue link, under s->mu */
  char *text;
  size_t len;
  char tag[64];
  bool has_tag;
  int beams, max_new, n_best;
  int64_t deadline_ns, submit_ns;
  struct sched_callbacks cb;
  void *user;
  struct piece *pieces;
  size_t n, next_piece;
  struct sched_sentence *out; /* n entries; the first next_piece are filled */
  _Atomic bool cancel;
};

struct sched {
  const tolk_translator *tr;
  struct sched_params p;
  struct metrics *m;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  struct sched_job *head, *tail;
  size_t queued, live_rows; /* under mu */
  bool stop;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_since(int64_t t0, int64_t t1) { return (double)(t1 - t0) * 1e-6; }

/* ------------------------------------------------------------------ splitting
 * The rules of src/mt/document.c (encode_fitting is static there). */

static bool add_piece(struct sched_job *j, size_t *cap, struct mt_span sp, size_t line, tolk_ids ids) {
  if (j->n == *cap) {
    size_t c = *cap ? 2 * *cap : 8;
    struct piece *p = realloc(j->pieces, c * sizeof *p);
    if (!p) return false;
    j->pieces = p;
    *cap = c;
  }
  j->pieces[j->n++] = (struct piece){sp.begin, sp.end, line, ids};
  return true;
}

static tolk_status encode_span(const tolk_translator *tr, const char *text, struct mt_span sp,
                               const char *tag, tolk_ids *ids, tolk_error *err) {
  size_t tl = tag ? strlen(tag) + 1 : 0, len = sp.end - sp.begin;
  char *s = malloc(tl + len + 1);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  if (tl) {
    memcpy(s, tag, tl - 1);
    s[tl - 1] = ' ';
  }
  memcpy(s + tl, text + sp.begin, len);
  size_t n = tl + len;
  tolk_status st = tolk_tokenizer_encode_batch(tolk_translator_tokenizer(tr), (const char *const *)&s, &n,
                                               1, 0, ids, err);
  free(s);
  return st;
}

static tolk_status encode_fitting(struct sched_job *j, size_t *cap, struct mt_span sp, size_t line,
                                  size_t limit, int depth, tolk_error *err) {
  const tolk_translator *tr = j->s->tr;
  tolk_ids ids;
  tolk_status st = encode_span(tr, j->text, sp, j->has_tag ? j->tag : NULL, &ids, err);
  if (st) return st;
  if (ids.n <= limit) {
    if (add_piece(j, cap, sp, line, ids)) return TOLK_OK;
    tolk_ids_free(&ids, 1);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  }
  tolk_ids_free(&ids, 1);
  size_t mid = sp.begin + (sp.end - sp.begin) / 2, cut = 0;
  for (size_t d = 0; !cut && d < (sp.end - sp.begin) / 2; d++) {
    if (mid + d < sp.end && j->text[mid + d] == ' ') cut = mid + d;
    else if (mid > sp.begin + d && j->text[mid - d] == ' ') cut = mid - d;
  }
  if (!cut || depth > 40)
    return tolk_fail(err, TOLK_ERR_LIMIT,
                     "translate: a word of %zu bytes at byte %zu has more tokens than the model's %zu positions",
                     sp.end - sp.begin, sp.begin, limit);
  st = encode_fitting(j, cap, (struct mt_span){sp.begin, cut}, line, limit, depth + 1, err);
  if (!st) st = encode_fitting(j, cap, (struct mt_span){cut + 1, sp.end}, line, limit, depth + 1, err);
  return st;
}

static size_t leading_tag(const char *text, size_t len) {
  if (len < 4 || text[0] != '>' || text[1] != '>') return 0;
  const char *close = memmem(text + 2, len - 2, "<<", 2);
  return close ? (size_t)(close - text) + 2 : 0;
}

static tolk_status split_text(struct sched_job *j, tolk_error *err) {
  size_t tl = leading_tag(j->text, j->len);
  if (tl && tl < sizeof j->tag) {
    memcpy(j->tag, j->text, tl);
    j->tag[tl] = '\0';
    j->has_tag = true;
  }
  struct mt_spans spans = {0};
  if (!mt_split_sentences(j->text, j->len, &spans)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  if (tl && tl < sizeof j->tag && spans.n) {
    struct mt_span *f = &spans.spans[0];
    f->begin = f->begin + tl < f->end ? f->begin + tl : f->end;
    while (f->begin < f->end && j->text[f->begin] == ' ') f->begin++;
  }
  size_t limit = (size_t)mt_max_positions(j->s->tr), cap = 0, line = 0, at = 0;
  tolk_status st = TOLK_OK;
  for (size_t i = 0; i < spans.n && !st; i++) {
    for (; at < spans.spans[i].begin; at++) line += j->text[at] == '\n';
    if (spans.spans[i].end > spans.spans[i].begin) st = encode_fitting(j, &cap, spans.spans[i], line, limit, 0, err);
  }
  free(spans.spans);
  return st;
}

/* ------------------------------------------------------------------ jobs */

static void sentence_release(struct sched_sentence *s) {
  for (size_t h = 0; h < s->n_hyps; h++) {
    free(s->hyps[h].text);
    free(s->hyps[h].ids);
  }
  free(s->hyps);
}

static void job_free(struct sched_job *j) {
  for (size_t i = 0; i < j->n; i++) tolk_ids_free(&j->pieces[i].ids, 1);
  if (j->out)
    for (size_t i = 0; i < j->next_piece; i++) sentence_release(&j->out[i]);
  free(j->out);
  free(j->pieces);
  free(j->text);
  free(j);
}

void sched_job_release(struct sched_job *j) {
  if (j && atomic_fetch_sub(&j->refs, 1) == 1) job_free(j);
}

void sched_cancel(struct sched_job *j) {
  if (j) atomic_store(&j->cancel, true);
}

void sched_result_free(struct sched_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_sentences; i++) sentence_release(&r->sentences[i]);
  free(r->sentences);
  free(r->text);
  free(r);
}

/* Two translations on one line get a space only between ASCII words, as
 * document.c joins them. */
static bool needs_space(const char *prev, const char *next) {
  size_t pl = strlen(prev);
  if (!pl || !*next) return false;
  unsigned char a = (unsigned char)prev[pl - 1], b = (unsigned char)*next;
  return a < 0x80 && b < 0x80 && a != ' ' && b != ' ';
}

static char *join(const struct sched_sentence *s, size_t n) {
  size_t total = 1 + (n ? s[n - 1].line : 0);
  for (size_t i = 0; i < n; i++) total += strlen(s[i].hyps[0].text) + 1;
  char *out = malloc(total);
  if (!out) return NULL;
  size_t w = 0, line = 0;
  for (size_t i = 0; i < n; i++) {
    const char *t = s[i].hyps[0].text;
    if (s[i].line > line) {
      while (line < s[i].line) out[w++] = '\n', line++;
    } else if (i > 0 && needs_space(s[i - 1].hyps[0].text, t)) {
      out[w++] = ' ';
    }
    size_t l = strlen(t);
    memcpy(out + w, t, l);
    w += l;
  }
  out[w] = '\0';
  return out;
}

/* Ends a job: builds its result, calls done() and drops the scheduler's
 * reference. Runs on the scheduler thread, without the lock. */
static void job_finish(struct sched_job *j, tolk_status st, bool deadline, const char *message) {
  struct sched_result *r = calloc(1, sizeof *r);
  if (r) {
    r->status = st;
    r->deadline = deadline;
    snprintf(r->message, sizeof r->message, "%s", message ? message : "");
    r->sentences = j->out;
    r->n_sentences = j->next_piece;
    j->out = NULL;
    for (size_t i = 0; i < r->n_sentences; i++) {
      const struct sched_sentence *s = &r->sentences[i];
      if (s->queue_ms > r->queue_ms) r->queue_ms = s->queue_ms;
      if (s->encode_ms > r->encode_ms) r->encode_ms = s->encode_ms;
      if (s->decode_ms > r->decode_ms) r->decode_ms = s->decode_ms;
    }
    if (st == TOLK_OK && !(r->text = join(r->sentences, r->n_sentences))) {
      r->status = TOLK_ERR_NO_MEMORY;
      snprintf(r->message, sizeof r->message, "out of memory");
    }
    r->total_ms = ms_since(j->submit_ns, now_ns());
  }
  size_t left = j->n - j->next_piece;
  if (st == TOLK_ERR_CANCELLED && left)
    metrics_count(j->s->m, deadline ? METRIC_C_DEADLINE : METRIC_C_CANCELLED, left);
  /* done() is owed exactly once even when memory ran out: then r is NULL
   * and the callee sees that. */
  j->cb.done(j->user, r);
  sched_job_release(j);
}

/* ------------------------------------------------------------------ the worker */

static tolk_status translate_piece(struct sched *s, struct sched_job *j, struct sched_sentence *out,
                                   tolk_error *err) {
  const struct piece *pc = &j->pieces[j->next_piece];
  tolk_generate_params gp = tolk_generate_default_params(s->tr);
  if (j->beams) gp.num_beams = j->beams;
  if (j->max_new) gp.max_new_tokens = j->max_new;
  size_t R = j->n_best > 0 ? (size_t)j->n_best : 1;
  gp.num_return_sequences = (int)R;
  gp.batch_tokens = 0;
  int64_t t0 = now_ns();
  memset(out, 0, sizeof *out);
  out->index = j->next_piece;
  out->begin = pc->begin;
  out->end = pc->end;
  out->line = pc->line;
  out->queue_ms = ms_since(j->submit_ns, t0);
  tolk_generation *g = calloc(R, sizeof *g);
  char **texts = calloc(R, sizeof *texts);
  tolk_ids *ids = calloc(R, sizeof *ids);
  out->hyps = calloc(R, sizeof *out->hyps);
  tolk_status st = g && texts && ids && out->hyps ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  if (!st) st = tolk_translator_generate(s->tr, &pc->ids, 1, &gp, g, err);
  for (size_t h = 0; !st && h < R; h++) ids[h] = (tolk_ids){g[h].ids, g[h].n, 0};
  if (!st) st = tolk_tokenizer_decode_batch(tolk_translator_tokenizer(s->tr), ids, R, TOLK_DECODE_SKIP_SPECIAL, texts, err);
  for (size_t h = 0; !st && h < R; h++) {
    out->hyps[h] = (struct sched_hyp){texts[h], g[h].ids, g[h].n, g[h].score};
    g[h].ids = NULL;
    texts[h] = NULL;
  }
  if (!st) out->n_hyps = R;
  out->decode_ms = ms_since(t0, now_ns());
  if (g) tolk_generation_free(g, R);
  if (texts) tolk_strings_free(texts, R);
  else free(texts);
  free(g);
  free(ids);
  if (st) {
    free(out->hyps);
    out->hyps = NULL;
    return st;
  }
  const struct sched_hyp *best = &out->hyps[0];
  size_t gen = best->n_ids ? best->n_ids - 1 : 0;
  int32_t eos = tolk_tokenizer_special_ids(tolk_translator_tokenizer(s->tr)).eos;
  metrics_observe(s->m, METRIC_H_QUEUE_MS, out->queue_ms);
  metrics_observe(s->m, METRIC_H_DECODE_MS, out->decode_ms);
  metrics_observe(s->m, METRIC_H_BATCH_ROWS, gp.num_beams);
  metrics_observe(s->m, METRIC_H_BATCH_TOKENS, (double)gp.num_beams * (double)pc->ids.n);
  metrics_count(s->m, METRIC_C_SENTENCES, 1);
  metrics_count(s->m, METRIC_C_TOKENS, gen - (gen && best->ids[best->n_ids - 1] == eos));
  metrics_count(s->m, METRIC_C_STEPS, gen);
  return TOLK_OK;
}

/* Runs the next sentence of j (or finishes it). Returns whether j goes back
 * into the queue. */
static bool step(struct sched *s, struct sched_job *j) {
  if (j->next_piece == j->n) {
    job_finish(j, TOLK_OK, false, NULL);
    return false;
  }
  tolk_error err;
  struct sched_sentence *out = &j->out[j->next_piece];
  if (translate_piece(s, j, out, &err)) {
    job_finish(j, err.status, false, err.message);
    return false;
  }
  j->next_piece++;
  if (j->cb.sentence) j->cb.sentence(j->user, out);
  if (j->next_piece == j->n) {
    job_finish(j, TOLK_OK, false, NULL);
    return false;
  }
  return true;
}

/* Unlinks every cancelled or late job into *dead (under the lock). */
static void sweep(struct sched *s, struct sched_job **dead, int64_t now) {
  struct sched_job **pp = &s->head, *prev = NULL;
  while (*pp) {
    struct sched_job *j = *pp;
    bool late = j->deadline_ns && now >= j->deadline_ns;
    if (atomic_load(&j->cancel) || late) {
      *pp = j->next;
      s->queued -= j->n - j->next_piece;
      j->next = *dead;
      *dead = j;
      continue;
    }
    prev = j;
    pp = &j->next;
  }
  s->tail = prev;
}

static void finish_dead(struct sched_job *dead, int64_t now) {
  while (dead) {
    struct sched_job *j = dead;
    dead = j->next;
    bool late = !atomic_load(&j->cancel) && j->deadline_ns && now >= j->deadline_ns;
    job_finish(j, TOLK_ERR_CANCELLED, late, late ? "deadline exceeded" : "cancelled");
  }
}

static void *worker(void *arg) {
  struct sched *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->stop && !s->head) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) break;
    struct sched_job *dead = NULL;
    int64_t now = now_ns();
    sweep(s, &dead, now);
    struct sched_job *j = s->head;
    if (j) {
      s->head = j->next;
      if (!s->head) s->tail = NULL;
      j->next = NULL;
      if (j->next_piece < j->n) s->queued--;
      s->live_rows = (size_t)(j->beams ? j->beams : tolk_generate_default_params(s->tr).num_beams);
    }
    metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, (double)s->queued);
    metrics_gauge(s->m, METRIC_G_LIVE_ROWS, (double)s->live_rows);
    pthread_mutex_unlock(&s->mu);
    finish_dead(dead, now);
    bool again = j && step(s, j);
    pthread_mutex_lock(&s->mu);
    s->live_rows = 0;
    if (again) {
      /* Its next sentence waits again, behind the texts already queued. */
      s->queued++;
      if (s->tail) s->tail->next = j;
      else s->head = j;
      s->tail = j;
    }
    metrics_gauge(s->m, METRIC_G_LIVE_ROWS, 0);
  }
  struct sched_job *left = s->head;
  s->head = s->tail = NULL;
  s->queued = 0;
  pthread_mutex_unlock(&s->mu);
  metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, 0);
  while (left) {
    struct sched_job *j = left;
    left = j->next;
    job_finish(j, TOLK_ERR_CANCELLED, false, "shutting down");
  }
  return NULL;
}

/* ------------------------------------------------------------------ the interface */

tolk_status sched_create(const tolk_translator *tr, const struct sched_params *p,
                         struct metrics *metrics, struct sched **out, tolk_error *err) {
  *out = NULL;
  if (!tr) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "sched: no translator");
  struct sched *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  s->tr = tr;
  s->p = p ? *p : sched_default_params();
  if (s->p.max_queue <= 0) s->p.max_queue = sched_default_params().max_queue;
  s->m = metrics;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->thread, NULL, worker, s)) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return tolk_fail(err, TOLK_ERR_INTERNAL, "sched: cannot start the scheduler thread");
  }
  *out = s;
  return TOLK_OK;
}

void sched_free(struct sched *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static tolk_status check_params(struct sched *s, const struct sched_text_params *p, struct sched_job *j,
                                tolk_error *err) {
  int beams = p->num_beams > 0 ? p->num_beams : tolk_generate_default_params(s->tr).num_beams;
  if (p->num_beams < 0 || beams > 64)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "num_beams %d: 1 to 64", p->num_beams);
  if (p->n_best < 0 || p->n_best > beams)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "n_best %d exceeds num_beams %d", p->n_best, beams);
  if (p->max_new_tokens < 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "max_new_tokens %d is negative", p->max_new_tokens);
  if (p->tag) {
    if (strlen(p->tag) >= sizeof j->tag || tolk_tokenizer_piece_to_id(tolk_translator_tokenizer(s->tr), p->tag) < 0)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "unknown target-language tag '%.64s'", p->tag);
    snprintf(j->tag, sizeof j->tag, "%s", p->tag);
    j->has_tag = true;
  }
  j->beams = p->num_beams;
  j->max_new = p->max_new_tokens;
  j->n_best = p->n_best;
  j->deadline_ns = p->deadline_ns;
  return TOLK_OK;
}

tolk_status sched_submit(struct sched *s, const char *text, size_t len,
                         const struct sched_text_params *p, const struct sched_callbacks *cb,
                         void *user, struct sched_job **out, tolk_error *err) {
  *out = NULL;
  if (!s || !p || !cb || !cb->done || (!text && len))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "sched_submit: null argument");
  struct sched_job *j = calloc(1, sizeof *j);
  if (!j || !(j->text = malloc(len + 1))) {
    free(j);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  }
  if (len) memcpy(j->text, text, len);
  j->text[len] = '\0';
  j->len = len;
  j->s = s;
  j->cb = *cb;
  j->user = user;
  atomic_init(&j->refs, 2);
  atomic_init(&j->cancel, false);
  tolk_status st = check_params(s, p, j, err);
  if (!st) st = split_text(j, err);
  if (!st && !(j->out = calloc(j->n ? j->n : 1, sizeof *j->out)))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "sched: out of memory");
  if (!st) {
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
      st = tolk_fail(err, TOLK_ERR_CANCELLED, "shutting down");
    } else if (s->queued + j->n > (size_t)s->p.max_queue) {
      st = tolk_fail(err, TOLK_ERR_LIMIT, SCHED_QUEUE_FULL ": %zu sentences waiting, this text has %zu, the queue holds %d",
                     s->queued, j->n, s->p.max_queue);
    } else {
      j->submit_ns = now_ns();
      s->queued += j->n;
      if (s->tail) s->tail->next = j;
      else s->head = j;
      s->tail = j;
      metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, (double)s->queued);
      pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (st == TOLK_ERR_LIMIT) metrics_count(s->m, METRIC_C_REJECTED_QUEUE, 1);
  }
  if (st) {
    job_free(j);
    return st;
  }
  *out = j;
  return TOLK_OK;
}

size_t sched_queued(const struct sched *s) {
  struct sched *m = (struct sched *)s; /* the lock is not part of the value */
  pthread_mutex_lock(&m->mu);
  size_t n = m->queued;
  pthread_mutex_unlock(&m->mu);
  return n;
}

size_t sched_live_rows(const struct sched *s) {
  struct sched *m = (struct sched *)s;
  pthread_mutex_lock(&m->mu);
  size_t n = m->live_rows;
  pthread_mutex_unlock(&m->mu);
  return n;
}

bool sched_full(const struct sched *s) {
  struct sched *m = (struct sched *)s;
  pthread_mutex_lock(&m->mu);
  bool full = m->queued + 1 > (size_t)m->p.max_queue;
  pthread_mutex_unlock(&m->mu);
  return full;
}
