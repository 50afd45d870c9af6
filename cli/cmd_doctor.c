/*
 * cmd_doctor.c — `tolk doctor [-m DIR]`: the checklist an operator goes
 * through before releasing a model folder, as one command. Each item is a
 * PASS or FAIL with the figure it was judged on (or SKIP when nothing was
 * given to check it against):
 *
 *   integrity   every file against tolk-manifest.json (and --source-sha256)
 *   graphs      every .onnx passes tolk check's checks; IR versions, opsets
 *   provider    the CPU features and kernel tiers the dispatcher picked
 *   cold-start  from nothing to the first translation
 *   latency     P50/P95/P99 over sentences of varied length, one at a time
 *   memory      the heap in use over many translations, once settled,
 *               under tolk serve's allocator policy: its growth fitted
 *               and extrapolated to 24 hours (RSS fitted beside it)
 *   rollback    --previous DIR still loads and translates
 *
 * The measuring items live in doctor_run.c; this file parses the options,
 * runs the checks that need no translator and prints the verdict (text or
 * --json). Exit status: 0 every item passed (or was skipped), 1 one failed,
 * 2 bad usage or a model that could not be opened at all.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor.h"
#include "tolk_serve.h"

enum {
  OPT_MODEL, OPT_INT8, OPT_THREADS, OPT_BEAM, OPT_JSON, OPT_NO_MANIFEST_OK, OPT_SOURCE_SHA256,
  OPT_SENTENCES, OPT_SENTENCES_N, OPT_MEMORY_N, OPT_MEMORY_SECONDS, OPT_MAX_COLD_START, OPT_PREVIOUS
};

static const struct cli_option options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR", "the model folder (default: $TOLK_MODEL, else the bundled demo model)"},
    [OPT_INT8] = {"int8", 0, NULL, "time the *_quantized.onnx graphs"},
    [OPT_THREADS] = {"threads", 0, "N", "intra-op threads (default: all cores)"},
    [OPT_BEAM] = {"beam", 0, "N", "beam size (default: the model's num_beams)"},
    [OPT_JSON] = {"json", 0, NULL, "print the items as one JSON object"},
    [OPT_NO_MANIFEST_OK] = {"no-manifest-ok", 0, NULL, "a folder without tolk-manifest.json passes integrity"},
    [OPT_SOURCE_SHA256] = {"source-sha256", 0, "FILE",
                           "also check the original files FILE lists (sha256sum format;\n"
                           "relative names are looked up beside FILE)"},
    [OPT_SENTENCES] = {"sentences", 0, "FILE", "English sentences to time, one a line (default: the bundled 1,000)"},
    [OPT_SENTENCES_N] = {"sentences-n", 0, "N", "time only the first N sentences"},
    [OPT_MEMORY_N] = {"memory-n", 0, "N", "memory: passes of N/2 sentences, at least N/2 fitted (default 1000)"},
    [OPT_MEMORY_SECONDS] = {"memory-seconds", 0, "S", "memory: the fit lasts at least S seconds (default 30)"},
    [OPT_MAX_COLD_START] = {"max-cold-start", 0, "S", "cold start passes within S seconds (default 10)"},
    [OPT_PREVIOUS] = {"previous", 0, "DIR", "the previous release, which must still load and translate"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "doctor", "[-m MODEL_DIR] [options]",
    "Checks a model folder as an operator releasing it would: integrity against\n"
    "tolk-manifest.json, every graph against the ONNX rules, the CPU kernels tolk\n"
    "will use, cold start, tail latency (PASS: P99 <= 1.5 x P50), memory growth\n"
    "(the heap in use under tolk serve's allocator policy, once settled)\n"
    "extrapolated to 24 hours (PASS: < 5 % of RSS) and, with --previous, rollback.",
    options, "exit status: 0 all items passed or were skipped, 1 an item failed, 2 bad usage",
    false};

/* ------------------------------------------------------------ items */

void doctor_item(struct doctor_item *it, enum doctor_verdict v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(it->figure, sizeof it->figure, fmt, ap);
  va_end(ap);
  it->verdict = v;
}

void doctor_detail(struct doctor_item *it, const char *line) {
  if (it->n_details >= DOCTOR_MAX_DETAILS) {
    it->more_details++;
    return;
  }
  snprintf(it->details[it->n_details++], sizeof it->details[0], "%s", line);
}

void doctor_number(struct doctor_item *it, const char *key, double value) {
  if (!it->numbers) it->numbers = cJSON_CreateObject();
  cJSON_AddNumberToObject(it->numbers, key, value);
}

static void add_detail(void *user, const char *line) { doctor_detail(user, line); }

/* ------------------------------------------------------------ integrity */

