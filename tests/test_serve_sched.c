/*
 * test_serve_sched.c — the scheduler's contract (src/serve/sched.h), with no
 * sockets, on the fixture model: sentences split as translate_text splits
 * them and translated to the same ids, sentence() once per sentence and
 * done() exactly once per job whatever happens (success, cancel, deadline,
 * shutdown), refusals without callbacks (queue full, bad parameters, a word
 * too long), n-best hypotheses, and the metrics it writes.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/metrics.h"
#include "serve/sched.h"
#include "testutil.h"
#include "tolk.h"

struct probe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int sentences, dones, bad; /* bad: sentences without a hypothesis, checked by the main thread */
  struct sched_result *r;
};

static void on_sentence(void *user, const struct sched_sentence *s) {
  struct probe *p = user;
  pthread_mutex_lock(&p->mu);
  p->sentences++;
  p->bad += !(s->n_hyps >= 1 && s->hyps[0].text != NULL); /* CHECK's counters are the main thread's */
  pthread_mutex_unlock(&p->mu);
}

static void on_done(void *user, struct sched_result *r) {
  struct probe *p = user;
  pthread_mutex_lock(&p->mu);
  p->dones++;
  if (p->r) sched_result_free(p->r);
  p->r = r;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static const struct sched_callbacks cbs = {on_sentence, on_done};

static void probe_init(struct probe *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
}

static void probe_wait(struct probe *p, int dones) {
  pthread_mutex_lock(&p->mu);
  while (p->dones < dones) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

static void probe_free(struct probe *p) {
  CHECK_MSG(p->bad == 0, "%d sentences came without a hypothesis", p->bad);
  sched_result_free(p->r);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void same_as_translate_text(const tolk_translator *tr, struct sched *s) {
  const char *text = "Open file. Save it.\nNext line here.";
  struct probe p;
  probe_init(&p);
  struct sched_text_params tp = {">>cmn_Hans<<", 1, 6, 0, 0};
  struct sched_job *j;
  tolk_error err;
  CHECK(sched_submit(s, text, strlen(text), &tp, &cbs, &p, &j, &err) == TOLK_OK);
  probe_wait(&p, 1);
  sched_job_release(j);
  struct sched_result *r = p.r;
  CHECK(r && r->status == TOLK_OK && r->n_sentences == 3 && p.sentences == 3);
  tolk_generate_params gp = tolk_generate_default_params(tr);
  gp.num_beams = 1;
  gp.max_new_tokens = 6;
  tolk_text_translation t;
  CHECK(tolk_translator_translate_text(tr, text, strlen(text), ">>cmn_Hans<<", &gp, &t, &err) == TOLK_OK);
  CHECK(r && t.n_sentences == r->n_sentences);
  for (size_t i = 0; r && i < t.n_sentences && i < r->n_sentences; i++) {
    const struct sched_sentence *a = &r->sentences[i];
    CHECK(a->index == i && a->begin == t.sentences[i].begin && a->end == t.sentences[i].end &&
          a->line == t.sentences[i].line);
    CHECK(a->hyps[0].n_ids == t.sentences[i].n_ids &&
          !memcmp(a->hyps[0].ids, t.sentences[i].ids, t.sentences[i].n_ids * sizeof(int32_t)));
    CHECK(!strcmp(a->hyps[0].text, t.sentences[i].translation));
  }
  CHECK_MSG(r && !strcmp(r->text, t.text), "%s vs %s", r ? r->text : "", t.text);
  CHECK(r && r->total_ms >= r->decode_ms);
  CHECK(sched_queued(s) == 0 && !sched_full(s)); /* nothing left counted as waiting */
  tolk_text_translation_free(&t);
  probe_free(&p);
}

static void n_best(struct sched *s) {
  struct probe p;
  probe_init(&p);
  struct sched_text_params tp = {">>cmn_Hans<<", 3, 5, 3, 0};
  struct sched_job *j;
  tolk_error err;
  CHECK(sched_submit(s, "Hello world.", 12, &tp, &cbs, &p, &j, &err) == TOLK_OK);
  probe_wait(&p, 1);
  sched_job_release(j);
  CHECK(p.r && p.r->status == TOLK_OK && p.r->n_sentences == 1 && p.r->sentences[0].n_hyps == 3);
  if (p.r && p.r->n_sentences == 1)
    CHECK(p.r->sentences[0].hyps[0].score >= p.r->sentences[0].hyps[2].score);
  probe_free(&p);
}

static void refusals(const tolk_translator *tr, struct metrics *m) {
  struct sched_params sp = sched_default_params();
  sp.max_queue = 2;
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, &sp, m, &s, &err) == TOLK_OK);
  struct probe p;
  probe_init(&p);
  struct sched_job *j = (struct sched_job *)1;
  struct sched_text_params tp = {">>cmn_Hans<<", 1, 4, 0, 0};
  CHECK(sched_submit(s, "One. Two. Three.", 16, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && j == NULL);
  CHECK(!strncmp(err.message, "queue full", 10));
  tp.n_best = 2; /* > num_beams 1 */
  CHECK(sched_submit(s, "One.", 4, &tp, &cbs, &p, &j, &err) == TOLK_ERR_INVALID_ARGUMENT);
  tp.n_best = 0;
  tp.tag = ">>xx_Nope<<";
  CHECK(sched_submit(s, "One.", 4, &tp, &cbs, &p, &j, &err) == TOLK_ERR_INVALID_ARGUMENT);
  tp.tag = ">>cmn_Hans<<";
  size_t n = 6000;
  char *word = malloc(n + 1);
  for (size_t i = 0; i < n; i++) word[i] = (char)("qxzjvkwy"[i % 8] + (i / 8) % 2);
  word[n] = '\0';
  CHECK(sched_submit(s, word, n, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT);
  CHECK(strstr(err.message, "positions") != NULL);
  free(word);
  CHECK(!sched_full(s));
  CHECK(p.dones == 0 && p.sentences == 0); /* refused: no callback */
  sched_free(s);
  probe_free(&p);
}

static void cancel_deadline_shutdown(const tolk_translator *tr) {
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, NULL, NULL, &s, &err) == TOLK_OK);
  /* A long text cancelled at once: done() once, CANCELLED, not a deadline. */
  char text[4000] = "";
  for (int i = 0; i < 120; i++) strcat(text, "Open the file. ");
  struct probe p;
  probe_init(&p);
  struct sched_text_params tp = {">>cmn_Hans<<", 1, 4, 0, 0};
  struct sched_job *j;
  CHECK(sched_submit(s, text, strlen(text), &tp, &cbs, &p, &j, &err) == TOLK_OK);
  sched_cancel(j);
  probe_wait(&p, 1);
  CHECK(p.r && p.r->status == TOLK_ERR_CANCELLED && !p.r->deadline);
  CHECK(p.r && (int)p.r->n_sentences == p.sentences && p.sentences < 120);
  sched_cancel(j); /* after done(): no effect */
  sched_job_release(j);
  probe_free(&p);
  /* A deadline already past. */
  probe_init(&p);
  tp.deadline_ns = now_ns() - 1;
  CHECK(sched_submit(s, "Late.", 5, &tp, &cbs, &p, &j, &err) == TOLK_OK);
  sched_job_release(j); /* released before done(): still called */
  probe_wait(&p, 1);
  CHECK(p.r && p.r->status == TOLK_ERR_CANCELLED && p.r->deadline);
  probe_free(&p);
  /* Empty text: done at once, nothing translated. */
  probe_init(&p);
  tp.deadline_ns = 0;
  CHECK(sched_submit(s, "  \n ", 4, &tp, &cbs, &p, &j, &err) == TOLK_OK);
  probe_wait(&p, 1);
  sched_job_release(j);
  CHECK(p.r && p.r->status == TOLK_OK && p.r->n_sentences == 0 && !strcmp(p.r->text, ""));
  probe_free(&p);
  /* Shutdown with work queued: every job still gets its done(). */
  probe_init(&p);
  int n = 20;
  for (int i = 0; i < n; i++) {
    CHECK(sched_submit(s, text, 150, &tp, &cbs, &p, &j, &err) == TOLK_OK);
    sched_job_release(j);
  }
  sched_free(s);
  CHECK(p.dones == n);
  CHECK(p.r && p.r->status == TOLK_ERR_CANCELLED && !strcmp(p.r->message, "shutting down"));
  probe_free(&p);
}

/* --max-queue-wait: once the queue has drained under load, a text that
 * would wait longer than the budget (or past its deadline) to start is
 * refused at submission, and one that would not is taken. The budget is
 * max_queue_wait_ms, or stays × the time a sentence is expected to stay
 * in the batch. */
static void wait_budget(const tolk_translator *tr, int ms, double stays) {
  struct sched_params sp = sched_default_params();
  sp.max_batch_tokens = 16; /* one sentence at a time: a slow, measurable drain */
  sp.max_queue = 100000;
  sp.max_queue_wait_ms = ms;
  sp.max_queue_wait_stays = stays;
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, &sp, NULL, &s, &err) == TOLK_OK);
  char *text = malloc(16 * 1000 + 1);
  text[0] = '\0';
  for (int i = 0; i < 1000; i++) strcat(text, "Open the file. ");
  struct probe p;
  probe_init(&p);
  /* 30 tokens each, one at a time: about 1000 sentences take seconds */
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 1, .max_new_tokens = 30, .min_new_tokens = 30};
  struct sched_job *big, *j;
  /* Nothing has run yet, nothing to estimate a wait from: only max_queue
   * applies, so the big text is taken. */
  CHECK(sched_submit(s, text, strlen(text), &tp, &cbs, &p, &big, &err) == TOLK_OK);
  /* Once some sentences have finished the drain is measured, and every
   * one admitted after the first had waited: the queue stands, and the
   * budget is a quarter. ~980 still queued then wait 490 stays at two
   * rows, whatever the machine's speed (a fixed sleep let a fast one drain
   * most of them first). */
  for (int done = 0; done < 20;) {
    sched_yield();
    pthread_mutex_lock(&p.mu);
    done = p.sentences;
    pthread_mutex_unlock(&p.mu);
  }
  CHECK(sched_queued(s) > 900);
  struct timespec judged = {0, 50 * 1000000L}; /* a stay or more for the queue to be judged */
  nanosleep(&judged, NULL);
  CHECK_MSG(sched_submit(s, text, strlen(text), &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && j == NULL,
            "a text that would wait seconds was taken");
  if (j) { /* the failure above: out of the way, or the waits below would not end */
    sched_cancel(j);
    sched_job_release(j);
  }
  const char *past = strstr(err.message, "past the ");
  double allowed = past ? strtod(past + 9, NULL) : -1;
  CHECK_MSG(strstr(err.message, SCHED_QUEUE_FULL) && past && strstr(past, " s allowed"), "%s", err.message);
  CHECK_MSG(strstr(err.message, "while the queue stands"), "%s", err.message);
  if (ms) CHECK_MSG(allowed == 0.075, "%s", err.message);
  /* a stay of 30 tokens, one sentence at a time, takes some ms but not seconds */
  else CHECK_MSG(allowed > 0 && allowed < stays / 4, "%s", err.message);
  /* The same text as a later one of a request already taken is not judged
   * by the budget: it waits behind its own request. */
  tp.follows = true;
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK, "%s", err.message);
  tp.follows = false;
  sched_cancel(j);
  sched_job_release(j);
  sched_cancel(big);
  probe_wait(&p, 2);
  sched_job_release(big);
  /* The scheduler idle, one sentence starts at once, whatever the budget
   * (a quartered budget of 2 stays is shorter than one stay, so a batch
   * still running might not have taken it). */
  while (sched_live_rows(s)) sched_yield();
  struct timespec settle = {0, 100 * 1000000L}; /* the estimate is published after the turn */
  nanosleep(&settle, NULL);
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK, "%s", err.message);
  if (j) {
    probe_wait(&p, 3);
    sched_job_release(j);
  }
  probe_free(&p);
  sched_free(s);
  free(text);
}

