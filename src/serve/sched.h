/*
 * sched.h — the translation scheduler of `tolk serve`: texts in, translated
 * sentences out, with continuous batching over one translator. It knows
 * nothing of HTTP: the API handlers submit texts with a deadline and
 * callbacks, and are called back from the scheduler's own thread, so the
 * whole thing is tested without sockets.
 *
 * A submitted text is split into sentences exactly as
 * tolk_translator_translate_text splits it (lines, sentences, over-long
 * sentences at word boundaries); each sentence waits in one bounded queue.
 * One thread runs the step loop: it admits queued sentences into the running
 * batch (their encoder run and first decoder step happen between two steps
 * of the batch), runs one decoder step for every live row, and retires each
 * sentence the moment it is finished, cancelled or past its deadline. A
 * sentence's ids do not depend on what else shares its batch: they are those
 * of tolk translate on that sentence alone.
 *
 * Threads: every function may be called from any thread. Callbacks run on
 * the scheduler thread and must not block (copy what they need, wake the
 * connection, return).
 */
#ifndef TOLK_SERVE_SCHED_H
#define TOLK_SERVE_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tolk.h"

struct metrics;

struct sched;
struct sched_job;

struct sched_params {
  /* A batch's rows (beams count) × its padded source length stay at or
   * under this; a sentence that alone exceeds it still runs, alone. */
  int max_batch_tokens;
  /* Sentences waiting for admission, all texts together; a text whose
   * sentences do not all fit is refused whole (TOLK_ERR_LIMIT). */
  int max_queue;
  /* An idle scheduler that receives a sentence waits up to this long for
   * more to batch with it (0: starts at once). Never applies while a batch
   * is running: arrivals then join at the next step. */
  int max_wait_ms;
  /* A text is refused (TOLK_ERR_LIMIT, SCHED_QUEUE_FULL) when the sentences
   * ahead of it and its own would take longer than this to start at the
   * rate the queue has been draining (0: no such bound). Whatever this
   * says, a text is refused when they would start after its deadline: it
   * would only time out. Until the queue has drained under load once,
   * there is no rate, and only max_queue applies. */
  int max_queue_wait_ms;
  /* The same bound as a multiple of the time a sentence is expected to
   * stay in the batch at the current load (0: none; used only when
   * max_queue_wait_ms is 0). Waiting is then held to a share of the
   * service time whatever the model, precision or machine: a fixed number
   * of seconds that suits a slow fp32 model lets a faster int8 one's
   * admitted texts wait twice as long relative to their translation. */
  double max_queue_wait_stays;
  /* A request's first sentence joins the batch only while its rows (beams
   * count) stay at or under this (0: only max_batch_tokens bounds them).
   * Past the rows that fill the cores a step only gets longer for everyone
   * in the batch: this is what keeps the latency of admitted texts flat
   * under overload, the excess waiting in the queue where
   * max_queue_wait_ms can refuse it. While no other request waits, the
   * request's other sentences follow it up to twice the bound: split by the
   * bound, a request of four sentences under a bound of three ran three
   * and then one, two stays in the batch where one of four rows costs
   * little more than one of three. */
  int max_batch_rows;
  /* A row bound the scheduler measures (0: none; else at least 1): a
   * request's first sentence joins only while the batch's rows stay at or
   * under those whose decoder step took at most this many times a step of
   * the fewest rows timed (one sentence), as the scheduler has timed them
   * (sched_steps). Where a step costs the read of the weights whatever the
   * rows (a small model, wide cores) the batch grows; where each row costs
   * (int8 on a core with one integer multiply port) it stays small: what
   * max_batch_rows fixes by hand for one model on one machine. Row counts
   * not timed yet are tried, up to twice the most rows timed within the
   * bound, so it grows by doubling. With max_batch_rows too, the smaller
   * bound holds; while no other request waits, the request's sentences
   * follow past it, as for max_batch_rows. */
  double max_step_growth;
};

struct sched_params sched_default_params(void);

/* max_step_growth's evidence: per row count, the times of its last
 * SCHED_STEP_TRUST decoder steps and how many it has had; counts past the
 * table share its last entry. A row count's time is the median of those:
 * a step slowed by a neighbour's burst must not bound the batch for good,
 * since rows past the bound are not timed again. */
#define SCHED_STEP_TABLE 512
#define SCHED_STEP_TRUST 8

struct sched_steps {
  double last_s[SCHED_STEP_TABLE + 1][SCHED_STEP_TRUST];
  uint32_t n[SCHED_STEP_TABLE + 1];
};

/* Adds a step of `rows` (≥ 1) rows that took `seconds`. */
void sched_steps_add(struct sched_steps *st, size_t rows, double seconds);

/* The row bound st gives for `growth` (≥ 1), counting only rows timed
 * SCHED_STEP_TRUST times: one below the fewest rows whose time exceeds
 * growth × the time of the fewest rows; with none exceeding it, twice the
 * most rows (1 with none). */
size_t sched_steps_bound(const struct sched_steps *st, double growth);

/* What admission judges a text's wait by, published by the scheduler
 * thread after each turn: the rows the batch could still take (free_rows)
 * or holds past its bound (over_rows: a request's sentences that followed
 * past it); its running sentences (n_slots) and in how many seconds they
 * are expected to leave, soonest first (the first n_leave of them); how
 * long a sentence stays (stay_s); and the rate sentences leave at (the
 * last busy batch's when idle; 0: no batch has run yet), for an empty
 * batch. Past the SCHED_LEAVE_TABLE-th soonest, a departure is taken to
 * be that one's. */
#define SCHED_LEAVE_TABLE 64

