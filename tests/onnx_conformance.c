/*
 * onnx_conformance.c — loads and checks every model of the ONNX backend test
 * data and decodes every input_N.pb / output_N.pb beside it, expecting 100%
 * success. Registered by tests/onnx.cmake (label `conformance`) with the data
 * roots as arguments: Debian's libonnx-testdata (onnx 1.12) and the newer
 * set from the onnx wheel (scripts/testdata.sh). A root that is absent is
 * reported and skipped; finding no root at all fails.
 *
 * Each .pb file is decoded as the model declares the matching input or
 * output: a TensorProto for tensors, else SequenceProto / OptionalProto /
 * MapProto.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "onnx/onnx.h"
#include "testutil.h"

static size_t n_models, n_checked, n_values, n_failed;

static bool is_dir(const char *p) {
  struct stat sb;
  return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
  struct stat sb;
  return !stat(p, &sb) && S_ISREG(sb.st_mode);
}

static void report_line(void *user, const char *line) {
  fprintf(stderr, "  check %s: %s\n", (const char *)user, line);
}

static enum onnx_value_kind kind_of(const struct ir_value *v) {
  if (!v) return ONNX_VALUE_TENSOR;
  switch (v->type.kind) {
  case IR_TYPE_SEQUENCE: return ONNX_VALUE_SEQUENCE;
  case IR_TYPE_MAP: return ONNX_VALUE_MAP;
  case IR_TYPE_OPTIONAL: return ONNX_VALUE_OPTIONAL;
  case IR_TYPE_SPARSE_TENSOR: return ONNX_VALUE_SPARSE_TENSOR;
  default: return ONNX_VALUE_TENSOR;
  }
}

/* The i-th graph input that is fed at run time (initializers excluded). */
static const struct ir_value *fed_input(const struct ir_graph *g, size_t i) {
  for (size_t k = 0; k < g->n_inputs; k++) {
    if (g->inputs[k]->flags & IR_VALUE_INITIALIZER) continue;
    if (!i--) return g->inputs[k];
  }
  return NULL;
}

static void decode_pb(const char *path, enum onnx_value_kind kind) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "FAIL %s: cannot open\n", path);
    n_failed++;
    return;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  struct tolk_arena arena;
  tolk_arena_init(&arena, 0);
  struct onnx_value *v;
  tolk_error e = {0};
  if (got != (size_t)n || onnx_value_decode(buf, got, kind, &arena, &v, &e)) {
    fprintf(stderr, "FAIL %s: %s\n", path, e.message);
    n_failed++;
  } else {
    n_values++;
  }
  free(buf);
  tolk_arena_release(&arena);
}

/* Decodes files named <prefix>input_N.pb / <prefix>output_N.pb in dir. */
static void decode_set(const char *dir, const char *prefix, const struct ir_graph *g) {
  char p[16384];
  for (int io = 0; io < 2; io++) {
    for (size_t i = 0;; i++) {
      snprintf(p, sizeof p, "%s/%s%s_%zu.pb", dir, prefix, io ? "output" : "input", i);
      if (!is_file(p)) break;
      const struct ir_value *v = io ? (i < g->n_outputs ? g->outputs[i] : NULL) : fed_input(g, i);
      decode_pb(p, kind_of(v));
    }
  }
}

static tolk_model *load_and_check(const char *path) {
  tolk_model *m;
  tolk_error e = {0};
  if (tolk_model_load(path, tolk_model_default_params(), &m, &e)) {
    fprintf(stderr, "FAIL load %s: %s\n", path, e.message);
    n_failed++;
    return NULL;
  }
  n_models++;
  if (tolk_model_check(m, report_line, (void *)path, &e)) {
    fprintf(stderr, "FAIL check %s: %s\n", path, e.message);
    n_failed++;
  } else {
    n_checked++;
  }
  return m;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted entries of a folder (malloc'd array of malloc'd names). */
static char **list_dir(const char *dir, size_t *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  size_t cap = 64;
  char **names = malloc(cap * sizeof *names);
  struct dirent *ent;
  while (names && (ent = readdir(d))) {
    if (ent->d_name[0] == '.') continue;
    if (*n == cap) {
      char **nn = realloc(names, (cap *= 2) * sizeof *names);
      if (!nn) break;
      names = nn;
    }
    size_t l = strlen(ent->d_name) + 1;
    names[*n] = malloc(l);
    if (names[*n]) memcpy(names[(*n)++], ent->d_name, l);
  }
  closedir(d);
  if (names) qsort(names, *n, sizeof *names, name_cmp);
  return names;
}

static void free_list(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static void run_category(const char *cat) {
  size_t n;
  char **names = list_dir(cat, &n);
  char p[8192], q[8192 + 64];
  for (size_t i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/%s", cat, names[i]);
    size_t l = strlen(names[i]);
    if (is_dir(p)) {
      snprintf(q, sizeof q, "%s/model.onnx", p);
      if (!is_file(q)) continue;
      tolk_model *m = load_and_check(q);
      if (!m) continue;
      size_t ns;
      char **sets = list_dir(p, &ns);
      for (size_t s = 0; s < ns; s++) {
        if (strncmp(sets[s], "test_data_set_", 14)) continue;
        snprintf(q, sizeof q, "%s/%s", p, sets[s]);
        decode_set(q, "", tolk_model_ir(m)->graph);
      }
      free_list(sets, ns);
      tolk_model_free(m);
    } else if (l > 5 && !strcmp(names[i] + l - 5, ".onnx")) {
      /* light/: light_x.onnx with light_x_output_0.pb beside it */
      tolk_model *m = load_and_check(p);
      if (!m) continue;
      snprintf(q, sizeof q, "%.*s_", (int)(l - 5), names[i]);
      decode_set(cat, q, tolk_model_ir(m)->graph);
      tolk_model_free(m);
    }
  }
  free_list(names, n);
}

int main(int argc, char **argv) {
  int roots = 0;
  clock_t t0 = clock();
  for (int a = 1; a < argc; a++) {
    if (!is_dir(argv[a])) {
      printf("onnx_conformance: %s is absent, skipped\n", argv[a]);
      continue;
    }
    roots++;
    size_t m0 = n_models, v0 = n_values, f0 = n_failed;
    size_t n;
    char **cats = list_dir(argv[a], &n);
    char p[4096];
    for (size_t i = 0; i < n; i++) {
      snprintf(p, sizeof p, "%s/%s", argv[a], cats[i]);
      if (is_dir(p)) run_category(p);
    }
    free_list(cats, n);
    printf("onnx_conformance: %s: %zu models loaded, %zu values decoded, %zu failures\n", argv[a],
           n_models - m0, n_values - v0, n_failed - f0);
  }
  printf("onnx_conformance: total %zu models loaded and %zu passed the checker, %zu values decoded, "
         "%zu failures, %.1f s CPU\n", n_models, n_checked, n_values, n_failed,
         (double)(clock() - t0) / CLOCKS_PER_SEC);
  CHECK_MSG(roots > 0, "no test data root found");
  CHECK_MSG(n_failed == 0, "%zu failures", n_failed);
  CHECK(n_models > 0);
  return tu_finish("onnx_conformance");
}