/* A scheduler with params sp and one sentence of 500 tokens running alone
 * in it (*longj), the estimate of its first turns published, and at most
 * 100 turns of it run: a text waiting for it then waits over 400, which
 * standing_at_onset counts on (a budget of half its stay, 250). */
static struct sched *with_long_sentence(const tolk_translator *tr, const struct sched_params *sp, struct metrics *m,
                                        struct probe *p, struct sched_job **longj) {
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, sp, m, &s, &err) == TOLK_OK);
  probe_init(p);
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 1, .max_new_tokens = 500, .min_new_tokens = 500};
  CHECK(sched_submit(s, "Open the file.", 14, &tp, &cbs, p, longj, &err) == TOLK_OK);
  /* The estimate is published after the sentence's first turn, however
   * long a busy machine makes it (a fixed 20 ms was once too short beside
   * another test); then 20 ms more, which standing_at_onset's timing
   * counts, or 100 turns if they come first: the fixture's turns are
   * ~0.08 ms, and 20 ms was 270 of them, past the budget. */
  while (!sched_turns_estimated(s)) sched_yield();
  int64_t t0 = now_ns();
  struct timespec tick = {0, 100 * 1000L};
  while (now_ns() - t0 < 20 * 1000000L && sched_turns_estimated(s) < 100) nanosleep(&tick, NULL);
  return s;
}

