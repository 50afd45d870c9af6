/*
 * calib.c — reads calibration data for `tolk quantize --calibrate DATA`
 * into a tolk_calibration (tolk.h). The layout follows the ONNX test data
 * that tolk already reads (tests/conformance.c): DATA holds one folder per
 * sample (test_data_set_0, test_data_set_1, ... — any names, taken in sorted
 * order), or is itself the only sample when it has no subfolders. In a
 * sample folder, input_K.pb or input_K.npy is the graph's K-th input, as in
 * ONNX's layout; NAME.pb or NAME.npy is the input named NAME (spelled as
 * `tolk run --output-dir` writes names: characters other than letters,
 * digits, '.' and '-' as '_'); output_K.pb files (the expected outputs of
 * test data) are ignored. A file naming no input, an input given twice or
 * missing, and a tensor of another dtype or shape than the graph declares
 * are errors naming the file or input and the sample.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib.h"
#include "npy.h"

#define SAMPLE_FILES_MAX 64

static tolk_status fail(tolk_error *err, tolk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tolk_status fail(tolk_error *err, tolk_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  err->status = st;
  return st;
}

/* Puts "WHAT PATH: " in front of err's message. */
static void prefix(tolk_error *err, const char *what, const char *path) {
  char old[sizeof err->message];
  memcpy(old, err->message, sizeof old);
  int n = snprintf(err->message, sizeof err->message, "%s%.900s: ", what, path);
  size_t used = n > 0 && (size_t)n < sizeof old ? (size_t)n : 0, len = strnlen(old, sizeof old - 1);
  if (len > sizeof old - 1 - used) len = sizeof old - 1 - used; /* cut the end off, as snprintf would */
  memcpy(err->message + used, old, len);
  err->message[used + len] = '\0';
}

struct sample {
  const char *names[SAMPLE_FILES_MAX];
  tolk_tensor *tensors[SAMPLE_FILES_MAX];
  size_t n;
};

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

/* Whether file stem `stem` (len bytes) spells input name `name`. */
static bool spells(const char *stem, size_t len, const char *name) {
  size_t i = 0;
  for (; i < len && name[i]; i++) {
    unsigned char c = (unsigned char)name[i];
    char want = isalnum(c) || c == '.' || c == '-' ? (char)c : '_';
    if (stem[i] != want) return false;
  }
  return i == len && !name[i];
}

/* The input a file of a sample folder fills; NULL (with err set) when none. */
static const char *input_of(const tolk_calibration *cal, const char *file, tolk_error *err) {
  size_t len = strlen(file) - (ends_with(file, ".npy") ? 4 : 3), n = tolk_calibration_input_count(cal);
  unsigned long k;
  char *end;
  if (!strncmp(file, "input_", 6) && isdigit((unsigned char)file[6])) {
    k = strtoul(file + 6, &end, 10);
    if ((size_t)(end - file) == len) {
      if (k < n) return tolk_calibration_input(cal, k)->name;
      fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s: the graph has %zu inputs, no input %lu", file, n, k);
      return NULL;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (spells(file, len, tolk_calibration_input(cal, i)->name)) return tolk_calibration_input(cal, i)->name;
  char names[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof names; i++) {
    const char *name = tolk_calibration_input(cal, i)->name;
    used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", name);
  }
  fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s names no input of the graph (its inputs: %s)", file, names);
  return NULL;
}

static tolk_status load_tensor(const char *path, tolk_tensor **out, tolk_error *err) {
  return ends_with(path, ".npy") ? npy_read(path, out, err) : tolk_tensor_load_pb(path, out, err);
}

static void sample_free(struct sample *s) {
  for (size_t i = 0; i < s->n; i++) tolk_tensor_free(s->tensors[i]);
  s->n = 0;
}

/* Reads one sample folder and adds it to cal. */
static tolk_status add_sample(tolk_calibration *cal, const char *dir, tolk_error *err) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  if (n < 0) return fail(err, TOLK_ERR_IO, "%s: cannot read the folder", dir);
  struct sample s = {{0}, {0}, 0};
  tolk_status st = TOLK_OK;
  for (int i = 0; i < n; i++) {
    const char *f = names[i]->d_name;
    if (!st && (ends_with(f, ".pb") || ends_with(f, ".npy")) && strncmp(f, "output_", 7)) {
      char path[8400];
      snprintf(path, sizeof path, "%s/%s", dir, f);
      const char *input = input_of(cal, f, err);
      if (!input) st = TOLK_ERR_INVALID_ARGUMENT;
      else if (s.n == SAMPLE_FILES_MAX) st = fail(err, TOLK_ERR_LIMIT, "more than %d input files", SAMPLE_FILES_MAX);
      else if (!(st = load_tensor(path, &s.tensors[s.n], err))) s.names[s.n++] = input;
    }
    free(names[i]);
  }
  free(names);
  if (!st && !s.n)
    st = fail(err, TOLK_ERR_INVALID_ARGUMENT, "no input files (input_K.pb, input_K.npy, NAME.pb or NAME.npy)");
  if (!st) st = tolk_calibration_add(cal, s.n, s.names, (const tolk_tensor *const *)s.tensors, err);
  sample_free(&s);
  if (st) prefix(err, "calibration sample ", dir);
  return st;
}

static int no_dots(const struct dirent *d) {
  return d->d_name[0] != '.';
}

tolk_status cli_calibrate(const char *model, const char *data, tolk_calibration_params params,
                          tolk_calibration **out, tolk_error *err) {
  *out = NULL;
  if (!is_dir(data))
    return fail(err, TOLK_ERR_IO, "%s: not a folder of calibration samples (sentences calibrate a model folder)", data);
  tolk_calibration *cal;
  tolk_status st = tolk_calibration_create(model, params, &cal, err);
  if (st) return st;
  struct dirent **names;
  int n = scandir(data, &names, no_dots, alphasort), subdirs = 0;
  if (n < 0) st = fail(err, TOLK_ERR_IO, "%s: cannot read the folder", data);
  for (int i = 0; i < n; i++) {
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", data, names[i]->d_name);
    if (!st && is_dir(path)) {
      subdirs++;
      st = add_sample(cal, path, err);
    }
    free(names[i]);
  }
  if (n >= 0) free(names);
  if (!st && !subdirs) st = add_sample(cal, data, err);
  if (!st && (st = tolk_calibration_finish(cal, err))) prefix(err, "", data);
  if (st) {
    tolk_calibration_free(cal);
    return st;
  }
  *out = cal;
  return TOLK_OK;
}
