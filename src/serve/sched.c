/*
 * sched.c — the scheduler of `tolk serve` (sched.h): one thread runs the
 * translator's continuous batch (src/mt/batcher.c) and everything else only
 * talks to it through a queue.
 *
 *   sched_submit (any thread): the text is split and tokenized there, as
 *     tolk_translator_translate_text does (mt_doc_plan), and its sentences
 *     go to the back of one bounded queue — all of them or, when they do
 *     not fit, none (TOLK_ERR_LIMIT, SCHED_QUEUE_FULL).
 *   the step loop (the scheduler thread), each turn:
 *     1. sentences of cancelled or late texts leave the queue and the batch;
 *     2. queued sentences are admitted in arrival order while the batch's
 *        rows × padded source length stays under max_batch_tokens and its
 *        rows under the row bound (max_batch_rows, or the one measured
 *        with max_step_growth), or twice that for the sentences of a
 *        request already in the batch while no other waits (an idle
 *        scheduler first waits up to
 *        max_wait_ms for company): their encoder run and first decoder step
 *        happen now, between two steps of the batch, and their rows join it;
 *     3. one decoder step for every row;
 *     4. finished sentences are decoded and reported at once; a text whose
 *        last sentence finished is joined (mt_doc_join) and done.
 *   A short text thus never waits for a long one to finish: it joins at
 *   the next step and leaves when it is done.
 *
 * Every sentence is generated with its text's parameters by its own search
 * over its own rows, and the kernels are batch-invariant, so its ids are
 * those of tolk translate on that sentence alone, whatever shares the batch.
 *
 * Memory: the queue holds at most max_queue sentences and the batch at most
 * max_batch_tokens worth of rows, so what the scheduler holds is bounded by
 * its limits, not by traffic.
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
  struct sched_params p = {8192, 1024, 0, 0, 0, 0, 0};
  return p;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void sched_steps_add(struct sched_steps *st, size_t rows, double seconds) {
  size_t r = rows < SCHED_STEP_TABLE ? rows : SCHED_STEP_TABLE;
  st->last_s[r][st->n[r] % SCHED_STEP_TRUST] = seconds;
  if (st->n[r] < UINT32_MAX) st->n[r]++;
}

/* The median of a row count's last steps. */
static double steps_median(const struct sched_steps *st, size_t r) {
  double v[SCHED_STEP_TRUST];
  memcpy(v, st->last_s[r], sizeof v);
  qsort(v, SCHED_STEP_TRUST, sizeof v[0], cmp_double);
  return (v[SCHED_STEP_TRUST / 2 - 1] + v[SCHED_STEP_TRUST / 2]) / 2;
}

size_t sched_steps_bound(const struct sched_steps *st, double growth) {
  double base = 0;
  size_t most = 0;
  for (size_t r = 1; r <= SCHED_STEP_TABLE; r++) {
    if (st->n[r] < SCHED_STEP_TRUST) continue;
    double t = steps_median(st, r);
    if (base == 0) base = t;
    else if (t > growth * base) return r - 1;
    most = r;
  }
  return most ? 2 * most : 1;
}

enum { QUEUED, RUNNING, FINISHED };

struct sentence {
  struct sched_job *job;
  size_t index;
  uint64_t id;        /* in the batcher */
  int state;
  int64_t admitted_ns;
  uint64_t admitted_turn; /* s->turns when it joined the batch */
  double encode_ms;
  struct sched_sentence out;
};

struct sched_job {
  _Atomic int refs;
  _Atomic bool cancel;
  struct sched *s;
  struct sched_callbacks cb;
  void *user;
  tolk_generate_params gp;
  int n_best;
  int64_t submit_ns, deadline_ns;
  uint64_t submit_turn; /* s->estimated when it was queued */
  const void *group;  /* its request (sched_text_params.request), or itself */
  struct mt_doc doc;
  struct sentence *sent;
  size_t n_left;      /* sentences not yet finished */
  bool ended;         /* done() called (scheduler thread only) */
  struct sched_job *next_live; /* the scheduler's list of unfinished jobs */
};

