/*
 * cmd_run.c — `tolk run`: runs a model on inputs from .npy or ONNX
 * TensorProto (.pb) files, prints each output's name, dtype and shape,
 * optionally saves them, compares them with expected files (the "compare
 * with the reference" step of an export), and times repeated runs.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"

struct named {
  const char *name; /* NULL: by position */
  const char *file;
};

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Loads a tensor from .npy or .pb (chosen by the magic bytes). A file that
 * cannot be opened goes to the .pb reader, whose error names it. */
static tolk_status load_tensor(const char *path, tolk_tensor **out, tolk_error *err) {
  unsigned char magic[6] = {0};
  size_t got = 0;
  FILE *f = fopen(path, "rb");
  if (f) {
    got = fread(magic, 1, sizeof magic, f);
    fclose(f);
  }
  if ((got == 6 && !memcmp(magic, "\x93NUMPY", 6)) || ends_with(path, ".npy"))
    return npy_read(path, out, err);
  return tolk_tensor_load_pb(path, out, err);
}

static const char *shape_text(const tolk_tensor *t, char *buf, size_t size) {
  size_t n = 0;
  int w = snprintf(buf, size, "[");
  if (w > 0) n = (size_t)w;
  for (int i = 0; i < tolk_tensor_rank(t) && n < size; i++) {
    w = snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)tolk_tensor_dims(t)[i]);
    if (w > 0) n += (size_t)w;
  }
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

static double half_to_double(uint16_t h) {
  uint32_t sign = h >> 15, e = (h >> 10) & 31, man = h & 1023;
  double v = e == 0 ? ldexp((double)man, -24)
             : e == 31 ? (man ? NAN : INFINITY)
                       : ldexp((double)(man | 1024), (int)e - 25);
  return sign ? -v : v;
}

static double value_at(const tolk_tensor *t, int64_t i) {
  const void *d = tolk_tensor_data(t);
  switch (tolk_tensor_dtype(t)) {
  case TOLK_FLOAT: return ((const float *)d)[i];
  case TOLK_DOUBLE: return ((const double *)d)[i];
  case TOLK_FLOAT16: return half_to_double(((const uint16_t *)d)[i]);
  case TOLK_BFLOAT16: {
    uint32_t u = (uint32_t)((const uint16_t *)d)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  case TOLK_INT8: return ((const int8_t *)d)[i];
  case TOLK_UINT8:
  case TOLK_BOOL: return ((const uint8_t *)d)[i];
  case TOLK_INT16: return ((const int16_t *)d)[i];
  case TOLK_UINT16: return ((const uint16_t *)d)[i];
  case TOLK_INT32: return ((const int32_t *)d)[i];
  case TOLK_UINT32: return ((const uint32_t *)d)[i];
  case TOLK_INT64: return (double)((const int64_t *)d)[i];
  case TOLK_UINT64: return (double)((const uint64_t *)d)[i];
  default: return NAN;
  }
}

static bool is_float_type(tolk_dtype dt) {
  return dt == TOLK_FLOAT || dt == TOLK_DOUBLE || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16;
}

/* Prints the comparison line; returns true on PASS. */
static bool compare(const char *name, const tolk_tensor *got, const tolk_tensor *want,
                    double atol, double rtol) {
  char a[256], b[256];
  if (tolk_tensor_dtype(got) != tolk_tensor_dtype(want) ||
      tolk_tensor_rank(got) != tolk_tensor_rank(want) ||
      memcmp(tolk_tensor_dims(got), tolk_tensor_dims(want),
             (size_t)tolk_tensor_rank(got) * sizeof(int64_t))) {
    printf("expect %s: FAIL: got %s %s, expected %s %s\n", name,
           tolk_dtype_name(tolk_tensor_dtype(got)), shape_text(got, a, sizeof a),
           tolk_dtype_name(tolk_tensor_dtype(want)), shape_text(want, b, sizeof b));
    return false;
  }
  bool fl = is_float_type(tolk_tensor_dtype(got));
  int64_t n = tolk_tensor_numel(got), bad = 0, worst = -1;
  double max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = value_at(got, i), y = value_at(want, i);
    if (isnan(x) && isnan(y)) continue;
    if (isinf(y) && x == y) continue;
    double d = fabs(x - y);
    if (isnan(d)) d = INFINITY;
    double rel = y != 0 ? d / fabs(y) : (d ? INFINITY : 0);
    bool ok = fl ? d <= atol + rtol * fabs(y) : x == y;
    if (!ok) bad++;
    if (d > max_abs || worst < 0) {
      if (d > max_abs) max_abs = d;
      if (d > 0 || worst < 0) worst = i;
    }
    if (rel > max_rel) max_rel = rel;
  }
  if (bad)
    printf("expect %s: FAIL: max abs error %.3g, max rel error %.3g; %lld of %lld elements "
           "outside atol %g + rtol %g (worst at %lld: %.9g vs %.9g)\n",
           name, max_abs, max_rel, (long long)bad, (long long)n, atol, rtol, (long long)worst,
           value_at(got, worst), value_at(want, worst));
  else
    printf("expect %s: PASS: max abs error %.3g, max rel error %.3g (%lld elements)\n", name,
           max_abs, max_rel, (long long)n);
  return bad == 0;
}

