/*
 * tolk.c — the command-line entry point: finds the subcommand and runs it.
 * Each verb lives in cli/cmd_<verb>.c and has its own --help.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const struct cli_command commands[] = {
    {"inspect", "show a model's inputs, outputs, ops, parameters (--json, --dot)", cmd_inspect},
    {"check", "validate a model as onnx.checker does", cmd_check},
    {"tokenize", "text to token ids with a model's Marian tokenizer", cmd_tokenize},
    {"detokenize", "token ids back to text", cmd_detokenize},
    {"run", "run a model on .npy/.pb inputs; compare, save and time outputs", cmd_run},
    {"translate", "translate English text to Chinese with a Marian model", cmd_translate},
    {"info", "describe a translation model folder: files, sizes, languages", cmd_info},
    {"quantize", "quantize a model to int8 as ONNX Runtime's quantize_dynamic does", cmd_quantize},
    {"optimize", "save the graph as tolk optimizes it (folding, fusions), as ORT's offline optimizer", cmd_optimize},
    {"doctor", "check a model folder before a release: integrity, graphs, latency, memory", cmd_doctor},
    {"vmap", "build a vocabulary shortlist (translate --vmap) from parallel text", cmd_vmap},
    {"serve", "serve translation over HTTP (LibreTranslate, DeepL and native APIs)", cmd_serve},
    {NULL, NULL, NULL},
};

bool cli_parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int cli_fail(const char *verb, const tolk_error *err) {
  fprintf(stderr, "tolk %s: %s: %s\n", verb, tolk_status_str(err->status), err->message);
  return 2;
}

const char *cli_default_model(const char **why) {
  const char *env = getenv("TOLK_MODEL");
  if (env && *env) {
    *why = "$TOLK_MODEL";
    return env;
  }
  static const char *const bundled[] = {TOLK_SOURCE_MODEL, TOLK_INSTALLED_MODEL};
  struct stat st;
  *why = "bundled default";
  for (size_t i = 0; i < sizeof bundled / sizeof *bundled; i++)
    if (stat(bundled[i], &st) == 0 && S_ISDIR(st.st_mode)) return bundled[i];
  return NULL;
}

const char *cli_default_sentences(void) {
  static const char *const bundled[] = {TOLK_SOURCE_SENTENCES, TOLK_INSTALLED_SENTENCES};
  struct stat st;
  for (size_t i = 0; i < sizeof bundled / sizeof *bundled; i++)
    if (stat(bundled[i], &st) == 0 && S_ISREG(st.st_mode)) return bundled[i];
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f, "usage: tolk <command> [options]\n\n"
             "tolk %s — run and check ONNX models and translate text on the CPU.\n\n"
             "commands:\n", tolk_version());
  for (const struct cli_command *c = commands; c->name; c++)
    fprintf(f, "  %-12s %s\n", c->name, c->summary);
  fprintf(f, "\nRun 'tolk <command> --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("tolk %s\n", tolk_version());
    return 0;
  }
  for (const struct cli_command *c = commands; c->name; c++)
    if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
  fprintf(stderr, "tolk: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