static void check_integrity(const struct doctor_opts *o, struct doctor_item *it) {
  tolk_verify_summary m, s = {0};
  tolk_error err;
  if (tolk_manifest_check(o->model, add_detail, it, &m, &err)) {
    doctor_detail(it, err.message);
    doctor_item(it, DOCTOR_FAIL, "tolk-manifest.json could not be read");
    return;
  }
  if (o->source_sha256 && tolk_checksums_check(o->source_sha256, add_detail, it, &s, &err)) {
    doctor_detail(it, err.message);
    doctor_item(it, DOCTOR_FAIL, "%s could not be read", o->source_sha256);
    return;
  }
  doctor_number(it, "files", (double)(m.files + s.files));
  doctor_number(it, "failed", (double)(m.failed + s.failed));
  char src[160] = "";
  if (o->source_sha256)
    snprintf(src, sizeof src, "; %zu of %zu original files match", s.files - s.failed, s.files);
  if (!m.found)
    doctor_item(it, o->no_manifest_ok && !s.failed ? DOCTOR_PASS : DOCTOR_FAIL,
                "no tolk-manifest.json: files not checked%s%s", src,
                o->no_manifest_ok ? " (--no-manifest-ok)" : "");
  else
    doctor_item(it, m.failed || s.failed ? DOCTOR_FAIL : DOCTOR_PASS,
                "%zu of %zu files match tolk-manifest.json%s", m.files - m.failed, m.files, src);
}

/* ------------------------------------------------------------ graphs */

struct graph_tally {
  size_t graphs, invalid;
  int64_t ir_min, ir_max;
  char opsets[256]; /* "ai.onnx 18, com.microsoft 1": distinct imports */
};

static void note_opset(struct graph_tally *t, const char *domain, int64_t version) {
  char one[96];
  snprintf(one, sizeof one, "%s %lld", *domain ? domain : "ai.onnx", (long long)version);
  /* Listed once: a comma-separated search for the whole entry. */
  for (const char *p = t->opsets; (p = strstr(p, one)); p += strlen(one))
    if ((p == t->opsets || p[-1] == ' ') && (p[strlen(one)] == ',' || !p[strlen(one)])) return;
  size_t used = strlen(t->opsets);
  snprintf(t->opsets + used, sizeof t->opsets - used, "%s%s", used ? ", " : "", one);
}

struct graph_report {
  struct doctor_item *it;
  const char *name;
};

static void graph_problem(void *user, const char *line) {
  struct graph_report *r = user;
  char buf[DOCTOR_DETAIL_MAX];
  snprintf(buf, sizeof buf, "%s: %s", r->name, line);
  doctor_detail(r->it, buf);
}