struct sched {
  const tolk_translator *tr;
  struct sched_params p;
  struct metrics *m;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  struct sentence **queue; /* ring of max_queue */
  size_t head, queued;
  struct sched_job *arrived; /* jobs submitted since the loop last looked */
  bool stop, wake;
  /* Published by the scheduler thread after each turn, for admission:
   * the departures (sched_view), and whether the batch is empty (idle):
   * an empty batch takes any one sentence, even one whose beams alone
   * exceed the row bound. */
  struct sched_view view;
  bool idle;
  /* Whether the queue stands: over the last stay the wait budget refused
   * at least as many texts as were admitted, or every sentence admitted
   * had waited through more than two turns (judge_standing; the refusals stand it
   * within the stay too). A burst leaves some sentence that
   * found a free row; overload does not, and then the wait budget is
   * quartered (wait_budget). */
  bool standing;
  _Atomic size_t live_rows, queued_now;
  _Atomic uint64_t estimated; /* turns whose estimate admission can read */
  /* scheduler thread only */
  struct mt_batcher *batch;
  struct sched_job *live;    /* jobs with sentences queued or running */
  struct sched_job *ended;   /* done, released at the end of the turn */
  struct sentence **running; /* by batcher id order of admission */
  double *remaining;         /* cap_running: estimate_drain's scratch */
  size_t n_running, cap_running;
  uint64_t next_id;
  /* what the drain rate is estimated from: turns (admissions and one
   * step) run, their mean duration, and the turns a sentence stays in the
   * batch (0 until one has finished) */
  uint64_t turns;
  double turn_s, turns_per_sentence;
  /* max_step_growth: the steps timed (scheduler thread), and the row bound
   * they give (under mu; 0: none) */
  struct sched_steps steps;
  size_t grown_rows;
  /* standing's evidence since window_start_ns: the fewest turns a
   * sentence admitted waited through (-1: none admitted yet), how many
   * were admitted, and how many texts the wait budget (not a deadline)
   * refused (sched_submit's, under mu). Turns, not seconds: a sentence that
   * reaches an idle scheduler waits for its thread to wake, and for
   * company (max_wait_ms), and on a fast model that is many turns' time,
   * yet it found a free row. */
  int64_t window_min_turns;
  size_t window_admitted, window_refused;
  int64_t window_start_ns;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_between(int64_t t0, int64_t t1) { return (double)(t1 - t0) * 1e-6; }

/* ------------------------------------------------------------ results */

static void free_sentence_out(struct sched_sentence *o) {
  for (size_t h = 0; h < o->n_hyps; h++) {
    free(o->hyps[h].text);
    free(o->hyps[h].ids);
  }
  free(o->hyps);
  o->hyps = NULL;
  o->n_hyps = 0;
}

void sched_result_free(struct sched_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_sentences; i++) free_sentence_out(&r->sentences[i]);
  free(r->sentences);
  free(r->text);
  free(r);
}

static void job_release_mem(struct sched_job *j) {
  for (size_t i = 0; j->sent && i < j->doc.n; i++) free_sentence_out(&j->sent[i].out);
  free(j->sent);
  mt_doc_release(&j->doc);
  free(j);
}

void sched_job_release(struct sched_job *j) {
  if (j && atomic_fetch_sub(&j->refs, 1) == 1) job_release_mem(j);
}

void sched_cancel(struct sched_job *j) {
  if (!j) return;
  atomic_store(&j->cancel, true);
  pthread_mutex_lock(&j->s->mu);
  j->s->wake = true;
  pthread_cond_signal(&j->s->cv);
  pthread_mutex_unlock(&j->s->mu);
}

/* The finished search of a sentence as its n-best hypotheses. */
static tolk_status sentence_result(struct sched *s, struct sentence *x, const struct mt_search *search,
                                   tolk_error *err) {
  struct sched_job *j = x->job;
  size_t R = (size_t)j->gp.num_return_sequences;
  tolk_generation *g = calloc(R, sizeof *g);
  if (!g) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  tolk_status st = mt_search_result(search, g, err);
  size_t n = (size_t)j->n_best < R ? (size_t)j->n_best : R;
  if (!st && !(x->out.hyps = calloc(n, sizeof *x->out.hyps)))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  for (size_t h = 0; h < n && !st; h++) {
    tolk_ids ids = {g[h].ids, g[h].n, 0};
    st = tolk_tokenizer_decode_batch(tolk_translator_tokenizer(s->tr), &ids, 1, TOLK_DECODE_SKIP_SPECIAL,
                                     &x->out.hyps[h].text, err);
    if (st) break;
    x->out.hyps[h].ids = g[h].ids;
    x->out.hyps[h].n_ids = g[h].n;
    x->out.hyps[h].score = g[h].score;
    g[h].ids = NULL;
    x->out.n_hyps = h + 1;
  }
  if (!st) {
    const struct sched_hyp *best = &x->out.hyps[0];
    int32_t eos = mt_translator_config(s->tr)->eos;
    size_t made = best->n_ids - 1 - (best->n_ids > 1 && best->ids[best->n_ids - 1] == eos);
    metrics_count(s->m, METRIC_C_TOKENS, made);
    metrics_count(s->m, METRIC_C_SENTENCES, 1);
  }
  tolk_generation_free(g, R);
  free(g);
  return st;
}

/* Calls done() with the whole text (or the failure) and leaves the job to
 * its references. */
