/*
 * cmd_inspect.c — `tolk inspect MODEL [--json] [--dot FILE]`: what people
 * open Netron for — producer, IR version, opsets, inputs and outputs with
 * symbolic shapes, node counts by op type, parameters by dtype, external
 * data files, subgraphs — as text or JSON, and the graph as Graphviz dot.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "inspect_print.h"

static void usage(FILE *f) {
  fprintf(f, "usage: tolk inspect [options] MODEL.onnx\n\n"
             "Prints the model's producer, IR version and opsets; inputs and outputs with dtype\n"
             "and shape; node count by op type; parameter count and bytes by dtype; external data\n"
             "files; subgraphs and local functions.\n\n"
             "options:\n"
             "  --json          print JSON instead of text\n"
             "  --dot FILE      also write the graph as Graphviz dot to FILE ('-': stdout,\n"
             "                  replacing the report); render with: dot -Tsvg FILE -o graph.svg\n"
             "  --no-external   do not map external data files\n"
             "  -h, --help      this text\n");
}

int cmd_inspect(int argc, char **argv) {
  tolk_model_params params = tolk_model_default_params();
  bool json = false;
  const char *dot = NULL, *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--no-external")) {
      params.load_external_data = 0;
    } else if (!strcmp(a, "--dot")) {
      if (++i >= argc) {
        fprintf(stderr, "tolk inspect: --dot needs a file name\n");
        return 2;
      }
      dot = argv[i];
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "tolk inspect: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (path) {
      fprintf(stderr, "tolk inspect: one model at a time\n");
      return 2;
    } else {
      path = a;
    }
  }
  if (!path) {
    usage(stderr);
    return 2;
  }
  tolk_model *m;
  tolk_error err = {0};
  if (tolk_model_load(path, params, &m, &err)) return cli_fail("inspect", &err);
  int rc = 0;
  if (dot && !strcmp(dot, "-")) {
    inspect_print_dot(m, stdout);
  } else {
    inspect_print(m, path, params.load_external_data, json ? INSPECT_JSON : INSPECT_TEXT, stdout);
    if (dot) {
      FILE *f = fopen(dot, "w");
      if (!f) {
        perror(dot);
        rc = 2;
      } else {
        inspect_print_dot(m, f);
        if (fclose(f)) {
          perror(dot);
          rc = 2;
        } else if (!json) {
          fprintf(stderr, "tolk inspect: graph written to %s\n", dot);
        }
      }
    }
  }
  tolk_model_free(m);
  return rc;
}