/* Cancels the long sentence (its done() the dones-th) and ends s. */
static void end_long_sentence(struct sched *s, struct probe *p, struct sched_job *longj, int dones) {
  sched_cancel(longj);
  probe_wait(p, dones);
  sched_job_release(longj);
  probe_free(p);
  sched_free(s);
}

/* Overload is judged standing as soon as the budget has refused as many
 * texts as were admitted and as the batch has sentences, not a stay later:
 * with one row and a sentence of 500 tokens in it (a stay of 500 turns),
 * a text that would wait for it is refused at the whole budget, and the
 * ones after it at the quartered one from the next turn on. A turn's
 * length is the machine's (a fixed sleep held one turn in release builds
 * but not under TSan), so "the next turn" is measured against the time the
 * first refusal took to come, 20 ms of settling and a turn: a stay is 500.
 * With max_wait_ms the long sentence first waits that long for company on
 * the idle scheduler, hundreds of the fixture's turns, yet it found a free
 * row: that wait is no evidence of a standing queue. */
static void standing_at_onset(const tolk_translator *tr, int max_wait_ms) {
  struct sched_params sp = sched_default_params();
  sp.max_batch_rows = 1;
  sp.max_wait_ms = max_wait_ms;
  sp.max_queue_wait_stays = 0.5;
  struct probe p;
  struct sched_job *longj, *j;
  int64_t t0 = now_ns();
  struct sched *s = with_long_sentence(tr, &sp, NULL, &p, &longj);
  tolk_error err;
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 1, .max_new_tokens = 30, .min_new_tokens = 30};
  CHECK_MSG(sched_submit(s, "Close it now.", 13, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && !j,
            "a text that would wait for 500 turns was taken");
  CHECK_MSG(!strstr(err.message, "stands"), "standing before any refusal (max_wait_ms %d): %s", max_wait_ms,
            err.message);
  int64_t t1 = now_ns(), t2 = t1;
  struct timespec ms = {0, 1000000L};
  bool stands = false, refused = true;
  while (refused && !stands && sched_live_rows(s) == 1) {
    nanosleep(&ms, NULL);
    refused = sched_submit(s, "Close it now.", 13, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && !j;
    stands = refused && strstr(err.message, "while the queue stands");
    t2 = now_ns();
  }
  CHECK_MSG(refused, "a text that would wait for 500 turns was taken");
  if (!refused && j) { /* the failure above: out of the way */
    sched_cancel(j);
    sched_job_release(j);
  }
  CHECK_MSG(stands && t2 - t1 <= 2 * (t1 - t0),
            "not standing %.1f ms after the batch's worth of refusals (%.1f ms after the long sentence's start): %s",
            (double)(t2 - t1) * 1e-6, (double)(t1 - t0) * 1e-6, err.message);
  end_long_sentence(s, &p, longj, 1);
}

/* A beam wider than --max-batch-rows: such a sentence only ever runs
 * alone, and an idle scheduler takes it however long the last one took
 * (it was refused with 503 once any had run: no row of the bound was free). */
static void beam_wider_than_rows(const tolk_translator *tr) {
  struct sched_params sp = sched_default_params();
  sp.max_batch_rows = 3;
  sp.max_queue_wait_ms = 1; /* any expected wait is over the budget */
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, &sp, NULL, &s, &err) == TOLK_OK);
  struct probe p;
  probe_init(&p);
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 4, .max_new_tokens = 30, .min_new_tokens = 30};
  for (int i = 0; i < 3; i++) {
    struct sched_job *j;
    CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK,
              "beam 4 over a 3-row bound, text %d on an idle scheduler: %s", i, err.message);
    if (!j) break;
    probe_wait(&p, i + 1);
    sched_job_release(j);
    while (sched_live_rows(s)) sched_yield();
    struct timespec settle = {0, 100 * 1000000L}; /* the scheduler publishes its estimate after the turn */
    nanosleep(&settle, NULL);
  }
  CHECK(p.r && p.r->status == TOLK_OK);
  probe_free(&p);
  sched_free(s);
}