static void job_end(struct sched *s, struct sched_job *j, tolk_status st, bool deadline, const char *msg) {
  if (j->ended) return;
  j->ended = true;
  struct sched_result *r = calloc(1, sizeof *r);
  if (!r) { /* no way to tell the caller; the job at least leaves */
    j->next_live = s->ended;
    s->ended = j;
    return;
  }
  r->status = st;
  r->deadline = deadline;
  snprintf(r->message, sizeof r->message, "%s", msg ? msg : "");
  int64_t now = now_ns();
  r->total_ms = ms_between(j->submit_ns, now);
  if (!st) {
    const char **texts = malloc((j->doc.n ? j->doc.n : 1) * sizeof *texts);
    tolk_error err;
    for (size_t i = 0; texts && i < j->doc.n; i++) texts[i] = j->sent[i].out.hyps[0].text;
    if (!texts || mt_doc_join(&j->doc, texts, &r->text, &err)) {
      r->status = TOLK_ERR_NO_MEMORY;
      snprintf(r->message, sizeof r->message, "scheduler: out of memory");
    }
    free(texts);
  }
  /* The sentences that finished (all of them on success; on a failure or
   * a cancellation, those done by then). */
  {
    r->sentences = calloc(j->doc.n ? j->doc.n : 1, sizeof *r->sentences);
    if (!r->sentences) {
      r->status = TOLK_ERR_NO_MEMORY;
      snprintf(r->message, sizeof r->message, "scheduler: out of memory");
    }
    for (size_t i = 0; r->sentences && i < j->doc.n; i++) {
      const struct sched_sentence *o = &j->sent[i].out;
      if (!o->n_hyps) continue;
      r->sentences[r->n_sentences++] = *o; /* the hypotheses move to the result */
      j->sent[i].out.hyps = NULL;
      j->sent[i].out.n_hyps = 0;
      r->queue_ms = o->queue_ms > r->queue_ms ? o->queue_ms : r->queue_ms;
      r->encode_ms = o->encode_ms > r->encode_ms ? o->encode_ms : r->encode_ms;
      r->decode_ms = o->decode_ms > r->decode_ms ? o->decode_ms : r->decode_ms;
    }
  }
  j->cb.done(j->user, r);
  /* The scheduler's reference goes at the end of the turn: sentences of
   * this job may still be in hand (an admission in progress). */
  j->next_live = s->ended;
  s->ended = j;
}

static void release_ended(struct sched *s) {
  for (struct sched_job *j = s->ended, *next; j; j = next) {
    next = j->next_live;
    sched_job_release(j);
  }
  s->ended = NULL;
}

/* ------------------------------------------------------------ submit */

static tolk_status job_params(const struct sched *s, const struct sched_text_params *p, struct sched_job *j,
                              tolk_error *err) {
  j->gp = tolk_generate_default_params(s->tr);
  if (p->num_beams > 0) j->gp.num_beams = p->num_beams;
  if (p->max_new_tokens > 0) j->gp.max_new_tokens = p->max_new_tokens;
  if (p->min_new_tokens > 0) j->gp.min_new_tokens = p->min_new_tokens;
  j->n_best = p->n_best > 0 ? p->n_best : 1;
  if (j->gp.num_beams > MT_MAX_BEAMS)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "beam %d is over the limit of %d", j->gp.num_beams, MT_MAX_BEAMS);
  if (j->n_best > j->gp.num_beams)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "n_best %d is more than the beam (%d)", j->n_best,
                     j->gp.num_beams);
  j->gp.num_return_sequences = j->gp.num_beams > 1 ? j->n_best : 1;
  j->gp.do_sample = 0;
  j->gp.output_scores = p->scores;
  mt_params_fit(s->tr, &j->gp);
  int max_length;
  return mt_search_check(&j->gp, &max_length, err);
}

/* The tag, checked against the vocabulary. */
static tolk_status check_tag(const struct sched *s, const char *tag, tolk_error *err) {
  if (!tag) return TOLK_OK;
  if (tolk_tokenizer_piece_to_id(tolk_translator_tokenizer(s->tr), tag) >= 0) return TOLK_OK;
  return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "target tag %s is not in the model's vocabulary", tag);
}

/* Under s->mu: the row bound for a request's first sentence, 0 for none:
 * max_batch_rows, the measured one (max_step_growth), or the smaller. */
static size_t row_bound(const struct sched *s) {
  size_t fixed = (size_t)s->p.max_batch_rows, grown = s->grown_rows;
  return !grown || (fixed && fixed < grown) ? fixed : grown;
}

/* The rows a batch of padded source length len may hold when a request
 * joins it, or (follow) when more of a request already in it do: twice
 * the row bound (sched_params). */
static size_t batch_cap(const struct sched *s, size_t len, bool follow) {
  size_t cap = (size_t)s->p.max_batch_tokens / (len ? len : 1);
  size_t rows = row_bound(s) * (follow ? 2 : 1);
  return rows && rows < cap ? rows : cap;
}

/* Under s->mu: how long j would wait until the batch could hold it: until
 * its m-th sentence starts (sched_view_wait), m being its sentences and
 * the texts its request sends after it (each at least one), less those
 * that follow the first past the row bound (up to the bound's worth:
 * batch_cap; none when others wait: group_may_follow), as many as the
 * batch holds beside one another. Judging its first sentence alone let a
 * text longer than that wait a departure more than the budget allowed,
 * and requests of several sentences made the tail of every overload run.
 * Those beyond the batch's rows wait for the text's own, which is its
 * length, not the queue. */
static double expected_wait(const struct sched *s, const struct sched_job *j, size_t later_texts) {
  if (s->idle && !s->queued) return 0;
  size_t beams = (size_t)j->gp.num_beams, len = 0;
  for (size_t i = 0; i < j->doc.n; i++) len = j->doc.p[i].ids.n > len ? j->doc.p[i].ids.n : len;
  size_t fit = batch_cap(s, len, false) / beams, more = s->queued ? 0 : batch_cap(s, len, true) / beams - fit;
  size_t m = j->doc.n + later_texts;
  m = m > more + 1 ? m - more : 1; /* up to `more` follow the first past the bound */
  if (m > fit) m = fit;
  if (m < 1) m = 1;
  return sched_view_wait(&s->view, s->queued + m, beams);
}

