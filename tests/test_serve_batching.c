/*
 * test_serve_batching.c — the scheduler's continuous batching, with no
 * sockets, on the marian-tiny fixture (fp32 and int8 graphs):
 *  - 64 texts submitted at once from 8 threads, greedy and beam 4 mixed, get
 *    for every sentence exactly the ids tolk_translator_translate_text gives
 *    that text alone, although they shared batches in every combination;
 *  - a short text submitted while long ones decode is done before any of
 *    them: it joins the running batch at the next step and leaves when done.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/sched.h"
#include "testutil.h"
#include "tolk.h"

static const char *const words[] = {"open", "the", "file", "save", "print", "settings", "network",
                                    "folder", "hidden", "delete", "copy", "window", "update", "password"};

/* Text i: 1 to 4 sentences of varied length. */
static void make_text(int i, char *buf, size_t size) {
  buf[0] = '\0';
  int sentences = 1 + i % 4;
  for (int s = 0; s < sentences; s++) {
    int n = 2 + (i * 7 + s * 3) % 9;
    for (int w = 0; w < n; w++) {
      const char *x = words[(i * 5 + s * 11 + w * 3) % (sizeof words / sizeof *words)];
      size_t l = strlen(buf);
      snprintf(buf + l, size - l, "%s%s", w ? " " : "", x);
      if (!w) buf[l] = (char)(buf[l] - 'a' + 'A'); /* a capital to start the sentence */
    }
    size_t l = strlen(buf);
    snprintf(buf + l, size - l, "%s", s + 1 < sentences ? ". " : ".");
  }
}

struct probe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct sched_result *r;
  int order; /* position among the dones */
};

static _Atomic int done_counter;