/* Resident set size now, in MB (0 where /proc is missing). */
static double rss_mb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
  fclose(f);
  return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void file_name(const char *name, char *out, size_t size) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++)
    out[i] = isalnum((unsigned char)name[i]) || name[i] == '.' || name[i] == '-' ? name[i] : '_';
  out[i] = '\0';
}

static bool parse_named(const char *arg, struct named *out) {
  const char *eq = strchr(arg, '=');
  if (!eq) {
    out->name = NULL;
    out->file = arg;
    return true;
  }
  if (eq == arg || !eq[1]) return false;
  char *name = malloc((size_t)(eq - arg) + 1);
  if (!name) return false;
  memcpy(name, arg, (size_t)(eq - arg));
  name[eq - arg] = '\0';
  out->name = name;
  out->file = eq + 1;
  return true;
}

/* ------------------------------------------------------------ options */

enum { OPT_INPUT, OPT_OUTPUT_DIR, OPT_EXPECT, OPT_ATOL, OPT_RTOL, OPT_REPEAT, OPT_STATS, OPT_THREADS, OPT_OPT };

static const struct cli_option options[] = {
    [OPT_INPUT] = {"input", 0, "NAME=FILE", "an input from FILE; FILE alone fills the next input in order"},
    [OPT_OUTPUT_DIR] = {"output-dir", 0, "DIR", "write each output to DIR/NAME.npy"},
    [OPT_EXPECT] = {"expect", 0, "NAME=FILE",
                    "compare output NAME with FILE: max abs and rel error, PASS or\n"
                    "FAIL (exit status 1 when any comparison fails)"},
    [OPT_ATOL] = {"atol", 0, "A",
                  "an element passes when |got - want| <= A + R * |want|\n"
                  "(default 1e-5; integers must match exactly)"},
    [OPT_RTOL] = {"rtol", 0, "R", "R in the --atol rule (default 0)"},
    [OPT_REPEAT] = {"repeat", 0, "N", "run N more times and print the median time per run"},
    [OPT_STATS] = {"stats", 0, NULL, "print memory figures (peak intermediates, arena, RSS)"},
    [OPT_THREADS] = {"threads", 0, "N", "intra-op threads (default: all cores)"},
    [OPT_OPT] = {"opt", 0, "LEVEL", "optimisation level: none, basic (default), extended or all\n(the fusions of tolk optimize)"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "run", "MODEL.onnx [--input NAME=FILE]... [options]",
    "Runs the model once on the given inputs and prints each output's name, dtype and\n"
    "shape. FILE is a .npy file or an ONNX TensorProto (.pb, as in the ONNX test data).",
    options, NULL, false};

struct run_opts {
  const char *model, *out_dir;
  struct named *ins, *exps; /* argc entries each: at most one per argument */
  int n_ins, n_exps, repeat;
  bool stats;
  double atol, rtol;
  tolk_session_params sp;
};

static void run_opts_free(struct run_opts *o) {
  for (int i = 0; o->ins && i < o->n_ins; i++) free((char *)o->ins[i].name);
  for (int i = 0; o->exps && i < o->n_exps; i++) free((char *)o->exps[i].name);
  free(o->ins);
  free(o->exps);
}

/* Sets o from one option; false after a usage error. */
static bool run_option(const struct cli_args *a, int opt, struct run_opts *o) {
  long n;
  double x;
  switch (opt) {
  case OPT_INPUT:
    if (parse_named(a->value, &o->ins[o->n_ins++])) return true;
    cli_bad_value(a, "NAME=FILE or FILE");
    return false;
  case OPT_EXPECT:
    if (parse_named(a->value, &o->exps[o->n_exps++]) && o->exps[o->n_exps - 1].name) return true;
    cli_bad_value(a, "NAME=FILE");
    return false;
  case OPT_OUTPUT_DIR: o->out_dir = a->value; return true;
  case OPT_ATOL:
  case OPT_RTOL:
    if (!cli_value_double(a, &x)) return false;
    if (x < 0) {
      cli_bad_value(a, "a non-negative number");
      return false;
    }
    *(opt == OPT_ATOL ? &o->atol : &o->rtol) = x;
    return true;
  case OPT_REPEAT:
  case OPT_THREADS:
    if (!cli_value_long(a, 0, 1000000, &n)) return false;
    *(opt == OPT_REPEAT ? &o->repeat : &o->sp.threads) = (int)n;
    return true;
  case OPT_STATS: o->stats = true; return true;
  case OPT_OPT:
    if (!strcmp(a->value, "none")) o->sp.opt_level = TOLK_OPT_NONE;
    else if (!strcmp(a->value, "basic")) o->sp.opt_level = TOLK_OPT_BASIC;
    else if (!strcmp(a->value, "extended")) o->sp.opt_level = TOLK_OPT_EXTENDED;
    else if (!strcmp(a->value, "all")) o->sp.opt_level = TOLK_OPT_ALL;
    else {
      cli_bad_value(a, "none, basic, extended or all");
      return false;
    }
    return true;
  }
  return true;
}

/* Parses argv into o; returns -1 to go on, or the verb's exit status. */
static int parse_run(int argc, char **argv, struct run_opts *o) {
  o->ins = calloc((size_t)argc, sizeof *o->ins);
  o->exps = calloc((size_t)argc, sizeof *o->exps);
  o->atol = 1e-5;
  o->sp = tolk_session_default_params();
  if (!o->ins || !o->exps) return 2;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    if (opt == CLI_EXIT) return a.status;
    if (!run_option(&a, opt, o)) return 2;
  }
  if (a.first == argc) return cli_usage_error(&verb, "no model given");
  if (a.first + 1 < argc) return cli_usage_error(&verb, "unexpected argument '%s'", argv[a.first + 1]);
  o->model = argv[a.first];
  return -1;
}