/* Rows the scheduler holds at most until the probe has `dones` done. */
static size_t most_rows_until(const struct sched *s, struct probe *p, int dones) {
  size_t most = 0;
  for (;;) {
    size_t rows = sched_live_rows(s);
    most = rows > most ? rows : most;
    pthread_mutex_lock(&p->mu);
    int done = p->dones;
    pthread_mutex_unlock(&p->mu);
    if (done >= dones) return most;
    sched_yield();
  }
}

/* Submits n one-sentence texts of 200 tokens to s at once; the most rows
 * its batch held until every one was done. 200, not 40: the fixture's
 * turns take ~0.08 ms, and 12 texts of 40 were done within 20 ms, which a
 * second test process on the two cores could take from this sampler. */
static size_t most_rows_of(struct sched *s, int n) {
  struct probe p;
  probe_init(&p);
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 1, .max_new_tokens = 200, .min_new_tokens = 200};
  tolk_error err;
  for (int i = 0; i < n; i++) {
    struct sched_job *j;
    CHECK(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK);
    sched_job_release(j);
  }
  size_t most = most_rows_until(s, &p, n);
  probe_free(&p);
  return most;
}

/* --max-batch-rows: however many texts wait, the batch never holds more
 * rows than the bound, and it does fill up to it. */