static void on_done(void *user, struct sched_result *r) {
  struct probe *p = user;
  pthread_mutex_lock(&p->mu);
  p->r = r;
  p->order = atomic_fetch_add(&done_counter, 1);
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static const struct sched_callbacks cbs = {NULL, on_done};

static void wait_done(struct probe *p) {
  pthread_mutex_lock(&p->mu);
  while (!p->r) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

enum { TEXTS = 64, THREADS = 8 };

struct shared {
  struct sched *s;
  char text[TEXTS][512];
  struct probe probe[TEXTS];
  struct sched_job *job[TEXTS];
  tolk_status submitted[TEXTS];
};

static int beams_of(int i) { return i % 3 == 0 ? 4 : 1; }

struct submit_arg {
  struct shared *sh;
  int t;
};

static void *submitter(void *arg) {
  struct shared *sh = ((struct submit_arg *)arg)->sh;
  int t = ((struct submit_arg *)arg)->t;
  for (int i = t; i < TEXTS; i += THREADS) {
    struct sched_text_params tp = {">>cmn_Hans<<", beams_of(i), 12, 0, 0};
    tolk_error err;
    /* Checked by the main thread: the CHECK counters are not shared. */
    sh->submitted[i] = sched_submit(sh->s, sh->text[i], strlen(sh->text[i]), &tp, &cbs, &sh->probe[i],
                                    &sh->job[i], &err);
  }
  return NULL;
}

static void concurrent(const tolk_translator *tr, const char *what) {
  static struct shared sh;
  memset(&sh, 0, sizeof sh);
  struct sched_params sp = sched_default_params();
  sp.max_batch_tokens = 600; /* several admissions per batch, batches of every make-up */
  tolk_error err;
  CHECK(sched_create(tr, &sp, NULL, &sh.s, &err) == TOLK_OK);
  for (int i = 0; i < TEXTS; i++) {
    make_text(i, sh.text[i], sizeof sh.text[i]);
    pthread_mutex_init(&sh.probe[i].mu, NULL);
    pthread_cond_init(&sh.probe[i].cv, NULL);
  }
  pthread_t th[THREADS];
  struct submit_arg args[THREADS];
  for (int t = 0; t < THREADS; t++) {
    args[t] = (struct submit_arg){&sh, t};
    pthread_create(&th[t], NULL, submitter, &args[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  int same = 0, sentences = 0;
  for (int i = 0; i < TEXTS; i++) {
    CHECK_MSG(sh.submitted[i] == TOLK_OK, "%s text %d: not accepted", what, i);
    if (sh.submitted[i]) continue;
    wait_done(&sh.probe[i]);
    const struct sched_result *r = sh.probe[i].r;
    tolk_generate_params gp = tolk_generate_default_params(tr);
    gp.num_beams = beams_of(i);
    gp.max_new_tokens = 12;
    tolk_text_translation alone;
    CHECK(tolk_translator_translate_text(tr, sh.text[i], strlen(sh.text[i]), ">>cmn_Hans<<", &gp, &alone, &err) ==
          TOLK_OK);
    CHECK_MSG(r->status == TOLK_OK && r->n_sentences == alone.n_sentences, "%s text %d: %s", what, i, r->message);
    for (size_t k = 0; r->status == TOLK_OK && k < r->n_sentences && k < alone.n_sentences; k++) {
      const struct sched_hyp *h = &r->sentences[k].hyps[0];
      bool ok = h->n_ids == alone.sentences[k].n_ids &&
                !memcmp(h->ids, alone.sentences[k].ids, h->n_ids * sizeof *h->ids);
      CHECK_MSG(ok, "%s text %d sentence %zu: ids differ from the text translated alone", what, i, k);
      same += ok;
      sentences++;
    }
    CHECK(r->status != TOLK_OK || !strcmp(r->text, alone.text));
    tolk_text_translation_free(&alone);
    sched_job_release(sh.job[i]);
    sched_result_free(sh.probe[i].r);
  }
  printf("%s: %d of %d sentences identical to their texts alone\n", what, same, sentences);
  sched_free(sh.s);
}

static void short_overtakes_long(const tolk_translator *tr, const char *what) {
  struct sched *s;
  tolk_error err;
  CHECK(sched_create(tr, NULL, NULL, &s, &err) == TOLK_OK);
  atomic_store(&done_counter, 0);
  char longer[3000] = "";
  for (int i = 0; i < 12; i++) strcat(longer, "Show the hidden files and folders in the list of the window. ");
  struct probe lp[3], sp;
  struct sched_job *lj[3], *sj;
  struct sched_text_params ltp = {">>cmn_Hans<<", 4, 60, 0, 0}, stp = {">>cmn_Hans<<", 1, 8, 0, 0};
  memset(lp, 0, sizeof lp);
  memset(&sp, 0, sizeof sp);
  for (int i = 0; i < 3; i++) {
    pthread_mutex_init(&lp[i].mu, NULL);
    pthread_cond_init(&lp[i].cv, NULL);
    CHECK(sched_submit(s, longer, strlen(longer), &ltp, &cbs, &lp[i], &lj[i], &err) == TOLK_OK);
  }
  pthread_mutex_init(&sp.mu, NULL);
  pthread_cond_init(&sp.cv, NULL);
  for (int tries = 0; sched_live_rows(s) == 0 && tries < 5000; tries++) usleep(1000);
  CHECK_MSG(sched_live_rows(s) > 0, "%s: the long texts never started", what);
  CHECK(sched_submit(s, "Open file.", 10, &stp, &cbs, &sp, &sj, &err) == TOLK_OK);
  wait_done(&sp);
  for (int i = 0; i < 3; i++) wait_done(&lp[i]);
  CHECK_MSG(sp.order == 0, "%s: the short text finished %dth, after long ones", what, sp.order + 1);
  CHECK(sp.r->status == TOLK_OK && lp[0].r->status == TOLK_OK);
  sched_result_free(sp.r);
  sched_job_release(sj);
  for (int i = 0; i < 3; i++) {
    sched_result_free(lp[i].r);
    sched_job_release(lj[i]);
  }
  sched_free(s);
}

int main(void) {
  const char *fx = getenv("TOLK_FIXTURES");
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/marian-tiny", fx ? fx : "tests/fixtures");
  for (int int8 = 0; int8 < 2; int8++) {
    tolk_translator_params tp = tolk_translator_default_params();
    tp.threads = 2;
    tp.int8 = int8;
    tolk_translator *tr;
    tolk_error err;
    if (tolk_translator_create(dir, tp, &tr, &err)) {
      fprintf(stderr, "%s\n", err.message);
      return 1;
    }
    concurrent(tr, int8 ? "int8" : "fp32");
    short_overtakes_long(tr, int8 ? "int8" : "fp32");
    tolk_translator_free(tr);
  }
  return tu_finish("test_serve_batching");
}
