/*
 * search.c — greedy, sampling and beam search with transformers' generate()
 * semantics (4.57): the same logits processors in the same order
 * (repetition penalty, no-repeat n-grams, bad words, min length, min new
 * tokens, forced EOS, then the sampling warpers, then renormalisation), and
 * the same beam bookkeeping — 2 × num_beams candidates per step, finished
 * hypotheses kept in a top-num_beams set with the length penalty applied when
 * they finish, and the early-stopping heuristic deciding when a sentence can
 * no longer improve. Each sentence is searched on its own, one step at a
 * time (struct mt_search): generate.c runs a batch of them, the service's
 * scheduler a batch whose sentences come and go. Where transformers decides
 * for the whole batch — it stops when every candidate of every sentence hit
 * EOS or the length limit — a sentence here stops when all of its own did;
 * its result is settled by then either way.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/pool.h"
#include "../kern/kern.h"
#include "mt.h"

#define NEG_INF (-INFINITY)
static const float kBig = 1.0e9f; /* transformers' "very large negative" */

struct gen {
  const struct mt_config *cfg;
  const tolk_generate_params *p;
  int max_length;
  size_t vocab;
  float *row; /* vocab scratch */
};

/* ---------------------------------------------------------- processors */

/* Applies the processors to one row whose history is seq[0..len). */
static void process(const struct gen *g, const int32_t *seq, int len, float *x) {
  const tolk_generate_params *p = g->p;
  const struct mt_config *c = g->cfg;
  size_t V = g->vocab;
  if (p->repetition_penalty != 1.0f && p->repetition_penalty > 0) {
    /* Each distinct token once, as torch's gather/scatter does. */
    for (int i = 0; i < len; i++) {
      bool seen = false;
      for (int j = 0; j < i && !seen; j++) seen = seq[j] == seq[i];
      if (seen || seq[i] < 0 || (size_t)seq[i] >= V) continue;
      float s = x[seq[i]];
      x[seq[i]] = s < 0 ? s * p->repetition_penalty : s / p->repetition_penalty;
    }
  }
  int n = p->no_repeat_ngram_size;
  if (n > 0 && len + 1 >= n) {
    /* Ban every token that would complete an n-gram already in seq. */
    for (int start = 0; start + n <= len; start++) {
      if (memcmp(seq + start, seq + len - (n - 1), (size_t)(n - 1) * sizeof *seq) == 0) {
        int32_t t = seq[start + n - 1];
        if (t >= 0 && (size_t)t < V) x[t] = NEG_INF;
      }
    }
  }
  const int32_t *bw = c->bad_words;
  for (size_t b = 0; b < c->n_bad_words; bw += c->bad_words_len[b], b++) {
    size_t bl = c->bad_words_len[b];
    if (bl - 1 > (size_t)len) continue;
    if (bl == 1 || memcmp(seq + len - (int)(bl - 1), bw, (bl - 1) * sizeof *bw) == 0) x[bw[bl - 1]] += NEG_INF;
  }
  if (p->min_length > 0 && len < p->min_length) x[c->eos] = NEG_INF;
  if (p->min_new_tokens > 0 && len - 1 < p->min_new_tokens) x[c->eos] = NEG_INF;
  if (c->forced_eos >= 0 && len == g->max_length - 1) {
    for (size_t i = 0; i < V; i++) x[i] = NEG_INF;
    x[c->forced_eos] = 0.0f;
  }
}

/* Whether process() only sets tokens to -Inf (or every token to -Inf but
 * the forced EOS, which log-softmax makes 0 either way): the repetition
 * penalty is the one processor that scales what it touches. */
static bool masks_only(const tolk_generate_params *p) {
  return !(p->repetition_penalty != 1.0f && p->repetition_penalty > 0);
}

