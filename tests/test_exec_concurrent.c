/*
 * test_exec_concurrent.c — concurrent runs on one session with real kernels:
 * four threads share one session of marian-tiny's merged decoder (an If whose
 * branches read outer-scope values) and its encoder, each running the golden
 * data sets in a different order, with a two-thread intra-op pool that the
 * runs contend for. Every output must match ONNX Runtime's golden within
 * 1e-5, as in a single-threaded run.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx.h"
#include "testutil.h"

enum { MAX_IO = 64, MAX_SETS = 4 };

struct dataset {
  size_t n_in, n_out;
  const char *in_names[MAX_IO], *out_names[MAX_IO];
  tolk_tensor *in[MAX_IO];
  struct ir_tensor *want[MAX_IO];
};

struct graph {
  tolk_session *s;
  struct dataset sets[MAX_SETS];
  int n_sets;
};

static struct tolk_arena arena;

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static bool load_graph(const char *fix, const char *name, struct graph *g) {
  char path[1024];
  snprintf(path, sizeof path, "%s/marian-tiny/%s.onnx", fix, name);
  if (!exists(path)) return false;
  tolk_error err = {0};
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  CHECK_MSG(tolk_session_create_from_file(path, p, &g->s, &err) == TOLK_OK, "%s", err.message);
  if (!g->s) return false;
  for (g->n_sets = 0; g->n_sets < MAX_SETS; g->n_sets++) {
    struct dataset *d = &g->sets[g->n_sets];
    snprintf(path, sizeof path, "%s/golden/marian-tiny/%s/test_data_set_%d/input_0.pb", fix, name,
             g->n_sets);
    if (!exists(path)) break;
    for (int io = 0; io < 2; io++)
      for (size_t k = 0; k < MAX_IO; k++) {
        snprintf(path, sizeof path, "%s/golden/marian-tiny/%s/test_data_set_%d/%s_%zu.pb", fix,
                 name, g->n_sets, io ? "output" : "input", k);
        if (!exists(path)) break;
        struct ir_tensor *t = NULL;
        CHECK_MSG(onnx_tensor_load_file(path, &arena, &t, &err) == TOLK_OK, "%s", err.message);
        if (!t) return false;
        if (io) {
          d->want[d->n_out] = t;
          d->out_names[d->n_out++] = t->name;
        } else {
          tolk_tensor_wrap((tolk_dtype)t->dtype, t->rank, t->dims, (void *)(uintptr_t)t->data,
                           t->nbytes, &d->in[d->n_in], NULL);
          d->in_names[d->n_in++] = t->name;
        }
      }
  }
  return g->n_sets > 0;
}

static struct graph graphs[2];

struct worker {
  int id, failures, runs;
};

static int run_set(struct graph *g, struct dataset *d) {
  tolk_tensor *out[MAX_IO] = {NULL};
  tolk_error err = {0};
  int bad = 0;
  if (tolk_session_run(g->s, d->n_in, d->in_names, (const tolk_tensor *const *)d->in, d->n_out,
                       d->out_names, out, NULL, &err) != TOLK_OK) {
    fprintf(stderr, "run failed: %s\n", err.message);
    return 1;
  }
  for (size_t i = 0; i < d->n_out; i++) {
    const struct ir_tensor *w = d->want[i];
    if (tolk_tensor_numel(out[i]) != w->numel || (int32_t)tolk_tensor_dtype(out[i]) != w->dtype) {
      bad++;
    } else if (w->dtype == TOLK_FLOAT) {
      const float *a = tolk_tensor_data(out[i]), *b = w->data;
      for (int64_t e = 0; e < w->numel; e++)
        if (fabsf(a[e] - b[e]) > 1e-5f) {
          bad++;
          break;
        }
    }
    tolk_tensor_free(out[i]);
  }
  return bad;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  for (int rep = 0; rep < 25; rep++)
    for (int gi = 0; gi < 2; gi++) {
      struct graph *g = &graphs[(gi + w->id) % 2];
      int k = (rep + w->id) % g->n_sets;
      w->failures += run_set(g, &g->sets[k]);
      w->runs++;
    }
  return NULL;
}

int main(void) {
  const char *fix = tu_fixtures();
  tolk_arena_init(&arena, 0);
  if (!load_graph(fix, "decoder_model_merged", &graphs[0]) ||
      !load_graph(fix, "encoder_model", &graphs[1])) {
    printf("test_exec_concurrent: fixtures missing, nothing to do\n");
    tolk_arena_release(&arena);
    return tu_finish("test_exec_concurrent");
  }
  /* Single-threaded first: the reference behaviour. */
  for (int gi = 0; gi < 2; gi++)
    for (int k = 0; k < graphs[gi].n_sets; k++)
      CHECK_MSG(run_set(&graphs[gi], &graphs[gi].sets[k]) == 0, "graph %d set %d", gi, k);
  enum { N = 4 };
  pthread_t th[N];
  struct worker w[N];
  for (int i = 0; i < N; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    pthread_create(&th[i], NULL, worker_main, &w[i]);
  }
  int fails = 0, runs = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    fails += w[i].failures;
    runs += w[i].runs;
  }
  CHECK_MSG(fails == 0, "%d mismatches in %d concurrent runs", fails, runs);
  printf("%d concurrent runs on 2 sessions from %d threads\n", runs, N);
  for (int gi = 0; gi < 2; gi++) {
    for (int k = 0; k < graphs[gi].n_sets; k++)
      for (size_t i = 0; i < graphs[gi].sets[k].n_in; i++) tolk_tensor_free(graphs[gi].sets[k].in[i]);
    tolk_session_free(graphs[gi].s);
  }
  tolk_arena_release(&arena);
  return tu_finish("test_exec_concurrent");
}