double sched_view_wait(const struct sched_view *v, size_t ahead, size_t beams) {
  size_t free_now = v->free_rows / beams;
  if (ahead <= free_now) return 0;
  /* Judged by the first departure alone, a text behind a request that had
   * followed past the bound waited a whole stay more than the budget. */
  size_t k = ahead - free_now - 1 + (v->over_rows + beams - 1) / beams;
  if (!v->n_slots || !v->n_leave) return v->drain_per_s > 0 ? (double)(k + 1) / v->drain_per_s : 0;
  size_t slot = k % v->n_slots;
  double first = v->leave_s[slot < v->n_leave ? slot : v->n_leave - 1];
  return first + (double)(k / v->n_slots) * v->stay_s;
}

/* Under s->mu: how long a text may wait to start (0: no bound). A queue
 * that stands is overload, not a burst (the distinction CoDel draws for
 * packet queues): admitting more that wait long only delays them all, and
 * the goodput is the batch's whichever wait is allowed, so a quarter of
 * the budget then keeps what is admitted near its unloaded latency, while
 * a burst still gets the whole budget instead of refusals. */
static double wait_budget(const struct sched *s) {
  double b = s->p.max_queue_wait_ms > 0 ? s->p.max_queue_wait_ms * 1e-3
             : s->p.max_queue_wait_stays > 0 ? s->p.max_queue_wait_stays * s->view.stay_s : 0;
  return s->standing ? b / 4 : b;
}

tolk_status sched_submit(struct sched *s, const char *text, size_t len, const struct sched_text_params *p,
                         const struct sched_callbacks *cb, void *user, struct sched_job **out, tolk_error *err) {
  *out = NULL;
  if (!s || (!text && len) || !p || !cb || !cb->done)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "scheduler: null argument");
  struct sched_job *j = calloc(1, sizeof *j);
  if (!j) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  j->s = s;
  j->cb = *cb;
  j->user = user;
  j->submit_ns = now_ns();
  j->submit_turn = atomic_load(&s->estimated);
  j->deadline_ns = p->deadline_ns;
  j->group = p->request ? p->request : (const void *)j;
  atomic_init(&j->refs, 2); /* the caller's and the scheduler's */
  atomic_init(&j->cancel, false);
  tolk_status st = job_params(s, p, j, err);
  if (!st) st = check_tag(s, p->tag, err);
  if (!st) st = mt_doc_plan(s->tr, text, len, p->tag, &j->doc, err);
  if (!st && !(j->sent = calloc(j->doc.n ? j->doc.n : 1, sizeof *j->sent)))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  if (st) {
    job_release_mem(j);
    return st;
  }
  for (size_t i = 0; i < j->doc.n; i++) {
    struct sentence *x = &j->sent[i];
    x->job = j;
    x->index = x->out.index = i;
    x->out.begin = j->doc.p[i].span.begin;
    x->out.end = j->doc.p[i].span.end;
    x->out.line = j->doc.p[i].line;
  }
  j->n_left = j->doc.n;
  pthread_mutex_lock(&s->mu);
  bool fits = !s->stop && s->queued + j->doc.n <= (size_t)s->p.max_queue;
  double wait_s = expected_wait(s, j, p->later_texts), budget_s = 0;
  bool quartered = false; /* the budget that refused is the standing queue's */
  if (fits && wait_s > 0) {
    budget_s = p->follows ? 0 : wait_budget(s);
    quartered = budget_s > 0 && s->standing;
    double left_s = j->deadline_ns ? (double)(j->deadline_ns - j->submit_ns) * 1e-9 : 0;
    bool by_deadline = left_s > 0 && (budget_s == 0 || left_s < budget_s);
    if (by_deadline) budget_s = left_s, quartered = false;
    fits = budget_s == 0 || wait_s <= budget_s;
    if (!fits && !by_deadline) s->window_refused++;
  }
  if (fits) {
    size_t cap = (size_t)s->p.max_queue;
    for (size_t i = 0; i < j->doc.n; i++) s->queue[(s->head + s->queued + i) % cap] = &j->sent[i];
    s->queued += j->doc.n;
    atomic_store(&s->queued_now, s->queued);
    j->next_live = s->arrived;
    s->arrived = j;
    s->wake = true;
    pthread_cond_signal(&s->cv);
  }
  size_t queued = s->queued;
  bool stopping = s->stop;
  pthread_mutex_unlock(&s->mu);
  if (!fits) {
    metrics_count(s->m, METRIC_C_REJECTED_QUEUE, 1);
    size_t n = j->doc.n;
    job_release_mem(j);
    if (stopping) return tolk_fail(err, TOLK_ERR_LIMIT, SCHED_QUEUE_FULL ": shutting down");
    if (queued + n > (size_t)s->p.max_queue)
      return tolk_fail(err, TOLK_ERR_LIMIT, SCHED_QUEUE_FULL ": %zu sentences waiting, %zu more do not fit in %d",
                       queued, n, s->p.max_queue);
    return tolk_fail(err, TOLK_ERR_LIMIT, SCHED_QUEUE_FULL ": %zu sentences waiting, %zu more would start in about %.1f s, "
                     "past the %.2g s allowed%s", queued, n, wait_s, budget_s, quartered ? " while the queue stands" : "");
  }
  metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, (double)queued);
  *out = j;
  return TOLK_OK;
}