static int cmp_desc(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

/* Temperature, top-k and top-p, as the warpers apply them. */
static void warp(const struct gen *g, float *x) {
  const tolk_generate_params *p = g->p;
  size_t V = g->vocab;
  if (p->temperature > 0 && p->temperature != 1.0f)
    for (size_t i = 0; i < V; i++) x[i] /= p->temperature;
  if (p->top_k > 0 && (size_t)p->top_k < V) {
    memcpy(g->row, x, V * sizeof *x);
    qsort(g->row, V, sizeof *x, cmp_desc);
    float kth = g->row[p->top_k - 1];
    for (size_t i = 0; i < V; i++)
      if (x[i] < kth) x[i] = NEG_INF;
  }
  if (p->top_p > 0 && p->top_p < 1.0f) {
    /* Keep the smallest set of tokens whose probability reaches top_p. */
    memcpy(g->row, x, V * sizeof *x);
    qsort(g->row, V, sizeof *x, cmp_desc);
    double mx = g->row[0], z = 0, acc = 0;
    for (size_t i = 0; i < V; i++) z += exp(g->row[i] - mx);
    float cut = g->row[0];
    for (size_t i = 0; i < V; i++) {
      acc += exp(g->row[i] - mx) / z;
      cut = g->row[i];
      if (acc >= p->top_p) break;
    }
    for (size_t i = 0; i < V; i++)
      if (x[i] < cut) x[i] = NEG_INF;
  }
}

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int32_t sample(const float *x, size_t V, uint64_t *rng) {
  float mx = NEG_INF;
  for (size_t i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
  double z = 0;
  for (size_t i = 0; i < V; i++) z += exp((double)(x[i] - mx));
  double u = (double)(rng_next(rng) >> 11) * 0x1.0p-53 * z;
  for (size_t i = 0; i < V; i++) {
    u -= exp((double)(x[i] - mx));
    if (u < 0) return (int32_t)i;
  }
  for (size_t i = V; i-- > 0;)
    if (x[i] > NEG_INF) return (int32_t)i;
  return 0;
}

/* ---------------------------------------------------------- results */

static tolk_status set_result(tolk_generation *out, const int32_t *seq, size_t n, float score,
                              const float *token_scores, tolk_error *err) {
  out->ids = malloc(n * sizeof *out->ids);
  out->token_scores = malloc((n > 1 ? n - 1 : 1) * sizeof *out->token_scores);
  if (!out->ids || !out->token_scores) {
    free(out->ids);
    free(out->token_scores);
    out->ids = NULL;
    out->token_scores = NULL;
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  }
  memcpy(out->ids, seq, n * sizeof *seq);
  if (token_scores && n > 1) memcpy(out->token_scores, token_scores, (n - 1) * sizeof *token_scores);
  else if (n > 1) memset(out->token_scores, 0, (n - 1) * sizeof *out->token_scores);
  out->n = n;
  out->score = score;
  return TOLK_OK;
}

/* ---------------------------------------------------------- beam search */

/* One sentence's beam search state; sequences are rows of max_length ids. */
struct beams {
  int32_t *run_seq;   /* K rows */
  float *run_score;   /* K */
  float *run_tok;     /* K rows of token scores */
  int32_t *fin_seq;   /* K rows */
  float *fin_score;   /* K */
  float *fin_tok;
  int *fin_len;       /* ids in each finished row */
  bool *fin;          /* is_sent_finished */
  bool unsatisfied;   /* early-stop heuristic not yet met */
  bool settled;       /* result frozen: left the batch */
};

struct cand {
  float score; /* accumulated log-prob */
  int beam;
  int32_t token;
  int index;   /* position in the top-k list */
};

/* Per-step scratch of one beam search, sized by num_beams K. */
struct beam_scratch {
  struct cand *cand;   /* 2K: the step's top candidates */
  struct cand *merged; /* 3K: finished + candidates */
  struct cand *run;    /* 2K */
  bool *hits;          /* 2K */
  float *score;        /* K */
  int *len;            /* K */
  bool *fin;           /* K */
  int32_t *parents;    /* K */
  int32_t *seq;        /* K × max_length */
  float *tok;          /* K × max_length */
};

static int cand_cmp(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? 1 : -1;
  return x->index - y->index;
}

/* len ** length_penalty as Python computes it (double), then used as the
 * float32 divisor torch makes of it. */
static float length_norm(const struct gen *g, int gen_len) {
  return (float)pow((double)gen_len, (double)g->p->length_penalty);
}

/* Offers row b of the accumulated scores to the top-`want` list c[0, *have),
 * best first; equal scores keep the lower index first, as transformers'
 * flattened order does. The row is offered after rows 0..b-1, in index
 * order. */
static void offer(float s, int b, size_t v, size_t V, struct cand *c, int *have, int want) {
  if (*have == want && !(s > c[want - 1].score)) return;
  int pos = *have < want ? (*have)++ : want - 1;
  while (pos > 0 && s > c[pos - 1].score) {
    c[pos] = c[pos - 1];
    pos--;
  }
  c[pos] = (struct cand){s, b, (int32_t)v, b * (int)V + (int)v};
}

/* Offers row b of log-probs plus the beam's running score, ((x - mx) -
 * lse) + add — the bits a log-softmax's output plus add would hold — to the
 * candidates, eight at a time: once the list is full, the vectorised scan
 * passes over the groups whose best does not beat its last (65,001 a row,
 * almost all of them passed over), and nothing is written. */
static void offer_row(const float *x, size_t V, float mx, float lse, float add, int b, struct cand *c,
                      int *have, int want) {
  enum { G = 8 };
  const size_t whole = V / G * G;
  size_t v = 0;
  while (v < whole) {
    if (*have == want) {
      v = (size_t)kern_next_group_above_f32((int64_t)V, x, (int64_t)v, mx, lse, add, c[want - 1].score);
      if (v >= whole) break;
    }
    for (int l = 0; l < G; l++) offer(((x[v + l] - mx) - lse) + add, b, v + (size_t)l, V, c, have, want);
    v += G;
  }
  for (v = whole; v < V; v++) offer(((x[v] - mx) - lse) + add, b, v, V, c, have, want);
}

static void beam_step(struct gen *g, struct beams *bm, float *logits, int K, int len,
                      struct beam_scratch *w) {
  struct cand *cand = w->cand;
  size_t V = g->vocab, L = (size_t)g->max_length;
  const tolk_generate_params *p = g->p;
  const int want = 2 * K;
  int have = 0;
  for (int b = 0; b < K; b++) {
    float *x = logits + (size_t)b * V;
    const int32_t *seq = bm->run_seq + (size_t)b * L;
    float mx = 0.0f, lse = 0.0f;
    if (p->renormalize_logits && masks_only(p)) {
      /* The processors only set tokens to -Inf: renormalising the masked
       * log-probs is the log-softmax of the masked logits, one pass of
       * exps instead of two, and its output is made as it is offered. */
      process(g, seq, len, x);
      lse = kern_log_softmax_terms_f32((int64_t)V, x, &mx);
    } else {
      kern_log_softmax_f32((int64_t)V, x, x);
      process(g, seq, len, x);
      if (p->renormalize_logits) kern_log_softmax_f32((int64_t)V, x, x);
    }
    offer_row(x, V, mx, lse, bm->run_score[b], b, cand, &have, want);
  }
  bool *hits = w->hits;
  for (int j = 0; j < want; j++) hits[j] = cand[j].token == g->cfg->eos || len + 1 >= g->max_length;
  /* Finished candidates first: only the top K may finish. */
  bool all_fin = true;
  for (int k = 0; k < K; k++) all_fin &= bm->fin[k];
  struct cand *merged = w->merged;
  int n_merged = 0;
  for (int k = 0; k < K; k++) merged[n_merged++] = (struct cand){bm->fin_score[k], -1 - k, 0, k};
  for (int j = 0; j < want; j++) {
    float s = cand[j].score / length_norm(g, len);
    if (all_fin && p->early_stopping == 1) s += -kBig;
    if (!bm->unsatisfied) s += -kBig;
    if (!(hits[j] && j < K)) s += -kBig;
    merged[n_merged++] = (struct cand){s, j, 0, K + j};
  }
  qsort(merged, (size_t)n_merged, sizeof *merged, cand_cmp);
  int32_t *new_fin = w->seq;
  float *new_tok = w->tok, *new_score = w->score;
  int *new_len = w->len;
  bool *new_fin_flag = w->fin;
  for (int k = 0; k < K; k++) {
    const struct cand *m = &merged[k];
    new_score[k] = m->score;
    if (m->beam < 0) {
      int from = -1 - m->beam;
      memcpy(new_fin + (size_t)k * L, bm->fin_seq + (size_t)from * L, L * sizeof *new_fin);
      memcpy(new_tok + (size_t)k * L, bm->fin_tok + (size_t)from * L, L * sizeof *new_tok);
      new_len[k] = bm->fin_len[from];
      new_fin_flag[k] = bm->fin[from];
    } else {
      const struct cand *c = &cand[m->beam];
      memcpy(new_fin + (size_t)k * L, bm->run_seq + (size_t)c->beam * L, L * sizeof *new_fin);
      memcpy(new_tok + (size_t)k * L, bm->run_tok + (size_t)c->beam * L, L * sizeof *new_tok);
      new_fin[(size_t)k * L + (size_t)len] = c->token;
      new_tok[(size_t)k * L + (size_t)len - 1] = c->score - bm->run_score[c->beam];
      new_len[k] = len + 1;
      new_fin_flag[k] = hits[m->beam] && m->beam < K;
    }
  }
  memcpy(bm->fin_seq, new_fin, (size_t)K * L * sizeof *new_fin);
  memcpy(bm->fin_tok, new_tok, (size_t)K * L * sizeof *new_tok);
  memcpy(bm->fin_score, new_score, (size_t)K * sizeof *new_score);
  memcpy(bm->fin_len, new_len, (size_t)K * sizeof *new_len);
  memcpy(bm->fin, new_fin_flag, (size_t)K * sizeof *new_fin_flag);
}

/* The running beams for the next step: the best K candidates that did not
 * stop. parents[k] receives the beam each comes from. */
static void next_running(struct gen *g, struct beams *bm, int K, int len, struct beam_scratch *w) {
  size_t L = (size_t)g->max_length;
  int want = 2 * K;
  const struct cand *cand = w->cand;
  struct cand *r = w->run;
  int32_t *parents = w->parents;
  for (int j = 0; j < want; j++) {
    bool hit = cand[j].token == g->cfg->eos || len + 1 >= g->max_length;
    r[j] = cand[j];
    r[j].score = cand[j].score + (hit ? -kBig : 0.0f);
    r[j].index = j;
  }
  qsort(r, (size_t)want, sizeof *r, cand_cmp);
  int32_t *seq = w->seq;
  float *tok = w->tok;
  for (int k = 0; k < K; k++) {
    const struct cand *c = &r[k];
    memcpy(seq + (size_t)k * L, bm->run_seq + (size_t)c->beam * L, L * sizeof *seq);
    memcpy(tok + (size_t)k * L, bm->run_tok + (size_t)c->beam * L, L * sizeof *tok);
    seq[(size_t)k * L + (size_t)len] = c->token;
    tok[(size_t)k * L + (size_t)len - 1] = cand[c->index].score - bm->run_score[c->beam];
    parents[k] = c->beam;
  }
  for (int k = 0; k < K; k++) bm->run_score[k] = r[k].score;
  memcpy(bm->run_seq, seq, (size_t)K * L * sizeof *seq);
  memcpy(bm->run_tok, tok, (size_t)K * L * sizeof *tok);
}

static void update_heuristic(const struct gen *g, struct beams *bm, int K, int cur_len) {
  const tolk_generate_params *p = g->p;
  int best_len = p->early_stopping == 2 && p->length_penalty > 0 ? g->max_length - 1 : cur_len - 1;
  float best = bm->run_score[0] / length_norm(g, best_len);
  float worst = FLT_MAX;
  for (int k = 0; k < K; k++) worst = bm->fin_score[k] < worst ? bm->fin_score[k] : worst;
  bool any = false;
  for (int k = 0; k < K; k++) any |= best > (bm->fin[k] ? worst : -kBig);
  bm->unsatisfied = bm->unsatisfied && any;
}

/* ---------------------------------------------------------- one sentence */

struct mt_search {
  struct gen g;
  tolk_generate_params p; /* g.p points here */
  int K;                  /* rows in the batch: num_beams; 1 for greedy and sampling */
  int len;                /* ids so far, the decoder start included */
  bool done;
  uint64_t rng;           /* sampling: seeded per sentence, so alone == in a batch */
  int32_t *tokens;        /* K: what the rows are fed at the next step */
  int32_t *seq;           /* greedy / sampling: max_length ids */
  float *scores;          /* and the score of each generated one */
  struct beams bm;        /* beam search */
};

/* One thread's step scratch, shared by the sentences it steps, grown to
 * the largest beam and max_length seen. */
struct slot {
  int K, L;
  float *row; /* vocab: the warpers' sorted copy */
  struct beam_scratch w;
};

/* A slot per task of mt_search_step_many, and each stepping search's first
 * row in the step's logits. */
struct mt_scratch {
  size_t vocab;
  int n_slots;
  struct slot *slot;
  size_t *first_row; /* cap_searches */
  size_t cap_searches;
};

tolk_status mt_search_check(const tolk_generate_params *p, int *max_length, tolk_error *err) {
  *max_length = p->max_new_tokens > 0 ? 1 + p->max_new_tokens : p->max_length;
  if (*max_length < 2) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "generate: max_length must allow one new token");
  if (p->num_beams < 1 || p->num_return_sequences < 1 ||
      (p->num_beams > 1 && p->num_return_sequences > p->num_beams) ||
      (p->num_beams == 1 && p->num_return_sequences != 1 && !p->do_sample))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "generate: num_return_sequences (%d) must be at most num_beams (%d)", p->num_return_sequences,
                     p->num_beams);
  if (p->num_beams > 1 && p->do_sample)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "generate: beam sampling is not supported; use num_beams 1 with do_sample");
  return TOLK_OK;
}