static void row_bound(const tolk_translator *tr) {
  struct sched_params sp = sched_default_params();
  sp.max_batch_rows = 2;
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, &sp, NULL, &s, &err) == TOLK_OK);
  size_t most = most_rows_of(s, 12);
  CHECK_MSG(most == 2, "the batch held %zu rows at most, bound 2", most);
  sched_free(s);
  /* A negative bound is refused. */
  sp.max_batch_rows = -1;
  CHECK(sched_create(tr, &sp, NULL, &s, &err) == TOLK_ERR_INVALID_ARGUMENT && s == NULL);
}

/* sched_steps alone: the bound from step times, trusted after
 * SCHED_STEP_TRUST steps of a row count, doubling while steps stay within
 * the growth, one below the first row count past it, a slow step or three
 * among eight ignored. */
static void steps_rule(void) {
  struct sched_steps st;
  memset(&st, 0, sizeof st);
  CHECK(sched_steps_bound(&st, 1.5) == 1); /* nothing timed: one sentence first */
  for (int i = 0; i < SCHED_STEP_TRUST - 1; i++) sched_steps_add(&st, 1, 0.010);
  CHECK(sched_steps_bound(&st, 1.5) == 1);
  sched_steps_add(&st, 1, 0.010);
  CHECK(sched_steps_bound(&st, 1.5) == 2);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&st, 2, 0.012);
  CHECK(sched_steps_bound(&st, 1.5) == 4);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&st, 4, 0.014);
  CHECK(sched_steps_bound(&st, 1.5) == 8);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&st, 3, 0.016);
  CHECK_MSG(sched_steps_bound(&st, 1.5) == 2, "3 rows at 1.6x a one-row step: bound %zu, want 2",
            sched_steps_bound(&st, 1.5));
  CHECK(sched_steps_bound(&st, 2.0) == 8);
  /* Beams: the fewest rows timed (4, one sentence of beam 4) are the base. */
  struct sched_steps b;
  memset(&b, 0, sizeof b);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&b, 4, 0.020), sched_steps_add(&b, 8, 0.035);
  CHECK(sched_steps_bound(&b, 1.5) == 7);
  CHECK(sched_steps_bound(&b, 2.0) == 16);
  /* Three slow steps among eight leave the median; four move it. */
  struct sched_steps q;
  memset(&q, 0, sizeof q);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&q, 1, 0.010);
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&q, 2, i % 3 ? 0.011 : 0.100);
  CHECK(sched_steps_bound(&q, 1.5) == 4);
  for (int i = 0; i < 2; i++) sched_steps_add(&q, 2, 0.100);
  CHECK(sched_steps_bound(&q, 1.5) == 1);
  /* Rows past the table count as its last entry. */
  for (int i = 0; i < SCHED_STEP_TRUST; i++) sched_steps_add(&st, 100000, 0.5);
  CHECK(st.n[SCHED_STEP_TABLE] == SCHED_STEP_TRUST && sched_steps_bound(&st, 1.5) == 2);
}