size_t sched_queued(const struct sched *s) { return atomic_load(&s->queued_now); }
size_t sched_live_rows(const struct sched *s) { return atomic_load(&s->live_rows); }
uint64_t sched_turns_estimated(const struct sched *s) { return atomic_load(&s->estimated); }
bool sched_full(const struct sched *s) { return sched_queued(s) >= (size_t)s->p.max_queue; }

/* ------------------------------------------------------------ the step loop */

static bool job_expired(const struct sched_job *j, int64_t now) {
  return j->deadline_ns > 0 && now > j->deadline_ns;
}

static void running_remove(struct sched *s, struct sentence *x) {
  for (size_t i = 0; i < s->n_running; i++)
    if (s->running[i] == x) {
      s->running[i] = s->running[--s->n_running];
      return;
    }
}

static struct sentence *running_find(struct sched *s, uint64_t id) {
  for (size_t i = 0; i < s->n_running; i++)
    if (s->running[i]->id == id) return s->running[i];
  return NULL;
}

static void live_remove(struct sched *s, struct sched_job *j) {
  for (struct sched_job **p = &s->live; *p; p = &(*p)->next_live)
    if (*p == j) {
      *p = j->next_live;
      return;
    }
}

static void compact_queue(struct sched *s, int64_t now);

/* Ends a job that will not finish: its queued sentences leave the queue,
 * its running ones the batch. */
static void job_abort(struct sched *s, struct sched_job *j, tolk_status st, bool deadline, const char *msg) {
  size_t dropped = 0;
  j->ended = true; /* compact_queue drops its sentences */
  pthread_mutex_lock(&s->mu);
  compact_queue(s, now_ns());
  atomic_store(&s->queued_now, s->queued);
  pthread_mutex_unlock(&s->mu);
  j->ended = false;
  for (size_t i = 0; i < j->doc.n; i++) {
    struct sentence *x = &j->sent[i];
    if (x->state == RUNNING) {
      tolk_status ds;
      tolk_error err;
      mt_batcher_drop(s->batch, x->id, &ds, &err);
      running_remove(s, x);
    }
    if (x->state != FINISHED) dropped++;
    x->state = FINISHED;
  }
  if (st == TOLK_ERR_CANCELLED) metrics_count(s->m, deadline ? METRIC_C_DEADLINE : METRIC_C_CANCELLED, dropped);
  live_remove(s, j);
  job_end(s, j, st, deadline, msg);
}

/* Under s->mu: the queue without the sentences of cancelled or late jobs. */
static void compact_queue(struct sched *s, int64_t now) {
  size_t cap = (size_t)s->p.max_queue, w = 0;
  for (size_t i = 0; i < s->queued; i++) {
    struct sentence *x = s->queue[(s->head + i) % cap];
    if (!x->job->ended && !atomic_load(&x->job->cancel) && !job_expired(x->job, now))
      s->queue[(s->head + w++) % cap] = x;
  }
  s->queued = w;
}

/* Whether the batch of `rows` rows and padded length `len` can take x;
 * follow: a sentence of its request is in the batch or joins with it. */
static bool fits_batch(const struct sched *s, size_t rows, size_t len, const struct sentence *x, bool follow) {
  size_t r = rows + (size_t)x->job->gp.num_beams, l = x->job->doc.p[x->index].ids.n;
  if (l < len) l = len;
  size_t bound = row_bound(s) * (follow ? 2 : 1);
  if (bound && r > bound) return false;
  return r * l <= (size_t)s->p.max_batch_tokens;
}

/* Under s->mu: whether x, at the queue's head, may follow its request past
 * the row bound: a sentence of the request is running or among the n
 * joining, and no other request waits. Rows past the bound slow every step
 * of the batch; taken while others wait (overload), they would lengthen
 * the stays those others wait for, and the tail of every admitted text. */
static bool group_may_follow(const struct sched *s, const struct sentence *x, struct sentence *const *joining,
                             size_t n) {
  size_t cap = (size_t)s->p.max_queue;
  for (size_t i = 0; i < s->queued; i++)
    if (s->queue[(s->head + i) % cap]->job->group != x->job->group) return false;
  for (size_t i = 0; i < n; i++)
    if (joining[i]->job->group == x->job->group) return true;
  for (size_t i = 0; i < s->n_running; i++)
    if (s->running[i]->job->group == x->job->group) return true;
  return false;
}

/* Turns a sentence is expected to stay in the batch: as long as those
 * that finished lately, never more than its max_new_tokens allow. */
static double expected_turns(const struct sched *s, const tolk_generate_params *gp) {
  double turns = gp->max_new_tokens > 0 ? gp->max_new_tokens : gp->max_length;
  return s->turns_per_sentence > 0 && s->turns_per_sentence < turns ? s->turns_per_sentence : turns;
}

/* Under s->mu: the rows a batch of `rows` with room for `cap` has free,
 * or holds past it. */
static void publish_rows(struct sched *s, size_t cap, size_t rows) {
  s->view.free_rows = cap > rows ? cap - rows : 0;
  s->view.over_rows = rows > cap ? rows - cap : 0;
}

/* Under s->mu: a departure in `after` seconds into the sorted leave_s,
 * which keeps the soonest SCHED_LEAVE_TABLE. */
