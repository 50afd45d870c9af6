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

static void usage(FILE *f) {
  fprintf(f,
          "usage: tolk run MODEL.onnx [--input NAME=FILE]... [options]\n\n"
          "Runs the model once on the given inputs and prints each output's name, dtype and\n"
          "shape. FILE is a .npy file or an ONNX TensorProto (.pb, as in the ONNX test data).\n"
          "--input FILE (no NAME=) fills the model's inputs in order.\n\n"
          "  --output-dir DIR     write each output to DIR/NAME.npy\n"
          "  --expect NAME=FILE   compare output NAME with FILE: max abs and rel error, PASS or\n"
          "                       FAIL (exit status 1 when any comparison fails)\n"
          "  --atol A, --rtol R   an element passes when |got - want| <= A + R * |want|\n"
          "                       (defaults 1e-5 and 0; integers must match exactly)\n"
          "  --repeat N           run N more times and print the median time per run\n"
          "  --stats              print memory figures (peak intermediates, arena, RSS)\n"
          "  --threads N          intra-op threads (default: all cores)\n"
          "  --opt none|basic|all optimisation level (default basic)\n");
}

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

int cmd_run(int argc, char **argv) {
  const char *model = NULL, *out_dir = NULL;
  struct named *ins = calloc((size_t)argc, sizeof *ins), *exps = calloc((size_t)argc, sizeof *exps);
  int n_ins = 0, n_exps = 0, repeat = 0, rc = 2;
  bool stats = false;
  double rss_at_100 = 0, rss_at_end = 0;
  double atol = 1e-5, rtol = 0;
  tolk_session_params sp = tolk_session_default_params();
  tolk_session *s = NULL;
  tolk_tensor **in_t = NULL, **outs = NULL;
  const char **in_names = NULL;
  size_t n_out = 0;
  tolk_error err = {0};
  if (!ins || !exps) goto done;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool more = i + 1 < argc;
    char *end = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      rc = 0;
      goto done;
    } else if (!strcmp(a, "--input") && more) {
      if (!parse_named(argv[++i], &ins[n_ins++])) {
        fprintf(stderr, "tolk run: --input wants NAME=FILE or FILE, not '%s'\n", argv[i]);
        goto done;
      }
    } else if (!strcmp(a, "--expect") && more) {
      if (!parse_named(argv[++i], &exps[n_exps]) || !exps[n_exps].name) {
        fprintf(stderr, "tolk run: --expect wants NAME=FILE, not '%s'\n", argv[i]);
        goto done;
      }
      n_exps++;
    } else if (!strcmp(a, "--output-dir") && more) {
      out_dir = argv[++i];
    } else if ((!strcmp(a, "--atol") || !strcmp(a, "--rtol")) && more) {
      double v = strtod(argv[++i], &end);
      if (!end || *end || v < 0) {
        fprintf(stderr, "tolk run: %s wants a non-negative number\n", a);
        goto done;
      }
      if (a[2] == 'a') atol = v; else rtol = v;
    } else if ((!strcmp(a, "--repeat") || !strcmp(a, "--threads")) && more) {
      long v;
      if (!cli_parse_long(argv[++i], 0, 1000000, &v)) {
        fprintf(stderr, "tolk run: %s wants a count\n", a);
        goto done;
      }
      if (a[2] == 'r') repeat = (int)v; else sp.threads = (int)v;
    } else if (!strcmp(a, "--opt") && more) {
      const char *v = argv[++i];
      if (!strcmp(v, "none")) sp.opt_level = TOLK_OPT_NONE;
      else if (!strcmp(v, "basic")) sp.opt_level = TOLK_OPT_BASIC;
      else if (!strcmp(v, "all")) sp.opt_level = TOLK_OPT_ALL;
      else {
        fprintf(stderr, "tolk run: --opt wants none, basic or all\n");
        goto done;
      }
    } else if (!strcmp(a, "--stats")) {
      stats = true;
    } else if (a[0] == '-' || model) {
      fprintf(stderr, "tolk run: unexpected argument '%s'\n\n", a);
      usage(stderr);
      goto done;
    } else {
      model = a;
    }
  }
  if (!model) {
    usage(stderr);
    goto done;
  }
  if (tolk_session_create_from_file(model, sp, &s, &err)) {
    rc = cli_fail("run", &err);
    goto done;
  }
  /* Inputs: named ones by name, unnamed ones fill the rest in order. */
  size_t n_model_in = tolk_session_input_count(s);
  in_t = calloc((size_t)n_ins + 1, sizeof *in_t);
  in_names = calloc((size_t)n_ins + 1, sizeof *in_names);
  if (!in_t || !in_names) goto done;
  size_t next_pos = 0;
  for (int i = 0; i < n_ins; i++) {
    const char *nm = ins[i].name;
    if (!nm) {
      for (; next_pos < n_model_in; next_pos++) {
        const char *cand = tolk_session_input(s, next_pos)->name;
        bool taken = false;
        for (int j = 0; j < n_ins; j++) taken |= ins[j].name && !strcmp(ins[j].name, cand);
        if (!taken) break;
      }
      if (next_pos >= n_model_in) {
        fprintf(stderr, "tolk run: more inputs given than the model has (%zu)\n", n_model_in);
        goto done;
      }
      nm = tolk_session_input(s, next_pos++)->name;
    }
    in_names[i] = nm;
    if (load_tensor(ins[i].file, &in_t[i], &err)) {
      fprintf(stderr, "tolk run: %s: input '%s': %s\n", tolk_status_str(err.status), nm, err.message);
      goto done;
    }
  }
  n_out = tolk_session_output_count(s);
  outs = calloc(n_out + 1, sizeof *outs);
  if (!outs) goto done;
  tolk_run_stats st;
  double t0 = now_ms();
  if (tolk_session_run(s, (size_t)n_ins, in_names, (const tolk_tensor *const *)in_t, n_out, NULL,
                       outs, &st, &err)) {
    rc = cli_fail("run", &err);
    goto done;
  }
  double first_ms = now_ms() - t0;
  char shape[512];
  for (size_t i = 0; i < n_out; i++)
    printf("%s\t%s\t%s\n", tolk_session_output(s, i)->name, tolk_dtype_name(tolk_tensor_dtype(outs[i])),
           shape_text(outs[i], shape, sizeof shape));
  rc = 0;
  if (out_dir) {
    mkdir(out_dir, 0777);
    for (size_t i = 0; i < n_out; i++) {
      char fname[256], path[4096];
      file_name(tolk_session_output(s, i)->name, fname, sizeof fname);
      snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
      if (npy_write(path, outs[i], &err)) {
        rc = cli_fail("run", &err);
        goto done;
      }
    }
  }
  for (int k = 0; k < n_exps; k++) {
    size_t i = 0;
    while (i < n_out && strcmp(tolk_session_output(s, i)->name, exps[k].name)) i++;
    if (i == n_out) {
      fprintf(stderr, "tolk run: --expect: the model has no output named '%s'\n", exps[k].name);
      rc = 2;
      goto done;
    }
    tolk_tensor *want = NULL;
    if (load_tensor(exps[k].file, &want, &err)) {
      rc = cli_fail("run", &err);
      goto done;
    }
    if (!compare(exps[k].name, outs[i], want, atol, rtol)) rc = 1;
    tolk_tensor_free(want);
  }
  if (repeat > 0) {
    double *times = calloc((size_t)repeat, sizeof *times); /* touched now, not mid-way */
    if (!times) goto done;
    memset(times, 0, (size_t)repeat * sizeof *times);
    for (int r = 0; r < repeat; r++) {
      for (size_t i = 0; i < n_out; i++) {
        tolk_tensor_free(outs[i]);
        outs[i] = NULL;
      }
      double a = now_ms();
      if (tolk_session_run(s, (size_t)n_ins, in_names, (const tolk_tensor *const *)in_t, n_out,
                           NULL, outs, &st, &err)) {
        free(times);
        rc = cli_fail("run", &err);
        goto done;
      }
      times[r] = now_ms() - a;
      if (r + 1 == 100) rss_at_100 = rss_mb();
    }
    rss_at_end = rss_mb();
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    printf("time: median %.3f ms per run over %d runs (min %.3f, max %.3f; first run %.3f ms)\n",
           times[repeat / 2], repeat, times[0], times[repeat - 1], first_ms);
    free(times);
  }
  if (stats) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("stats: peak intermediate memory %.3f MB (arena %.3f MB, heap %.3f MB this run), "
           "outputs %.3f MB, %u kernels run, plan %s; process peak RSS %.1f MB\n",
           (double)st.peak_bytes / 1e6, (double)st.arena_bytes / 1e6,
           (double)st.heap_bytes / 1e6, (double)st.output_bytes / 1e6, st.nodes_run,
           st.plan_reused ? "reused" : "recorded", (double)ru.ru_maxrss / 1024.0);
    if (rss_at_100 > 0)
      printf("stats: RSS after 100 repeated runs %.1f MB, after %d: %.1f MB\n", rss_at_100, repeat,
             rss_at_end);
  }
done:
  for (int i = 0; in_t && i < n_ins; i++) tolk_tensor_free(in_t[i]);
  for (size_t i = 0; outs && i < n_out; i++) tolk_tensor_free(outs[i]);
  for (int i = 0; ins && i < n_ins; i++) free((char *)ins[i].name);
  for (int i = 0; exps && i < n_exps; i++) free((char *)exps[i].name);
  free(in_t);
  free(in_names);
  free(outs);
  free(ins);
  free(exps);
  tolk_session_free(s);
  return rc;
}