/* sched_view_wait alone: free rows first, then departures in order,
 * then a stay per round; the departures that only bring a batch back to
 * its bound (a request that followed past it) come free to no one. */
static void view_wait(void) {
  struct sched_view v = {.free_rows = 2, .n_slots = 3, .n_leave = 3, .leave_s = {0.02, 0.20, 0.25},
                         .stay_s = 0.3, .drain_per_s = 10};
  CHECK(sched_view_wait(&v, 2, 1) == 0);
  CHECK(sched_view_wait(&v, 3, 1) == 0.02);
  CHECK(sched_view_wait(&v, 1, 2) == 0);
  CHECK(sched_view_wait(&v, 2, 2) == 0.02);  /* two rows free are one place of beam 2 */
  CHECK(sched_view_wait(&v, 6, 1) == 0.02 + 0.3); /* the fourth departure: the first's replacement */
  v.free_rows = 0;
  CHECK(sched_view_wait(&v, 1, 1) == 0.02);
  v.over_rows = 1; /* four rows in a batch of three: the first departure frees none */
  CHECK_MSG(sched_view_wait(&v, 1, 1) == 0.20, "one row past the bound: wait %g, want 0.2",
            sched_view_wait(&v, 1, 1));
  CHECK(sched_view_wait(&v, 2, 1) == 0.25);
  CHECK(sched_view_wait(&v, 1, 2) == 0.20); /* one row over, beam 2: one departure of two rows */
  v.over_rows = 2;
  CHECK(sched_view_wait(&v, 1, 1) == 0.25);
  v.n_slots = v.n_leave = 0; /* an empty batch: the last busy batch's rate */
  v.over_rows = 0;
  CHECK(sched_view_wait(&v, 3, 1) == 0.3);
  v.drain_per_s = 0;
  CHECK(sched_view_wait(&v, 3, 1) == 0); /* nothing has run: nothing to judge by */
}

/* Decoder steps of more than `rows` rows so far, from the rows histogram
 * of slot 0 ("tiny") in root: every step is counted there, where a polling thread can
 * miss the few milliseconds a short text runs on a busy machine. */