static void leave_insert(struct sched *s, double after) {
  struct sched_view *v = &s->view;
  size_t i;
  if (v->n_leave < SCHED_LEAVE_TABLE) i = v->n_leave++;
  else if (after < v->leave_s[SCHED_LEAVE_TABLE - 1]) i = SCHED_LEAVE_TABLE - 1;
  else return;
  for (; i > 0 && v->leave_s[i - 1] > after; i--) v->leave_s[i] = v->leave_s[i - 1];
  v->leave_s[i] = after;
}

/* Under s->mu: takes from the queue's head what the batch can take, in
 * arrival order (at least one sentence into an empty batch). What they
 * take is published at once: their admission (the encoder) is the
 * longest part of a turn, and texts submitted meanwhile must not be told
 * the rows are still free. */
static size_t pop_admissions(struct sched *s, struct sentence **out, size_t max) {
  size_t rows = mt_batcher_rows(s->batch), len = mt_batcher_source_len(s->batch), n = 0;
  size_t cap = (size_t)s->p.max_queue;
  while (s->queued && n < max) {
    struct sentence *x = s->queue[s->head];
    if (!fits_batch(s, rows, len, x, group_may_follow(s, x, out, n)) && (rows || n)) break;
    rows += (size_t)x->job->gp.num_beams;
    size_t l = x->job->doc.p[x->index].ids.n;
    len = l > len ? l : len;
    out[n++] = x;
    s->head = (s->head + 1) % cap;
    s->queued--;
    if (s->turn_s > 0) {
      leave_insert(s, expected_turns(s, &x->job->gp) * s->turn_s);
      s->view.n_slots++;
    }
  }
  if (n) {
    publish_rows(s, batch_cap(s, len, false), rows);
    s->idle = false;
  }
  return n;
}

/* An idle scheduler waits up to max_wait_ms after the first arrival for
 * more sentences to batch with, unless the queue already fills a batch. */
