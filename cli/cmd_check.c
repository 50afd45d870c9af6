/*
 * cmd_check.c — `tolk check MODEL...`: validates models as onnx.checker does
 * and prints one line per problem, naming the node (index, name, op type).
 * Exit status: 0 all valid, 1 a model is invalid (also when the file is not
 * a well-formed model), 2 a file could not be read or bad usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f, "usage: tolk check [options] MODEL.onnx...\n\n"
             "Checks each model like onnx.checker: IR version and opsets, a DAG in topological\n"
             "order, every input defined, single assignment of names, ops, attribute names and\n"
             "types against the ONNX schemas, tensor sizes, external data inside the model folder.\n\n"
             "options:\n"
             "  --no-external   do not map external data files (their ranges are still checked)\n"
             "  -q, --quiet     print only problems, not the per-model verdict\n"
             "  -h, --help      this text\n\n"
             "exit status: 0 valid, 1 invalid, 2 could not read a file or bad usage\n");
}

struct report_ctx {
  const char *path;
};

static void print_problem(void *user, const char *line) {
  const struct report_ctx *c = user;
  printf("%s: %s\n", c->path, line);
}

static bool unreadable(tolk_status st) {
  return st == TOLK_ERR_IO || st == TOLK_ERR_NOT_FOUND || st == TOLK_ERR_NO_MEMORY ||
         st == TOLK_ERR_INVALID_ARGUMENT;
}

int cmd_check(int argc, char **argv) {
  tolk_model_params params = tolk_model_default_params();
  bool quiet = false;
  int first = 1, rc = 0;
  for (; first < argc && argv[first][0] == '-'; first++) {
    const char *a = argv[first];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--no-external")) {
      params.load_external_data = 0;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = true;
    } else if (!strcmp(a, "--")) {
      first++;
      break;
    } else {
      fprintf(stderr, "tolk check: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (first >= argc) {
    usage(stderr);
    return 2;
  }
  for (int i = first; i < argc; i++) {
    const char *path = argv[i];
    tolk_model *m;
    tolk_error err = {0};
    tolk_status st = tolk_model_load(path, params, &m, &err);
    if (st) {
      /* The loader's message already starts with the path. */
      printf("%s\n", err.message);
      if (unreadable(st)) {
        rc = 2;
      } else {
        if (!quiet) printf("%s: invalid (%s: it could not be decoded)\n", path, tolk_status_str(st));
        if (rc == 0) rc = 1;
      }
      continue;
    }
    struct report_ctx ctx = {path};
    st = tolk_model_check(m, print_problem, &ctx, &err);
    if (st == TOLK_OK) {
      if (!quiet) printf("%s: valid\n", path);
    } else if (st == TOLK_ERR_INVALID_MODEL) {
      if (!quiet) printf("%s: invalid (%.*s)\n", path, (int)strcspn(err.message, ";"), err.message);
      if (rc == 0) rc = 1;
    } else {
      fprintf(stderr, "tolk check: %s: %s\n", path, err.message);
      rc = 2;
    }
    tolk_model_free(m);
  }
  return rc;
}