static double steps_over_rows(struct metrics *root, const char *rows) {
  char *text = metrics_render(root, NULL);
  char le[96];
  snprintf(le, sizeof le, "tolk_batch_rows_bucket{slot=\"0\",model=\"tiny\",le=\"%s\"} ", rows);
  const char *at = text ? strstr(text, le) : NULL;
  const char *all = text ? strstr(text, "tolk_batch_rows_bucket{slot=\"0\",model=\"tiny\",le=\"+Inf\"} ") : NULL;
  double within = -1, total = -1;
  CHECK(at && all && sscanf(strchr(at, '}') + 1, "%lf", &within) == 1 &&
        sscanf(strchr(all, '}') + 1, "%lf", &total) == 1);
  free(text);
  return total - within;
}

/* --max-step-growth in the scheduler: with a growth no step exceeds and
 * 12 texts waiting, the batch starts with one sentence alone until a
 * one-row step is trusted (SCHED_STEP_TRUST steps of one row, counted in
 * the rows histogram, not watched: the steps of this model outrun a
 * polling thread) and grows by doubling past 8 rows; the gauge says the
 * bound; a growth under 1 is refused. */
static void step_growth(const tolk_translator *tr) {
  struct sched_params sp = sched_default_params();
  sp.max_step_growth = 1000;
  struct metrics *root = metrics_create();
  struct metrics *m = metrics_model(root, 0);
  metrics_set_model(root, 0, "tiny", NULL);
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, &sp, m, &s, &err) == TOLK_OK);
  size_t most = most_rows_of(s, 12);
  CHECK_MSG(steps_over_rows(root, "4") > 0,
            "the batch held no more than 4 rows (%zu seen), want 8 (1, 2, 4, 8, … by doubling)", most);
  char *text = metrics_render(root, NULL);
  const char *g = text ? strstr(text, "tolk_batch_row_bound{slot=\"0\",model=\"tiny\"} ") : NULL;
  double bound = 0;
  CHECK(g && sscanf(strchr(g, '}') + 1, "%lf", &bound) == 1 && bound >= 16);
  const char *h = text ? strstr(text, "tolk_batch_rows_bucket{slot=\"0\",model=\"tiny\",le=\"1\"} ") : NULL;
  double one_row = 0;
  CHECK_MSG(h && sscanf(strchr(h, '}') + 1, "%lf", &one_row) == 1 && one_row >= SCHED_STEP_TRUST,
            "%g steps of one row, want %d before the batch grew", one_row, SCHED_STEP_TRUST);
  free(text);
  sched_free(s);
  metrics_free(root);
  sp.max_step_growth = 0.5;
  CHECK(sched_create(tr, &sp, NULL, &s, &err) == TOLK_ERR_INVALID_ARGUMENT && s == NULL);
}

/* A request's sentences join the batch together, up to twice the row
 * bound while no other request waits, and a text is judged by when the
 * batch could hold all of it that way: with one of two rows taken by a long sentence, a text of two
 * sentences starts at once, both rows beside the long one (3 > the bound
 * of 2, and only three sentences run: a step of more than 2 rows held all
 * three); a text of four, or the first of a request of four texts, would
 * have its fourth wait for the long one to leave, past a budget of 1 ms. */