static void wait_for_company(struct sched *s) {
  if (s->p.max_wait_ms <= 0 || !s->queued || mt_batcher_sentences(s->batch)) return;
  struct sched_job *first = s->queue[s->head]->job;
  int64_t until = first->submit_ns + (int64_t)s->p.max_wait_ms * 1000000;
  while (!s->stop && now_ns() < until) {
    size_t rows = 0, len = 0, cap = (size_t)s->p.max_queue;
    bool full = false;
    for (size_t i = 0; i < s->queued && !full; i++) {
      const struct sentence *x = s->queue[(s->head + i) % cap];
      full = !fits_batch(s, rows, len, x, false);
      rows += (size_t)x->job->gp.num_beams;
      len = x->job->doc.p[x->index].ids.n > len ? x->job->doc.p[x->index].ids.n : len;
    }
    if (full) return;
    struct timespec ts = {until / 1000000000, until % 1000000000};
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
}

/* Reports the sentences the batcher finished; a job whose last sentence
 * finished is done. */
static void collect_finished(struct sched *s) {
  size_t n;
  struct mt_done *d = mt_batcher_finished(s->batch, &n);
  int64_t now = now_ns();
  for (size_t i = 0; i < n; i++) {
    struct sentence *x = running_find(s, d[i].id);
    if (!x) continue;
    running_remove(s, x);
    struct sched_job *j = x->job;
    tolk_error err;
    x->out.decode_ms = ms_between(x->admitted_ns, now);
    metrics_observe(s->m, METRIC_H_DECODE_MS, x->out.decode_ms);
    if (sentence_result(s, x, d[i].search, &err)) {
      job_abort(s, j, err.status, false, err.message);
      continue;
    }
    x->state = FINISHED;
    double turns = (double)(s->turns - x->admitted_turn) + 1;
    s->turns_per_sentence = s->turns_per_sentence > 0 ? 0.9 * s->turns_per_sentence + 0.1 * turns : turns;
    if (j->cb.sentence) j->cb.sentence(j->user, &x->out);
    if (--j->n_left == 0) {
      live_remove(s, j);
      job_end(s, j, TOLK_OK, false, NULL);
    }
  }
  mt_batcher_clear_finished(s->batch);
}

/* Every running sentence's job fails: the batch broke. */
static void fail_running(struct sched *s, const tolk_error *err) {
  while (s->n_running) job_abort(s, s->running[0]->job, err->status, false, err->message);
  mt_batcher_reset(s->batch);
}

static bool reserve_running(struct sched *s, size_t more) {
  if (s->n_running + more <= s->cap_running) return true;
  size_t cap = s->n_running + more > 2 * s->cap_running ? s->n_running + more : 2 * s->cap_running;
  struct sentence **r = realloc(s->running, cap * sizeof *r);
  if (!r) return false;
  s->running = r;
  double *rem = realloc(s->remaining, cap * sizeof *rem);
  if (!rem) return false;
  s->remaining = rem;
  s->cap_running = cap;
  return true;
}

/* Admits sentences: one encoder run and first step for all of them. */
static void admit(struct sched *s, struct sentence **x, size_t n) {
  tolk_ids *src = malloc(n * sizeof *src);
  const tolk_generate_params **gp = malloc(n * sizeof *gp);
  uint64_t *ids = malloc(n * sizeof *ids);
  tolk_error err;
  tolk_status st = src && gp && ids && reserve_running(s, n) ? TOLK_OK
                                                              : tolk_fail(&err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  for (size_t i = 0; i < n && !st; i++) {
    src[i] = x[i]->job->doc.p[x[i]->index].ids;
    gp[i] = &x[i]->job->gp;
    ids[i] = x[i]->id = s->next_id++;
  }
  int64_t t0 = now_ns();
  if (!st) st = mt_batcher_add(s->batch, src, gp, ids, n, &err);
  int64_t t1 = now_ns();
  for (size_t i = 0; i < n; i++) {
    struct sched_job *j = x[i]->job;
    if (j->ended || x[i]->state == FINISHED) continue;
    if (st) {
      job_abort(s, j, err.status, false, err.message);
      continue;
    }
    x[i]->state = RUNNING;
    x[i]->admitted_ns = t0;
    x[i]->admitted_turn = s->turns;
    x[i]->out.queue_ms = ms_between(j->submit_ns, t0);
    x[i]->out.encode_ms = ms_between(t0, t1);
    s->running[s->n_running++] = x[i];
    metrics_observe(s->m, METRIC_H_QUEUE_MS, x[i]->out.queue_ms);
    int64_t waited = (int64_t)(atomic_load(&s->estimated) - j->submit_turn);
    if (s->window_min_turns < 0 || waited < s->window_min_turns) s->window_min_turns = waited;
    s->window_admitted++;
    metrics_observe(s->m, METRIC_H_ENCODE_MS, x[i]->out.encode_ms);
  }
  free(src);
  free(gp);
  free(ids);
  if (!st) collect_finished(s);
  else if (mt_batcher_broken(s->batch)) fail_running(s, &err);
}

/* Cancelled and late jobs leave: queued sentences are already out of the
 * queue (compact_queue), running ones leave the batch here. */
static void sweep(struct sched *s) {
  int64_t now = now_ns();
  for (struct sched_job *j = s->live, *next; j; j = next) {
    next = j->next_live;
    if (atomic_load(&j->cancel))
      job_abort(s, j, TOLK_ERR_CANCELLED, false, "cancelled");
    else if (job_expired(j, now))
      job_abort(s, j, TOLK_ERR_CANCELLED, true, "deadline exceeded");
  }
}

/* One decoder step for every row; false when there were none. */
static bool step(struct sched *s) {
  if (!mt_batcher_sentences(s->batch)) return false;
  size_t rows = mt_batcher_rows(s->batch);
  metrics_observe(s->m, METRIC_H_BATCH_ROWS, (double)rows);
  metrics_observe(s->m, METRIC_H_BATCH_TOKENS, (double)(rows * mt_batcher_source_len(s->batch)));
  metrics_count(s->m, METRIC_C_STEPS, 1);
  s->turns++;
  tolk_error err;
  int64_t t0 = now_ns();
  if (mt_batcher_step(s->batch, &err)) {
    fail_running(s, &err);
    return true;
  }
  if (s->p.max_step_growth > 0) sched_steps_add(&s->steps, rows, (double)(now_ns() - t0) * 1e-9);
  collect_finished(s);
  return true;
}

/* Under s->mu, after a turn that took turn_ns: what admission judges waits
 * by. A running sentence is expected to stay turns_per_sentence turns
 * (before any has finished, or if it is lower: its max_new_tokens), so it
 * leaves in (that − the turns it has run) × the mean turn time. Knowing
 * each departure matters: sentences admitted together finish together, and
 * a text queued just after them waits for the whole cohort, not for the
 * mean interval between departures. */
static void estimate_drain(struct sched *s, int64_t turn_ns) {
  if (s->p.max_step_growth > 0) s->grown_rows = sched_steps_bound(&s->steps, s->p.max_step_growth);
  size_t sentences = mt_batcher_sentences(s->batch), rows = mt_batcher_rows(s->batch);
  publish_rows(s, batch_cap(s, mt_batcher_source_len(s->batch), false), rows);
  s->idle = sentences == 0;
  struct sched_view *v = &s->view;
  v->n_leave = v->n_slots = 0;
  if (!sentences || turn_ns <= 0) return;
  double t = (double)turn_ns * 1e-9, mean = 0;
  s->turn_s = s->turn_s > 0 ? 0.8 * s->turn_s + 0.2 * t : t;
  for (size_t i = 0; i < s->n_running; i++) {
    double turns = expected_turns(s, &s->running[i]->job->gp);
    double left = turns - (double)(s->turns - s->running[i]->admitted_turn);
    s->remaining[i] = (left > 1 ? left : 1) * s->turn_s;
    mean += turns;
  }
  qsort(s->remaining, s->n_running, sizeof *s->remaining, cmp_double);
  v->n_leave = s->n_running < SCHED_LEAVE_TABLE ? s->n_running : SCHED_LEAVE_TABLE;
  memcpy(v->leave_s, s->remaining, v->n_leave * sizeof *v->leave_s);
  mean = s->n_running ? mean / (double)s->n_running : 1;
  v->n_slots = s->n_running;
  v->stay_s = mean * s->turn_s;
  v->drain_per_s = (double)sentences / v->stay_s;
}

/* Under s->mu, after a turn: once a stay has passed, whether the wait
 * budget refused as many texts in it as were admitted (at least one), or
 * every sentence admitted in it had waited through over two turns; with neither,
 * and none admitted, the queue stands as before if anything is queued (a
 * full batch that no sentence left) and not if nothing is. Judged per
 * stay, not by the queue emptying: under a quartered budget the few
 * admitted often leave it empty for a moment. Refusals count because the
 * quartered budget admits only short waits, some under two turns: judged
 * by the waits alone, a stay of overload passed for a burst and the next
 * admitted waits of the whole budget again. As many as were admitted, not
 * any: in a stay each row takes about one sentence, so that is twice the
 * load the batch serves, where a lone refusal at a moderate load would
 * quarter the budget, refuse more and keep itself standing. Within the
 * stay, refusals as many as were admitted and as the batch has sentences
 * already stand it: at the onset of overload the stay's first sentences
 * were otherwise admitted at the whole budget, and their waits made the
 * tail of the run. */
static void judge_standing(struct sched *s, int64_t now) {
  bool turned_away = s->window_refused && s->window_refused >= s->window_admitted;
  if ((double)(now - s->window_start_ns) * 1e-9 < s->view.stay_s) {
    if (turned_away && s->window_refused >= s->view.n_slots) s->standing = true;
    return;
  }
  s->standing = turned_away || (s->window_min_turns >= 0 ? s->window_min_turns > 2 : s->standing && s->queued);
  s->window_refused = s->window_admitted = 0;
  s->window_min_turns = -1;
  s->window_start_ns = now;
}

static void *loop(void *arg) {
  struct sched *s = arg;
  size_t max_admit = (size_t)s->p.max_queue;
  struct sentence **admitted = malloc(max_admit * sizeof *admitted);
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    while (!s->stop && !s->wake && !s->queued && !mt_batcher_sentences(s->batch))
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) break;
    s->wake = false;
    struct sched_job *arrived = s->arrived;
    s->arrived = NULL;
    for (struct sched_job *j = arrived, *next; j; j = next) {
      next = j->next_live;
      j->next_live = s->live;
      s->live = j;
    }
    wait_for_company(s);
    compact_queue(s, now_ns());
    size_t n = admitted ? pop_admissions(s, admitted, max_admit) : 0;
    atomic_store(&s->queued_now, s->queued);
    pthread_mutex_unlock(&s->mu);
    sweep(s);
    for (struct sched_job *j = s->live, *next; j; j = next) { /* an empty text: done at once */
      next = j->next_live;
      if (!j->doc.n) {
        live_remove(s, j);
        job_end(s, j, TOLK_OK, false, NULL);
      }
    }
    int64_t t0 = now_ns();
    if (n) admit(s, admitted, n);
    bool stepped = step(s);
    int64_t turn_ns = now_ns() - t0;
    release_ended(s);
    atomic_store(&s->live_rows, mt_batcher_rows(s->batch));
    metrics_gauge(s->m, METRIC_G_LIVE_ROWS, (double)mt_batcher_rows(s->batch));
    metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, (double)sched_queued(s));
    pthread_mutex_lock(&s->mu);
    estimate_drain(s, stepped ? turn_ns : 0);
    if (stepped) atomic_fetch_add(&s->estimated, 1);
    metrics_gauge(s->m, METRIC_G_ROW_BOUND, (double)row_bound(s));
    judge_standing(s, now_ns());
  }
  pthread_mutex_unlock(&s->mu);
  free(admitted);
  return NULL;
}