/* ------------------------------------------------------------ running */

/* A session with its inputs bound and its outputs of the last run. */
struct run {
  tolk_session *s;
  const char **in_names;
  tolk_tensor **in_t, **outs;
  size_t n_in, n_out;
  tolk_run_stats stats;
  tolk_error err;
};

static void run_free(struct run *r) {
  for (size_t i = 0; r->in_t && i < r->n_in; i++) tolk_tensor_free(r->in_t[i]);
  for (size_t i = 0; r->outs && i < r->n_out; i++) tolk_tensor_free(r->outs[i]);
  free(r->in_t);
  free(r->in_names);
  free(r->outs);
  tolk_session_free(r->s);
}

/* The model input an unnamed --input FILE fills: the next one, from *next
 * on, that no --input names. NULL when none is left. */
static const char *next_unnamed(const struct run *r, const struct run_opts *o, size_t *next) {
  size_t n = tolk_session_input_count(r->s);
  for (; *next < n; ++*next) {
    const char *cand = tolk_session_input(r->s, *next)->name;
    bool taken = false;
    for (int j = 0; j < o->n_ins; j++) taken |= o->ins[j].name && !strcmp(o->ins[j].name, cand);
    if (!taken) return tolk_session_input(r->s, (*next)++)->name;
  }
  return NULL;
}

/* Loads every --input; returns 0 or the exit status. */
static int bind_inputs(struct run *r, const struct run_opts *o) {
  r->in_t = calloc((size_t)o->n_ins + 1, sizeof *r->in_t);
  r->in_names = calloc((size_t)o->n_ins + 1, sizeof *r->in_names);
  if (!r->in_t || !r->in_names) return 2;
  size_t next = 0;
  for (int i = 0; i < o->n_ins; i++) {
    const char *nm = o->ins[i].name ? o->ins[i].name : next_unnamed(r, o, &next);
    if (!nm) {
      fprintf(stderr, "tolk run: more inputs given than the model has (%zu)\n", tolk_session_input_count(r->s));
      return 2;
    }
    r->in_names[i] = nm;
    if (load_tensor(o->ins[i].file, &r->in_t[i], &r->err)) {
      fprintf(stderr, "tolk run: %s: input '%s': %s\n", tolk_status_str(r->err.status), nm, r->err.message);
      return 2;
    }
    r->n_in++;
  }
  return 0;
}

/* One run, outputs freed first so that each run allocates its own. */
static tolk_status run_once(struct run *r) {
  for (size_t i = 0; i < r->n_out; i++) {
    tolk_tensor_free(r->outs[i]);
    r->outs[i] = NULL;
  }
  return tolk_session_run(r->s, r->n_in, r->in_names, (const tolk_tensor *const *)r->in_t, r->n_out,
                          NULL, r->outs, &r->stats, &r->err);
}