static void free_beams(struct beams *b) {
  free(b->run_seq);
  free(b->fin_seq);
  free(b->run_tok);
  free(b->fin_tok);
  free(b->run_score);
  free(b->fin_score);
  free(b->fin_len);
  free(b->fin);
}

/* The state before the first step: K running beams of the decoder start,
 * all but the first out of the race, and K empty finished slots. */
static bool init_beams(struct beams *b, int K, size_t L, int32_t start) {
  b->run_seq = calloc((size_t)K * L, sizeof *b->run_seq);
  b->fin_seq = calloc((size_t)K * L, sizeof *b->fin_seq);
  b->run_tok = calloc((size_t)K * L, sizeof *b->run_tok);
  b->fin_tok = calloc((size_t)K * L, sizeof *b->fin_tok);
  b->run_score = calloc((size_t)K, sizeof *b->run_score);
  b->fin_score = calloc((size_t)K, sizeof *b->fin_score);
  b->fin_len = calloc((size_t)K, sizeof *b->fin_len);
  b->fin = calloc((size_t)K, sizeof *b->fin);
  if (!b->run_seq || !b->fin_seq || !b->run_tok || !b->fin_tok || !b->run_score || !b->fin_score ||
      !b->fin_len || !b->fin)
    return false;
  for (int k = 0; k < K; k++) {
    b->run_seq[(size_t)k * L] = b->fin_seq[(size_t)k * L] = start;
    b->run_score[k] = k ? -kBig : 0.0f;
    b->fin_score[k] = -kBig;
    b->fin_len[k] = 1;
  }
  b->unsatisfied = true;
  return true;
}