/* ------------------------------------------------------------ lifetime */

tolk_status sched_create(const tolk_translator *tr, const struct sched_params *p, struct metrics *metrics,
                         struct sched **out, tolk_error *err) {
  *out = NULL;
  struct sched_params d = sched_default_params();
  if (!p) p = &d;
  if (!tr || p->max_batch_tokens < 1 || p->max_queue < 1 || p->max_wait_ms < 0 || p->max_batch_rows < 0 ||
      !(p->max_step_growth == 0 || p->max_step_growth >= 1))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "scheduler: max_batch_tokens and max_queue must be at least 1, "
                                                     "max_wait_ms and max_batch_rows at least 0, max_step_growth 0 "
                                                     "or at least 1");
  struct sched *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  s->tr = tr;
  s->p = *p;
  s->m = metrics;
  s->window_min_turns = -1;
  s->window_start_ns = now_ns();
  if (p->max_step_growth > 0) s->grown_rows = sched_steps_bound(&s->steps, p->max_step_growth);
  atomic_init(&s->live_rows, 0);
  atomic_init(&s->queued_now, 0);
  s->queue = malloc((size_t)p->max_queue * sizeof *s->queue);
  tolk_status st = s->queue ? mt_batcher_new(tr, &s->batch, err)
                            : tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: out of memory");
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (!st && pthread_create(&s->thread, NULL, loop, s) != 0)
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "scheduler: cannot start its thread");
  if (st) {
    mt_batcher_free(s->batch);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->queue);
    free(s);
    return st;
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
  /* The thread is gone: what is left is ours to end. */
  for (struct sched_job *j = s->arrived, *next; j; j = next) {
    next = j->next_live;
    j->next_live = s->live;
    s->live = j;
  }
  s->arrived = NULL;
  while (s->live) job_abort(s, s->live, TOLK_ERR_CANCELLED, false, "shutting down");
  release_ended(s);
  metrics_gauge(s->m, METRIC_G_QUEUE_DEPTH, 0);
  metrics_gauge(s->m, METRIC_G_LIVE_ROWS, 0);
  mt_batcher_free(s->batch);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->queue);
  free(s->running);
  free(s->remaining);
  free(s);
}