static int save_outputs(struct run *r, const char *out_dir) {
  mkdir(out_dir, 0777);
  for (size_t i = 0; i < r->n_out; i++) {
    char fname[256], path[4096];
    file_name(tolk_session_output(r->s, i)->name, fname, sizeof fname);
    snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
    if (npy_write(path, r->outs[i], &r->err)) return cli_fail("run", &r->err);
  }
  return 0;
}

/* Compares the outputs with every --expect; returns 0, 1 (a mismatch) or 2. */
static int check_expected(struct run *r, const struct run_opts *o) {
  int rc = 0;
  for (int k = 0; k < o->n_exps; k++) {
    size_t i = 0;
    while (i < r->n_out && strcmp(tolk_session_output(r->s, i)->name, o->exps[k].name)) i++;
    if (i == r->n_out) {
      fprintf(stderr, "tolk run: --expect: the model has no output named '%s'\n", o->exps[k].name);
      return 2;
    }
    tolk_tensor *want = NULL;
    if (load_tensor(o->exps[k].file, &want, &r->err)) return cli_fail("run", &r->err);
    if (!compare(o->exps[k].name, r->outs[i], want, o->atol, o->rtol)) rc = 1;
    tolk_tensor_free(want);
  }
  return rc;
}

/* Resident set sizes seen by --repeat, for --stats. */
struct rss_seen {
  double at_100, at_end;
};

/* --repeat: `repeat` more runs, timed; prints the median. */
static int time_runs(struct run *r, int repeat, double first_ms, struct rss_seen *rss) {
  double *times = calloc((size_t)repeat, sizeof *times); /* touched now, not mid-way */
  if (!times) return 2;
  memset(times, 0, (size_t)repeat * sizeof *times);
  for (int k = 0; k < repeat; k++) {
    double a = now_ms();
    if (run_once(r)) {
      free(times);
      return cli_fail("run", &r->err);
    }
    times[k] = now_ms() - a;
    if (k + 1 == 100) rss->at_100 = rss_mb();
  }
  rss->at_end = rss_mb();
  qsort(times, (size_t)repeat, sizeof *times, cmp_double);
  printf("time: median %.3f ms per run over %d runs (min %.3f, max %.3f; first run %.3f ms)\n",
         times[repeat / 2], repeat, times[0], times[repeat - 1], first_ms);
  free(times);
  return 0;
}

static void print_stats(const tolk_run_stats *st, const struct rss_seen *rss, int repeat) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("stats: peak intermediate memory %.3f MB (arena %.3f MB, heap %.3f MB this run), "
         "outputs %.3f MB, %u kernels run, plan %s; process peak RSS %.1f MB\n",
         (double)st->peak_bytes / 1e6, (double)st->arena_bytes / 1e6, (double)st->heap_bytes / 1e6,
         (double)st->output_bytes / 1e6, st->nodes_run, st->plan_reused ? "reused" : "recorded",
         (double)ru.ru_maxrss / 1024.0);
  if (rss->at_100 > 0)
    printf("stats: RSS after 100 repeated runs %.1f MB, after %d: %.1f MB\n", rss->at_100, repeat,
           rss->at_end);
}

/* Runs once and prints the outputs, then does what the options ask. */
static int run_model(struct run *r, const struct run_opts *o) {
  if (tolk_session_create_from_file(o->model, o->sp, &r->s, &r->err)) return cli_fail("run", &r->err);
  int rc = bind_inputs(r, o);
  if (rc) return rc;
  r->n_out = tolk_session_output_count(r->s);
  if (!(r->outs = calloc(r->n_out + 1, sizeof *r->outs))) return 2;
  double t0 = now_ms();
  if (run_once(r)) return cli_fail("run", &r->err);
  double first_ms = now_ms() - t0;
  char shape[512];
  for (size_t i = 0; i < r->n_out; i++)
    printf("%s\t%s\t%s\n", tolk_session_output(r->s, i)->name, tolk_dtype_name(tolk_tensor_dtype(r->outs[i])),
           shape_text(r->outs[i], shape, sizeof shape));
  if (o->out_dir && (rc = save_outputs(r, o->out_dir))) return rc;
  int verdict = check_expected(r, o);
  if (verdict == 2) return 2;
  struct rss_seen rss = {0, 0};
  if (o->repeat > 0 && (rc = time_runs(r, o->repeat, first_ms, &rss))) return rc;
  if (o->stats) print_stats(&r->stats, &rss, o->repeat);
  return verdict;
}

int cmd_run(int argc, char **argv) {
  struct run_opts o = {0};
  int rc = parse_run(argc, argv, &o);
  if (rc < 0) {
    struct run r = {0};
    rc = run_model(&r, &o);
    run_free(&r);
  }
  run_opts_free(&o);
  return rc;
}
