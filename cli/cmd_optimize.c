/*
 * cmd_optimize.c — `tolk optimize IN.onnx OUT.onnx [--level L] [--report]`:
 * the graph rewrites ONNX Runtime's offline optimizer makes
 * (optimized_model_filepath), saved (tolk_model_optimize in tolk.h).
 * --report lists each pass with the node counts before and after it, times
 * the graph each pass that rewrote something left (tolk_model_optimize_each
 * lends it), then the original and the optimized file: the median of --runs
 * runs each after an untimed one, sessions with tolk's default options, on the inputs of
 * --inputs DIR (input_0.pb, input_1.pb, … in input order, as ONNX's test
 * data sets and tests/fixtures/golden hold them) or on zeros with every
 * symbolic dimension 1.
 * Exit status: 0 done, 2 bad usage or a model that could not be optimized
 * (no output left behind).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

enum { OPT_LEVEL, OPT_REPORT, OPT_INPUTS, OPT_RUNS };

static const struct cli_option options[] = {
    [OPT_LEVEL] = {"level", 0, "LEVEL", "basic, extended or all (default)"},
    [OPT_REPORT] = {"report", 0, NULL, "list each pass with node counts, time the graph after each one"},
    [OPT_INPUTS] = {"inputs", 0, "DIR", "--report times on DIR/input_N.pb (default: zeros, symbolic dims 1)"},
    [OPT_RUNS] = {"runs", 0, "N", "--report times the median of N runs of each graph (default 20)"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "optimize", "[options] IN.onnx OUT.onnx",
    "Saves the graph as tolk optimizes it, as ONNX Runtime's optimized_model_filepath\n"
    "does, If/Loop/Scan bodies included. basic: constant folding with tolk's kernels,\n"
    "static Shape chains, common subexpressions, 2-D MatMul + Add into Gemm and\n"
    "dead nodes; extended: + fusions into com.microsoft QuickGelu, Gelu/BiasGelu,\n"
    "FastGelu (GELU's tanh form) and FusedMatMul, written-out LayerNormalization\n"
    "(opset 17+), residual Add + LayerNormalization into SkipLayerNormalization,\n"
    "and quantize_dynamic's MatMulInteger -> Cast -> Mul [-> Add] into\n"
    "MatMulIntegerToFloat;\n"
    "all: + attention (self, cross, with a past) into MultiHeadAttention, the Q/K/V\n"
    "projection biases as its bias input, the decoders' present key/value outputs\n"
    "as its present_key/present_value.\n"
    "The output is checked, written to a temporary file and renamed: complete or\n"
    "absent. tolk run --opt LEVEL applies the same rewrites at session creation.",
    options, "exit status: 0 done, 2 bad usage or a model that could not be optimized", false};

struct o_opts {
  tolk_opt_level level;
  bool report;
  const char *inputs;
  long runs;
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Input i of s: DIR/input_i.pb, or zeros of its declared type with every
 * unknown dimension 1. */
static tolk_status make_input(const tolk_session *s, size_t i, const char *dir, tolk_tensor **out,
                              tolk_error *err) {
  if (dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
    return tolk_tensor_load_pb(path, out, err);
  }
  const tolk_value_info *v = tolk_session_input(s, i);
  int64_t dims[TOLK_MAX_RANK];
  int rank = v->rank < 0 ? 0 : v->rank;
  for (int d = 0; d < rank; d++) dims[d] = v->dims[d] >= 0 ? v->dims[d] : 1;
  return tolk_tensor_create(v->dtype, rank, dims, NULL, 0, out, err);
}

/* The median run time of s, in ms; negative on failure. */
static double median_ms(tolk_session *s, const struct o_opts *o, tolk_error *err) {
  double med = -1.0;
  size_t n_in = tolk_session_input_count(s), n_out = tolk_session_output_count(s);
  const char **names = calloc(n_in + n_out + 1, sizeof *names);
  tolk_tensor **in = calloc(n_in + 1, sizeof *in), **out = calloc(n_out + 1, sizeof *out);
  double *t = calloc((size_t)o->runs, sizeof *t);
  bool ok = names && in && out && t;
  if (!ok) snprintf(err->message, sizeof err->message, "out of memory");
  for (size_t i = 0; ok && i < n_in; i++) {
    names[i] = tolk_session_input(s, i)->name;
    ok = !make_input(s, i, o->inputs, &in[i], err);
  }
  /* Run -1 is not timed: the first run lays out the memory plan. */
  for (long r = -1; ok && r < o->runs; r++) {
    double t0 = now_ms();
    ok = !tolk_session_run(s, n_in, names, (const tolk_tensor *const *)in, n_out, NULL, out, NULL, err);
    if (r >= 0) t[r] = now_ms() - t0;
    for (size_t i = 0; i < n_out; i++) {
      tolk_tensor_free(out[i]);
      out[i] = NULL;
    }
  }
  if (ok) {
    qsort(t, (size_t)o->runs, sizeof *t, cmp_double);
    med = t[o->runs / 2];
  }
  for (size_t i = 0; in && i < n_in; i++) tolk_tensor_free(in[i]);
  free(names);
  free(in);
  free(out);
  free(t);
  return med;
}

