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

enum { OPT_NO_EXTERNAL, OPT_QUIET };

static const struct cli_option options[] = {
    [OPT_NO_EXTERNAL] = {"no-external", 0, NULL, "do not map external data files (their ranges are still checked)"},
    [OPT_QUIET] = {"quiet", 'q', NULL, "print only problems, not the per-model verdict"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "check", "[options] MODEL.onnx...",
    "Checks each model like onnx.checker: IR version and opsets, a DAG in topological\n"
    "order, every input defined, single assignment of names, ops, attribute names and\n"
    "types against the ONNX schemas, tensor sizes, external data inside the model folder.",
    options, "exit status: 0 valid, 1 invalid, 2 could not read a file or bad usage", true};

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

/* Loads and checks one model, printing what is wrong; returns its exit
 * status (0 valid, 1 invalid, 2 unreadable). */
static int check_one(const char *path, tolk_model_params params, bool quiet) {
  tolk_model *m;
  tolk_error err = {0};
  tolk_status st = tolk_model_load(path, params, &m, &err);
  if (st) {
    /* The loader's message already starts with the path. */
    printf("%s\n", err.message);
    if (unreadable(st)) return 2;
    if (!quiet) printf("%s: invalid (%s: it could not be decoded)\n", path, tolk_status_str(st));
    return 1;
  }
  struct report_ctx ctx = {path};
  int rc = 0;
  st = tolk_model_check(m, print_problem, &ctx, &err);
  if (st == TOLK_OK) {
    if (!quiet) printf("%s: valid\n", path);
  } else if (st == TOLK_ERR_INVALID_MODEL) {
    if (!quiet) printf("%s: invalid (%.*s)\n", path, (int)strcspn(err.message, ";"), err.message);
    rc = 1;
  } else {
    fprintf(stderr, "tolk check: %s: %s\n", path, err.message);
    rc = 2;
  }
  tolk_model_free(m);
  return rc;
}

int cmd_check(int argc, char **argv) {
  tolk_model_params params = tolk_model_default_params();
  bool quiet = false;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: return a.status;
    case OPT_NO_EXTERNAL: params.load_external_data = 0; break;
    case OPT_QUIET: quiet = true; break;
    }
  }
  if (a.first == argc) return cli_usage_error(&verb, "no model given");
  /* The worst result wins: unreadable (2) over invalid (1) over valid. */
  int rc = 0;
  for (int i = a.first; i < argc; i++) {
    int r = check_one(argv[i], params, quiet);
    if (r > rc) rc = r;
  }
  return rc;
}