static void whole_text_wait(const tolk_translator *tr) {
  struct sched_params sp = sched_default_params();
  sp.max_batch_rows = 2;
  sp.max_queue_wait_ms = 1;
  struct metrics *root = metrics_create();
  metrics_set_model(root, 0, "tiny", NULL);
  struct probe p;
  struct sched_job *longj, *j;
  struct sched *s = with_long_sentence(tr, &sp, metrics_model(root, 0), &p, &longj);
  tolk_error err;
  CHECK_MSG(sched_live_rows(s) == 1, "the long sentence ended early: %zu rows", sched_live_rows(s));
  CHECK(steps_over_rows(root, "2") == 0);
  /* turns enough to run beside the long one a while */
  struct sched_text_params tp = {.tag = ">>cmn_Hans<<", .num_beams = 1, .max_new_tokens = 40, .min_new_tokens = 40};
  const char *four = "Open the file. Close it now. Save the text. Read it again.";
  CHECK_MSG(sched_submit(s, four, strlen(four), &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && !j,
            "a text of four sentences was taken with one row free");
  CHECK_MSG(strstr(err.message, "past the 0.001 s allowed"), "%s", err.message);
  tp.later_texts = 3;
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && !j,
            "the first of four texts was taken with one row free");
  tp.later_texts = 0;
  CHECK_MSG(sched_submit(s, "Open the file. Close it now.", 28, &tp, &cbs, &p, &j, &err) == TOLK_OK, "%s",
            err.message);
  probe_wait(&p, 1);
  double three = steps_over_rows(root, "2");
  CHECK_MSG(three > 0, "a text of two sentences never ran in 3 rows beside the long one");
  sched_job_release(j);
  /* The same for a request of two texts of one sentence each, judged with
   * the long sentence alone in the batch: a text's rows leave after its
   * done(), and in between the batch is full, which the earlier refusals'
   * standing queue would not wait for (a machine busy with other tests). */
  while (sched_live_rows(s) != 1) sched_yield();
  int request;
  struct sched_job *second;
  tp.request = &request;
  tp.later_texts = 1;
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK, "%s", err.message);
  tp.later_texts = 0;
  tp.follows = true;
  CHECK_MSG(sched_submit(s, "Close it now.", 13, &tp, &cbs, &p, &second, &err) == TOLK_OK, "%s", err.message);
  probe_wait(&p, 3);
  CHECK_MSG(steps_over_rows(root, "2") > three, "a request of two texts never ran in 3 rows beside the long one");
  sched_job_release(j);
  sched_job_release(second);
  /* While another request waits, nothing follows past the bound: a text of
   * two sentences is judged by the whole of it again, and refused. The one
   * waiting has two beams, which the one free row cannot take; it follows
   * a text of its own request, so the budget does not judge it. */
  struct sched_job *wide;
  tp.request = NULL;
  tp.num_beams = 2;
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &wide, &err) == TOLK_OK, "%s", err.message);
  tp.num_beams = 1;
  tp.follows = false;
  CHECK_MSG(sched_submit(s, "Open the file. Close it now.", 28, &tp, &cbs, &p, &j, &err) == TOLK_ERR_LIMIT && !j,
            "a text of two sentences was taken past the bound while another request waited");
  sched_cancel(wide);
  probe_wait(&p, 4);
  sched_job_release(wide);
  CHECK_MSG(sched_submit(s, "Open the file.", 14, &tp, &cbs, &p, &j, &err) == TOLK_OK, "%s", err.message);
  probe_wait(&p, 5);
  sched_job_release(j);
  end_long_sentence(s, &p, longj, 6);
  metrics_free(root);
}

int main(void) {
  const char *fx = getenv("TOLK_FIXTURES");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/marian-tiny", fx ? fx : "tests/fixtures");
  tolk_translator_params tp = tolk_translator_default_params();
  tp.threads = 1;
  tolk_translator *tr;
  tolk_error err;
  if (tolk_translator_create(dir, tp, &tr, &err)) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  struct metrics *root = metrics_create();
  struct metrics *m = metrics_model(root, 0);
  metrics_set_model(root, 0, "tiny", NULL);
  struct sched *s;
  CHECK(sched_create(tr, NULL, m, &s, &err) == TOLK_OK);
  same_as_translate_text(tr, s);
  n_best(s);
  sched_free(s);
  refusals(tr, m);
  cancel_deadline_shutdown(tr);
  wait_budget(tr, 300, 0);
  wait_budget(tr, 0, 2);
  row_bound(tr);
  steps_rule();
  view_wait();
  step_growth(tr);
  beam_wider_than_rows(tr);
  whole_text_wait(tr);
  standing_at_onset(tr, 0);
  standing_at_onset(tr, 30);
  char *text = metrics_render(root, NULL);
  CHECK(text && strstr(text, "tolk_sentences_total{slot=\"0\",model=\"tiny\"} 4\n"));
  CHECK(text && strstr(text, "tolk_queue_rejected_texts_total{slot=\"0\",model=\"tiny\"} 1\n"));
  free(text);
  metrics_free(root);
  tolk_translator_free(tr);
  return tu_finish("test_serve_sched");
}