tolk_status mt_search_new(const struct mt_config *cfg, const tolk_generate_params *p,
                          struct mt_search **out, tolk_error *err) {
  *out = NULL;
  int max_length;
  tolk_status st = mt_search_check(p, &max_length, err);
  if (st) return st;
  struct mt_search *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  s->p = *p;
  s->g = (struct gen){cfg, &s->p, max_length, (size_t)cfg->vocab_size, NULL};
  s->K = p->num_beams > 1 ? p->num_beams : 1;
  s->len = 1;
  s->rng = p->seed;
  size_t L = (size_t)max_length;
  s->tokens = malloc((size_t)s->K * sizeof *s->tokens);
  bool ok = s->tokens != NULL;
  if (ok && s->K > 1) {
    ok = init_beams(&s->bm, s->K, L, cfg->decoder_start);
  } else if (ok) {
    s->seq = malloc(L * sizeof *s->seq);
    s->scores = malloc(L * sizeof *s->scores);
    ok = s->seq && s->scores;
    if (ok) s->seq[0] = cfg->decoder_start;
  }
  if (!ok) {
    mt_search_free(s);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  }
  for (int k = 0; k < s->K; k++) s->tokens[k] = cfg->decoder_start;
  *out = s;
  return TOLK_OK;
}

void mt_search_free(struct mt_search *s) {
  if (!s) return;
  free_beams(&s->bm);
  free(s->tokens);
  free(s->seq);
  free(s->scores);
  free(s);
}

