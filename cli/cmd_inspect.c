/*
 * cmd_inspect.c — `tolk inspect MODEL [--json] [--dot FILE]`: what people
 * open Netron for — producer, IR version, opsets, inputs and outputs with
 * symbolic shapes, node counts by op type, parameters by dtype, external
 * data files, subgraphs — as text or JSON, and the graph as Graphviz dot
 * (the printer is inspect_print.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "inspect_print.h"

enum { OPT_JSON, OPT_DOT, OPT_NO_EXTERNAL };

static const struct cli_option options[] = {
    [OPT_JSON] = {"json", 0, NULL, "print JSON instead of text"},
    [OPT_DOT] = {"dot", 0, "FILE",
                 "also write the graph as Graphviz dot to FILE ('-': stdout,\n"
                 "replacing the report); render with: dot -Tsvg FILE -o graph.svg"},
    [OPT_NO_EXTERNAL] = {"no-external", 0, NULL, "do not map external data files"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "inspect", "[options] MODEL.onnx",
    "Prints the model's producer, IR version and opsets; inputs and outputs with dtype\n"
    "and shape; node count by op type; parameter count and bytes by dtype; external data\n"
    "files; subgraphs and local functions.",
    options, NULL, false};

/* Writes the graph to `path`; returns the exit status. */
static int write_dot(const tolk_model *m, const char *path, bool quiet) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 2;
  }
  inspect_print_dot(m, f);
  if (fclose(f)) {
    perror(path);
    return 2;
  }
  if (!quiet) fprintf(stderr, "tolk inspect: graph written to %s\n", path);
  return 0;
}

int cmd_inspect(int argc, char **argv) {
  tolk_model_params params = tolk_model_default_params();
  bool json = false;
  const char *dot = NULL;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: return a.status;
    case OPT_JSON: json = true; break;
    case OPT_DOT: dot = a.value; break;
    case OPT_NO_EXTERNAL: params.load_external_data = 0; break;
    }
  }
  if (a.first == argc) return cli_usage_error(&verb, "no model given");
  if (a.first + 1 < argc) return cli_usage_error(&verb, "one model at a time");
  const char *path = argv[a.first];
  tolk_model *m;
  tolk_error err = {0};
  if (tolk_model_load(path, params, &m, &err)) return cli_fail("inspect", &err);
  int rc = 0;
  if (dot && !strcmp(dot, "-")) {
    inspect_print_dot(m, stdout);
  } else {
    inspect_print(m, path, params.load_external_data, json ? INSPECT_JSON : INSPECT_TEXT, stdout);
    if (dot) rc = write_dot(m, dot, json);
  }
  tolk_model_free(m);
  return rc;
}