static void check_graph(const char *path, const char *name, struct graph_tally *t, struct doctor_item *it) {
  tolk_model *m;
  tolk_error err;
  t->graphs++;
  if (tolk_model_load(path, tolk_model_default_params(), &m, &err)) {
    t->invalid++;
    doctor_detail(it, err.message);
    return;
  }
  tolk_model_info in = tolk_model_describe(m);
  if (t->graphs == 1 || in.ir_version < t->ir_min) t->ir_min = in.ir_version;
  if (t->graphs == 1 || in.ir_version > t->ir_max) t->ir_max = in.ir_version;
  for (size_t i = 0; i < in.n_opsets; i++) {
    int64_t v;
    const char *d = tolk_model_opset(m, i, &v);
    note_opset(t, d, v);
  }
  struct graph_report r = {it, name};
  if (tolk_model_check(m, graph_problem, &r, &err)) t->invalid++;
  tolk_model_free(m);
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

/* Every .onnx at the top of `dir`, in name order, and in dir/onnx when
 * `sub` names it (where HuggingFace repos keep the graphs). */
static void check_graphs_in(const char *dir, const char *sub, struct graph_tally *t,
                            struct doctor_item *it) {
  char folder[4200];
  snprintf(folder, sizeof folder, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
  struct dirent **names;
  int n = scandir(folder, &names, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    char path[8400], shown[512];
    if (ends_with(names[i]->d_name, ".onnx")) {
      snprintf(path, sizeof path, "%s/%s", folder, names[i]->d_name);
      snprintf(shown, sizeof shown, "%s%s%s", sub ? sub : "", sub ? "/" : "", names[i]->d_name);
      check_graph(path, shown, t, it);
    }
    free(names[i]);
  }
  if (n >= 0) free(names);
}

static void check_graphs(const struct doctor_opts *o, struct doctor_item *it) {
  struct graph_tally t = {0};
  check_graphs_in(o->model, NULL, &t, it);
  check_graphs_in(o->model, "onnx", &t, it);
  doctor_number(it, "graphs", (double)t.graphs);
  doctor_number(it, "invalid", (double)t.invalid);
  if (!t.graphs) {
    doctor_item(it, DOCTOR_FAIL, "no .onnx graphs in %s", o->model);
    return;
  }
  char ir[64];
  if (t.ir_min == t.ir_max) snprintf(ir, sizeof ir, "IR %lld", (long long)t.ir_min);
  else snprintf(ir, sizeof ir, "IR %lld-%lld", (long long)t.ir_min, (long long)t.ir_max);
  doctor_item(it, t.invalid ? DOCTOR_FAIL : DOCTOR_PASS, "%zu of %zu graphs valid; %s; opsets %s",
              t.graphs - t.invalid, t.graphs, ir, *t.opsets ? t.opsets : "none");
}

/* ------------------------------------------------------------ provider */

static void check_provider(struct doctor_item *it) {
  tolk_cpu_info c = tolk_cpu_describe();
  char line[DOCTOR_DETAIL_MAX];
  snprintf(line, sizeof line, "CPU: %s", *c.model ? c.model : "unknown");
  doctor_detail(it, line);
  snprintf(line, sizeof line, "features: %s", c.features);
  doctor_detail(it, line);
  if (c.forced) {
    snprintf(line, sizeof line, "TOLK_ISA=%s forces the tier", c.forced);
    doctor_detail(it, line);
  }
  doctor_number(it, "cores", c.cores);
  /* A tier below what the CPU can run (TOLK_ISA left set, a build without
   * the kernels) costs speed the release would be judged by. */
  bool best = !strcmp(c.float_isa, c.best_isa);
  doctor_item(it, best ? DOCTOR_PASS : DOCTOR_FAIL, "float kernels %s%s, int8 kernels %s, %d cores",
              c.float_isa, best ? "" : " (the CPU could run a better tier)", c.int8_isa, c.cores);
}

/* ------------------------------------------------------------ output */

static const char *verdict_name(enum doctor_verdict v, bool upper) {
  static const char *const names[][2] = {{"pass", "PASS"}, {"fail", "FAIL"}, {"skip", "SKIP"}};
  return names[v][upper];
}

static void print_text(const struct doctor_opts *o, const struct doctor_item *items, size_t n) {
  printf("tolk doctor: %s (%s)\n", o->model, o->model_why);
  for (size_t i = 0; i < n; i++) {
    const struct doctor_item *it = &items[i];
    printf("%s  %-10s  %s\n", verdict_name(it->verdict, true), it->name, it->figure);
    for (size_t k = 0; k < it->n_details; k++) printf("                  %s\n", it->details[k]);
    if (it->more_details) printf("                  (%zu more)\n", it->more_details);
  }
}

static void print_json(const struct doctor_opts *o, struct doctor_item *items, size_t n, bool passed) {
  cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "model", o->model);
  cJSON_AddBoolToObject(root, "passed", passed);
  cJSON_AddItemToObject(root, "items", arr);
  for (size_t i = 0; i < n; i++) {
    struct doctor_item *it = &items[i];
    cJSON *j = cJSON_CreateObject(), *d = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "name", it->name);
    cJSON_AddStringToObject(j, "status", verdict_name(it->verdict, false));
    cJSON_AddStringToObject(j, "figure", it->figure);
    for (size_t k = 0; k < it->n_details; k++) cJSON_AddItemToArray(d, cJSON_CreateString(it->details[k]));
    cJSON_AddItemToObject(j, "details", d);
    if (it->numbers) {
      cJSON_AddItemToObject(j, "figures", it->numbers);
      it->numbers = NULL;
    }
    cJSON_AddItemToArray(arr, j);
  }
  char *s = cJSON_Print(root);
  if (s) printf("%s\n", s);
  free(s);
  cJSON_Delete(root);
}

/* ------------------------------------------------------------ options */

/* Parses the options into *o; -1 to go on, else the exit status (--help,
 * a usage error). */