int mt_search_rows(const struct mt_search *s) { return s->K; }
const int32_t *mt_search_tokens(const struct mt_search *s) { return s->tokens; }
bool mt_search_done(const struct mt_search *s) { return s->done; }
int mt_search_length(const struct mt_search *s) { return s->len; }

static void free_beam_scratch(struct beam_scratch *w) {
  free(w->cand), free(w->merged), free(w->run), free(w->hits), free(w->score);
  free(w->len), free(w->fin), free(w->parents), free(w->seq), free(w->tok);
  memset(w, 0, sizeof *w);
}

struct mt_scratch *mt_scratch_new(size_t vocab, int slots) {
  struct mt_scratch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->vocab = vocab;
  w->n_slots = slots > 1 ? slots : 1;
  w->slot = calloc((size_t)w->n_slots, sizeof *w->slot);
  bool ok = w->slot != NULL;
  for (int i = 0; ok && i < w->n_slots; i++) ok = (w->slot[i].row = malloc(vocab * sizeof(float))) != NULL;
  if (!ok) {
    mt_scratch_free(w);
    return NULL;
  }
  return w;
}

void mt_scratch_free(struct mt_scratch *w) {
  if (!w) return;
  for (int i = 0; w->slot && i < w->n_slots; i++) {
    free(w->slot[i].row);
    free_beam_scratch(&w->slot[i].w);
  }
  free(w->slot);
  free(w->first_row);
  free(w);
}