/* The median run time of the model at path (negative on failure), in a
 * session with tolk's default options. */
static double file_ms(const char *path, const struct o_opts *o, tolk_error *err) {
  tolk_session *s = NULL;
  if (tolk_session_create_from_file(path, tolk_session_default_params(), &s, err)) return -1.0;
  double ms = median_ms(s, o, err);
  tolk_session_free(s);
  return ms;
}

/* The optimized file is written by now: a graph tolk cannot run (a node
 * without a kernel, inputs that do not fit) is said, not an error. */
static int time_both(const char *in, const char *out, const struct o_opts *o) {
  tolk_error err;
  double a = file_ms(in, o, &err), b = a < 0 ? -1.0 : file_ms(out, o, &err);
  if (a < 0 || b < 0) {
    printf("  run time in tolk: not measured: %s\n", err.message);
    return 0;
  }
  printf("  run time in tolk (median of %ld runs): original %.3f ms, optimized %.3f ms (%.2fx)\n", o->runs, a,
         b, b > 0 ? a / b : 0.0);
  return 0;
}

/* What --report keeps between passes: the run time after the last pass
 * that rewrote something (negative once a run failed: no more timing). */
struct timing {
  const struct o_opts *o;
  double last_ms;
};

static void time_pass(struct timing *t, const tolk_optimize_pass *p) {
  tolk_session *s = NULL;
  tolk_error err;
  double ms = -1.0;
  if (!tolk_session_create(p->model, tolk_session_default_params(), &s, &err)) ms = median_ms(s, t->o, &err);
  tolk_session_free(s);
  if (ms < 0) {
    printf("    run time after it: not measured: %s\n", err.message);
  } else {
    printf("    run time after it: %.3f -> %.3f ms (%+.1f %%)\n", t->last_ms, ms,
           t->last_ms > 0 ? (ms / t->last_ms - 1.0) * 100.0 : 0.0);
  }
  t->last_ms = ms;
}

/* Each pass as a line; with a timing, the graph it left is timed when it
 * rewrote something. */
static void report_pass(void *user, const tolk_optimize_pass *p) {
  struct timing *t = user;
  if (p->skipped) {
    printf("  %s: skipped, %s\n", p->name, p->skipped);
    return;
  }
  printf("  %s: %zu -> %zu nodes (%zu rewrite%s)\n", p->name, p->nodes_before, p->nodes_after, p->rewrites,
         p->rewrites == 1 ? "" : "s");
  if (t->last_ms >= 0 && p->rewrites > 0) time_pass(t, p);
}

static int optimize(const char *in, const char *out, const struct o_opts *o) {
  tolk_optimize_summary s;
  tolk_error err;
  printf("%s -> %s\n", in, out);
  struct timing t = {o, -1.0};
  if (o->report) {
    t.last_ms = file_ms(in, o, &err);
    if (t.last_ms < 0) printf("  run time in tolk: not measured: %s\n", err.message);
  }
  if (tolk_model_optimize_each(in, out, o->level, o->report ? report_pass : NULL, &t, &s, &err))
    return cli_fail("optimize", &err);
  printf("  %zu -> %zu nodes, %zu rewrites; %.2f MB -> %.2f MB\n", s.nodes_before, s.nodes_after, s.rewrites,
         (double)s.bytes_before / 1e6, (double)s.bytes_after / 1e6);
  return o->report ? time_both(in, out, o) : 0;
}

static int parse_level(const struct cli_args *a, struct o_opts *o) {
  static const struct { const char *name; tolk_opt_level level; } levels[] = {
      {"basic", TOLK_OPT_BASIC}, {"extended", TOLK_OPT_EXTENDED}, {"all", TOLK_OPT_ALL}};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
    if (!strcmp(a->value, levels[i].name)) {
      o->level = levels[i].level;
      return 0;
    }
  return cli_bad_value(a, "basic, extended or all");
}

int cmd_optimize(int argc, char **argv) {
  struct o_opts o = {TOLK_OPT_ALL, false, NULL, 20};
  struct cli_args a;
  int rc = -1;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; rc < 0 && (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: rc = a.status; break;
    case OPT_LEVEL: if (parse_level(&a, &o)) rc = 2; break;
    case OPT_REPORT: o.report = true; break;
    case OPT_INPUTS: o.inputs = a.value; break;
    case OPT_RUNS: if (!cli_value_long(&a, 1, 100000, &o.runs)) rc = 2; break;
    }
  }
  if (rc < 0 && argc - a.first != 2)
    rc = cli_usage_error(&verb, argc - a.first < 2 ? "needs IN and OUT" : "unexpected argument '%s'",
                         argv[a.first + 2]);
  if (rc < 0) rc = optimize(argv[a.first], argv[a.first + 1], &o);
  return rc;
}