struct sched_view {
  size_t free_rows, over_rows, n_slots, n_leave;
  double leave_s[SCHED_LEAVE_TABLE];
  double stay_s, drain_per_s;
};

/* In how many seconds the last of `ahead` sentences of `beams` rows each
 * (those queued and the text judged) is expected to start. They take the
 * free rows first; then each the place of the next running sentence to
 * leave, once the departures that only bring the batch back to its bound
 * (over_rows) have passed; and once every running one has been replaced,
 * the place of its replacement a stay later: the k-th waits for departure
 * k mod slots of round k / slots. */
double sched_view_wait(const struct sched_view *v, size_t ahead, size_t beams);

/* Per text. Zero fields take the model's defaults. */
struct sched_text_params {
  const char *tag;       /* target-language tag (">>cmn_Hans<<"), or NULL */
  int num_beams;         /* 1: greedy */
  int max_new_tokens;
  int n_best;            /* hypotheses returned per sentence, ≤ num_beams */
  int64_t deadline_ns;   /* CLOCK_MONOTONIC; 0: none. Past it: TOLK_ERR_CANCELLED */
  int min_new_tokens;    /* EOS is not chosen before this many tokens */
  /* The request returns scores (the native API's return_scores); without,
   * a greedy search may leave them 0 and skip the work only they need
   * (tolk_generate_params.output_scores). */
  bool scores;
  /* A later text of a request whose first text was taken: it waits behind
   * its own request, so max_queue_wait_ms does not judge it (max_queue and
   * the deadline still do), or a request of more texts than the batch has
   * rows would be refused on an idle server. */
  bool follows;
  /* Texts the same request submits after this one: the first is judged by
   * when the batch could hold them beside it. */
  size_t later_texts;
  /* The request the text belongs to (NULL: the text alone): its texts
   * join the batch together, past max_batch_rows (above). */
  const void *request;
};

/* One hypothesis: text, ids (decoder start first) and score. */
struct sched_hyp {
  char *text;
  int32_t *ids;
  size_t n_ids;
  float score;
};

/* One translated sentence of a text. */
struct sched_sentence {
  size_t index;               /* its position among the text's sentences */
  size_t begin, end, line;    /* source byte range and 0-based line */
  struct sched_hyp *hyps;     /* n_hyps, best first: hyps[0] is the translation */
  size_t n_hyps;
  double queue_ms;            /* submitted → admitted */
  double encode_ms;           /* its admission's encoder run and first step */
  double decode_ms;           /* admitted → finished */
};

struct sched_result {
  tolk_status status;         /* TOLK_OK, TOLK_ERR_CANCELLED (cancelled, deadline, shutdown), … */
  char message[256];          /* what went wrong, "" on success */
  bool deadline;              /* status CANCELLED because the deadline passed */
  char *text;                 /* the whole translation, line breaks as in the source */
  struct sched_sentence *sentences; /* in source order */
  size_t n_sentences;
  double queue_ms, encode_ms, decode_ms, total_ms; /* maxima over sentences; total: submit → done */
};

void sched_result_free(struct sched_result *r);

struct sched_callbacks {
  /* A sentence is done (in completion order, not source order). May be
   * NULL. `s` is borrowed for the call only. */
  void (*sentence)(void *user, const struct sched_sentence *s);
  /* The text is done: called exactly once per submitted job, whatever
   * happens. `r` is the callee's: free it with sched_result_free. */
  void (*done)(void *user, struct sched_result *r);
};

/* Starts the scheduler thread on `tr`, which must outlive the scheduler.
 * `metrics` (may be NULL) receives queue, batch and timing figures. */
tolk_status sched_create(const tolk_translator *tr, const struct sched_params *p,
                         struct metrics *metrics, struct sched **out, tolk_error *err);

/* Stops the thread. Jobs still queued or running end with
 * TOLK_ERR_CANCELLED ("shutting down") before it returns. */
void sched_free(struct sched *s);

/* Queues `text` (len bytes, valid UTF-8). On success *out is a reference to
 * the job the caller drops with sched_job_release (before or after done()).
 * Fails without calling any callback: TOLK_ERR_LIMIT when the queue cannot
 * take all its sentences (answer 503), TOLK_ERR_INVALID_ARGUMENT for bad
 * parameters (unknown tag, n_best > num_beams), and as the tokenizer and
 * splitter fail (a word too long for the model: TOLK_ERR_LIMIT too; the
 * message tells which: a full queue's message starts with
 * SCHED_QUEUE_FULL, which the HTTP layer tests to answer 503, not 400). */
#define SCHED_QUEUE_FULL "queue full"

tolk_status sched_submit(struct sched *s, const char *text, size_t len,
                         const struct sched_text_params *p, const struct sched_callbacks *cb,
                         void *user, struct sched_job **out, tolk_error *err);

/* Asks for the job to stop (client gone): its sentences leave the queue or
 * the batch at the next step and done() follows with TOLK_ERR_CANCELLED. No
 * effect once done() was called. Safe from any thread while the caller
 * holds its reference. */
void sched_cancel(struct sched_job *j);
void sched_job_release(struct sched_job *j);

/* Sentences waiting for admission / rows decoding now. */
size_t sched_queued(const struct sched *s);
size_t sched_live_rows(const struct sched *s);
/* Turns that ran a step and whose estimate (sched_view) admission now
 * judges by: a test's "after the first turn", without guessing its length. */
uint64_t sched_turns_estimated(const struct sched *s);
/* Whether a one-sentence text would be refused now (for /ready). */
bool sched_full(const struct sched *s);

#endif /* TOLK_SERVE_SCHED_H */