/* Makes room in a slot for a beam of K over sequences of L ids. */
static bool slot_reserve(struct slot *sc, int K, int L) {
  if (K <= sc->K && L <= sc->L) return true;
  int nk = K > sc->K ? K : sc->K, nl = L > sc->L ? L : sc->L;
  free_beam_scratch(&sc->w);
  struct beam_scratch *w = &sc->w;
  *w = (struct beam_scratch){
      malloc((size_t)2 * nk * sizeof *w->cand), malloc((size_t)3 * nk * sizeof *w->merged),
      malloc((size_t)2 * nk * sizeof *w->run),  malloc((size_t)2 * nk * sizeof *w->hits),
      malloc((size_t)nk * sizeof *w->score),    malloc((size_t)nk * sizeof *w->len),
      malloc((size_t)nk * sizeof *w->fin),      malloc((size_t)nk * sizeof *w->parents),
      malloc((size_t)nk * nl * sizeof *w->seq), malloc((size_t)nk * nl * sizeof *w->tok)};
  bool ok = w->cand && w->merged && w->run && w->hits && w->score && w->len && w->fin &&
            w->parents && w->seq && w->tok;
  sc->K = ok ? nk : 0;
  sc->L = ok ? nl : 0;
  return ok;
}

/* A renormalised greedy step without scores takes the largest processed
 * logit when nothing before it lies within RENORM_MARGIN below it. The
 * log-softmax makes y = (x - max) - lse with 0 ≤ lse ≤ log V; an element d
 * = x - max below the largest (exact that close: Sterbenz) rounds to a tie
 * with -lse only if |d| ≤ ulp(lse) / 2, which for lse < 16 (V below ~8.8
 * million) is at most 2^-21. The margin is twice that; test_kern_vmath
 * finds rows that do tie and checks each is caught. */
#define RENORM_MARGIN 0x1p-20f
#define RENORM_MARGIN_VOCAB ((size_t)8000000)

/* Greedy or sampling: the next token of the one row; finished at EOS or
 * the length limit. Without output_scores a greedy step may leave its
 * token score 0 (above). */
static void greedy_step(struct mt_search *s, struct slot *sc, float *x) {
  struct gen *g = &s->g;
  size_t V = g->vocab;
  g->row = sc->row;
  process(g, s->seq, s->len, x);
  if (s->p.do_sample) warp(g, x);
  int32_t t = -1;
  if (s->p.renormalize_logits && !s->p.do_sample && !s->p.output_scores && V < RENORM_MARGIN_VOCAB) {
    /* The log-softmax subtracts one constant from the row, so its largest
     * is the row's — unless rounding lifts an earlier element that close
     * below to a tie, which the margin rules out; only then are the exps
     * worth taking. */
    int clear;
    int64_t i = kern_argmax_near_f32((int64_t)V, x, RENORM_MARGIN, &clear);
    if (clear) t = (int32_t)i;
  }
  float score = 0.0f;
  if (t < 0) {
    if (s->p.renormalize_logits) kern_log_softmax_f32((int64_t)V, x, x);
    t = s->p.do_sample ? sample(x, V, &s->rng) : (int32_t)kern_argmax_f32((int64_t)V, x);
    score = x[t];
  }
  s->seq[s->len] = t;
  s->scores[s->len - 1] = score;
  s->tokens[0] = t;
  s->len++;
  s->done = t == g->cfg->eos || s->len >= g->max_length;
}

/* Beam search: transformers' step for one sentence. Finished when the
 * result can no longer change — settled by the early-stopping heuristic,
 * or every candidate hit EOS or the length limit. */