static int parse(int argc, char **argv, struct doctor_opts *o) {
  long v;
  double d;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: return a.status;
    case OPT_MODEL: o->model = a.value; o->model_why = "-m"; break;
    case OPT_INT8: o->int8 = true; break;
    case OPT_THREADS: if (!cli_value_long(&a, 1, 1024, &v)) return 2; o->threads = (int)v; break;
    case OPT_BEAM: if (!cli_value_long(&a, 1, 64, &v)) return 2; o->beam = (int)v; break;
    case OPT_JSON: o->json = true; break;
    case OPT_NO_MANIFEST_OK: o->no_manifest_ok = true; break;
    case OPT_SOURCE_SHA256: o->source_sha256 = a.value; break;
    case OPT_SENTENCES: o->sentences = a.value; break;
    case OPT_SENTENCES_N: if (!cli_value_long(&a, 1, 1000000, &v)) return 2; o->sentences_n = (size_t)v; break;
    case OPT_MEMORY_N: if (!cli_value_long(&a, 10, 10000000, &v)) return 2; o->memory_n = (size_t)v; break;
    case OPT_MEMORY_SECONDS:
      if (!cli_value_double(&a, &d)) return 2;
      if (d < 0 || d > 86400) return cli_bad_value(&a, "a number of seconds from 0 to 86400");
      o->memory_seconds = d;
      break;
    case OPT_MAX_COLD_START:
      if (!cli_value_double(&a, &d)) return 2;
      if (d <= 0) return cli_bad_value(&a, "a number of seconds above 0");
      o->max_cold_start = d;
      break;
    case OPT_PREVIOUS: o->previous = a.value; break;
    }
  }
  if (a.first < argc) return cli_usage_error(&verb, "unexpected argument '%s'", argv[a.first]);
  if (!o->model) o->model = cli_default_model(&o->model_why);
  if (!o->model) return cli_usage_error(&verb, "no model: pass -m MODEL_DIR or set TOLK_MODEL");
  if (!o->sentences) o->sentences = cli_default_sentences();
  if (!o->sentences) return cli_usage_error(&verb, "no bundled sentences found: pass --sentences FILE");
  return -1;
}

/* The non-empty lines of o->sentences, the first o->sentences_n of them
 * when given, into o->texts (one buffer: texts[0] is what is freed). */
static int read_sentences(struct doctor_opts *o, char **buf) {
  FILE *f = fopen(o->sentences, "rb");
  size_t cap = 0, len = 0;
  *buf = NULL;
  for (size_t got; f;) {
    if (len + 4096 + 1 > cap) {
      char *nb = realloc(*buf, cap = cap * 2 + 8192);
      if (!nb) break;
      *buf = nb;
    }
    if (!(got = fread(*buf + len, 1, cap - len - 1, f))) break;
    len += got;
  }
  if (!f || !*buf || ferror(f)) {
    if (f) fclose(f);
    fprintf(stderr, "tolk doctor: %s: cannot read the sentences\n", o->sentences);
    return 2;
  }
  fclose(f);
  (*buf)[len] = '\0';
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += (*buf)[i] == '\n';
  o->texts = malloc(lines * sizeof *o->texts);
  for (char *p = *buf, *nl; o->texts && p && *p; p = nl) {
    if ((nl = strchr(p, '\n'))) *nl++ = '\0';
    if (*p && (!o->sentences_n || o->n_texts < o->sentences_n)) o->texts[o->n_texts++] = p;
  }
  if (!o->n_texts) {
    fprintf(stderr, "tolk doctor: %s: no sentences in it\n", o->sentences);
    return 2;
  }
  return 0;
}

int cmd_doctor(int argc, char **argv) {
  struct doctor_opts o = {.memory_n = 1000, .memory_seconds = 30, .max_cold_start = 10, .model_why = "-m"};
  int rc = parse(argc, argv, &o);
  if (rc >= 0) return rc;
  /* Measured as the service runs (doctor_run.c, memory); before the
   * translator's threads start, as the service does it. */
  tolk_serve_heap_setup();
  struct stat st;
  if (stat(o.model, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "tolk doctor: model folder %s: no such folder\n", o.model);
    return 2;
  }
  char *text_buf;
  if ((rc = read_sentences(&o, &text_buf))) {
    free(text_buf);
    free(o.texts);
    return rc;
  }
  static struct doctor_item items[DOCTOR_ITEMS] = {
      {.name = "integrity"}, {.name = "graphs"}, {.name = "provider"}, {.name = "cold-start"},
      {.name = "latency"},   {.name = "memory"}, {.name = "rollback"}};
  check_integrity(&o, &items[0]);
  check_graphs(&o, &items[1]);
  check_provider(&items[2]);
  doctor_measure(&o, &items[3], &items[4], &items[5]);
  doctor_rollback(&o, &items[6]);
  bool passed = true;
  for (size_t i = 0; i < DOCTOR_ITEMS; i++) passed &= items[i].verdict != DOCTOR_FAIL;
  if (o.json) print_json(&o, items, DOCTOR_ITEMS, passed);
  else print_text(&o, items, DOCTOR_ITEMS);
  for (size_t i = 0; i < DOCTOR_ITEMS; i++) cJSON_Delete(items[i].numbers);
  free(o.texts);
  free(text_buf);
  return passed ? 0 : 1;
}