static void beam_step_all(struct mt_search *s, struct slot *sc, float *logits,
                          int32_t *parents) {
  struct gen *g = &s->g;
  int K = s->K;
  size_t L = (size_t)g->max_length;
  g->row = sc->row;
  beam_step(g, &s->bm, logits, K, s->len, &sc->w);
  bool all_hit = true;
  for (int j = 0; j < 2 * K; j++) all_hit &= sc->w.hits[j];
  next_running(g, &s->bm, K, s->len, &sc->w);
  update_heuristic(g, &s->bm, K, s->len + 1);
  bool all_fin = true;
  for (int k = 0; k < K; k++) all_fin &= s->bm.fin[k];
  s->bm.settled = !s->bm.unsatisfied || (all_fin && s->p.early_stopping == 1);
  for (int k = 0; k < K; k++) {
    parents[k] = sc->w.parents[k];
    s->tokens[k] = s->bm.run_seq[(size_t)k * L + (size_t)s->len];
  }
  s->len++;
  s->done = s->bm.settled || all_hit;
}

/* One task of mt_search_step_many: searches [i0, i1) on one slot. */
struct step_job {
  struct mt_search *const *s;
  size_t n;
  struct mt_scratch *sc;
  int tasks;
  float *logits;
  int32_t *parents;
};

static void step_tasks(void *arg, int64_t t0, int64_t t1) {
  const struct step_job *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    struct slot *slot = &j->sc->slot[t];
    size_t i1 = j->n * (size_t)(t + 1) / (size_t)j->tasks;
    for (size_t i = j->n * (size_t)t / (size_t)j->tasks; i < i1; i++) {
      struct mt_search *s = j->s[i];
      size_t row = j->sc->first_row[i];
      float *logits = j->logits + row * j->sc->vocab;
      if (s->K > 1) {
        beam_step_all(s, slot, logits, j->parents + row);
      } else {
        greedy_step(s, slot, logits);
        j->parents[row] = 0;
      }
    }
  }
}

tolk_status mt_search_step_many(struct mt_search *const *s, size_t n, struct mt_scratch *sc,
                                float *logits, int32_t *parents, struct tolk_pool *pool,
                                tolk_error *err) {
  if (n > sc->cap_searches) {
    size_t *f = realloc(sc->first_row, n * sizeof *f);
    if (!f) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
    sc->first_row = f;
    sc->cap_searches = n;
  }
  int K = 1, L = 1;
  size_t row = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i]->done) return tolk_fail(err, TOLK_ERR_INTERNAL, "generate: step after the sentence finished");
    K = s[i]->K > K ? s[i]->K : K;
    L = s[i]->g.max_length > L ? s[i]->g.max_length : L;
    sc->first_row[i] = row;
    row += (size_t)mt_search_rows(s[i]);
  }
  /* Contiguous runs of searches, one per slot: a search's step depends on
   * nothing but its own rows, so how they are shared out changes no token. */
  int tasks = n < (size_t)sc->n_slots ? (int)n : sc->n_slots;
  for (int t = 0; t < tasks; t++)
    if (!slot_reserve(&sc->slot[t], K, L))
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  struct step_job job = {s, n, sc, tasks, logits, parents};
  tolk_pool_for(pool, tasks, 1, step_tasks, &job);
  return TOLK_OK;
}

float *mt_logits_spread(const float *logits, const int32_t *from, size_t rows, size_t vocab) {
  float *wide = malloc(rows * vocab * sizeof *wide);
  for (size_t r = 0; wide && r < rows; r++)
    memcpy(wide + r * vocab, logits + (size_t)from[r] * vocab, vocab * sizeof *wide);
  return wide;
}

tolk_status mt_search_result(const struct mt_search *s, tolk_generation *out, tolk_error *err) {
  size_t L = (size_t)s->g.max_length;
  if (s->K == 1) {
    float total = 0;
    for (int k = 0; k < s->len - 1; k++) total += s->scores[k];
    return set_result(out, s->seq, (size_t)s->len, total, s->scores, err);
  }
  tolk_status st = TOLK_OK;
  for (int k = 0; k < s->p.num_return_sequences && !st; k++)
    st = set_result(&out[k], s->bm.fin_seq + (size_t)k * L, (size_t)s->bm.fin_len[k], s->bm.fin_score[k],
                    s->bm.fin_tok + (size_t)k * L, err);
  if (st) tolk_generation_free(out, (size_t)s->p.num_return_sequences);
  return st;
}
