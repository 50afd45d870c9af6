/*
 * cmd_tokenize.c — `tolk tokenize` and `tolk detokenize`: the Marian
 * tokenizer on the command line, one text (or id list) per argument or per
 * stdin line, so it works in pipes.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct tok_opts {
  const char *model;
  bool pieces, json, keep_special, source;
  int flags;
  int max_length;
};

enum { OPT_MODEL, OPT_PIECES, OPT_JSON, OPT_TARGET, OPT_NO_EOS, OPT_MAX_LENGTH };

static const struct cli_option tokenize_options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR", "folder with source.spm, target.spm, vocab.json"},
    [OPT_PIECES] = {"pieces", 0, NULL, "print the tokens instead of ids"},
    [OPT_JSON] = {"json", 0, NULL, "one JSON object per text: text, ids, tokens, dropped"},
    [OPT_TARGET] = {"target", 0, NULL, "encode with the target side (target.spm)"},
    [OPT_NO_EOS] = {"no-eos", 0, NULL, "do not append </s>"},
    [OPT_MAX_LENGTH] = {"max-length", 0, "N",
                        "truncate to N ids (-1: the model's model_max_length);\n"
                        "the count of dropped ids goes to stderr (or JSON)"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb tokenize_verb = {
    "tokenize", "-m MODEL_DIR [options] [TEXT...]",
    "Encodes each TEXT (or each line of stdin) with the model's Marian tokenizer\n"
    "(source.spm + vocab.json) and prints the ids, as HuggingFace MarianTokenizer does.",
    tokenize_options, NULL, true};

enum { OPT_DETOK_MODEL, OPT_KEEP_SPECIAL, OPT_SOURCE };

static const struct cli_option detokenize_options[] = {
    [OPT_DETOK_MODEL] = {"model", 'm', "DIR", "folder with source.spm, target.spm, vocab.json"},
    [OPT_KEEP_SPECIAL] = {"keep-special", 0, NULL, "keep </s>, <unk>, <pad> (default: skip them)"},
    [OPT_SOURCE] = {"source", 0, NULL, "decode with source.spm"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb detokenize_verb = {
    "detokenize", "-m MODEL_DIR [options] [ID...]",
    "Decodes the ids given as arguments, or each line of stdin (ids separated by\n"
    "spaces or commas), with target.spm as MarianTokenizer.decode does.",
    detokenize_options, NULL, true};

/* Sets o from one tokenize option; false after a usage error. */
static bool tokenize_option(const struct cli_args *a, int opt, struct tok_opts *o) {
  long v;
  switch (opt) {
  case OPT_MODEL: o->model = a->value; break;
  case OPT_PIECES: o->pieces = true; break;
  case OPT_JSON: o->json = true; break;
  case OPT_TARGET: o->flags |= TOLK_TOKENIZE_TARGET; break;
  case OPT_NO_EOS: o->flags |= TOLK_TOKENIZE_NO_EOS; break;
  case OPT_MAX_LENGTH:
    if (!cli_value_long(a, -1, 1 << 30, &v)) return false;
    o->max_length = (int)v;
    break;
  }
  return true;
}

static void detokenize_option(const struct cli_args *a, int opt, struct tok_opts *o) {
  switch (opt) {
  case OPT_DETOK_MODEL: o->model = a->value; break;
  case OPT_KEEP_SPECIAL: o->keep_special = true; break;
  case OPT_SOURCE: o->source = true; break;
  }
}

/* Parses either verb's options into o; returns the index of the first
 * operand, or -1 when the verb is done with *status (--help or an error). */
static int parse_opts(const struct cli_verb *verb, int argc, char **argv, struct tok_opts *o,
                      int *status) {
  bool detok = verb == &detokenize_verb;
  struct cli_args a;
  cli_args_init(&a, verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    *status = opt == CLI_EXIT ? a.status : 2;
    if (opt == CLI_EXIT) return -1;
    if (detok) detokenize_option(&a, opt, o);
    else if (!tokenize_option(&a, opt, o)) return -1;
  }
  const char *why;
  if (!o->model) o->model = cli_default_model(&why);
  if (!o->model) {
    *status = cli_usage_error(verb, "no model: pass -m MODEL_DIR or set TOLK_MODEL");
    return -1;
  }
  return a.first;
}

static int print_encoding(const tolk_tokenizer *tok, const struct tok_opts *o, const char *text,
                          size_t len) {
  tolk_ids ids;
  tolk_error err;
  if (tolk_tokenizer_encode_batch(tok, &text, &len, 1, o->flags, &ids, &err)) return cli_fail("tokenize", &err);
  tolk_tokens tokens = {0};
  if ((o->pieces || o->json) && tolk_tokenizer_tokenize(tok, text, len, o->flags, &tokens, &err)) {
    tolk_ids_free(&ids, 1);
    return cli_fail("tokenize", &err);
  }
  if (o->json) {
    cJSON *obj = cJSON_CreateObject();
    char *copy = malloc(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    cJSON_AddStringToObject(obj, "text", copy);
    free(copy);
    cJSON *arr = cJSON_AddArrayToObject(obj, "ids");
    for (size_t i = 0; i < ids.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids.ids[i]));
    cJSON *toks = cJSON_AddArrayToObject(obj, "tokens");
    for (size_t i = 0; i < tokens.n; i++) cJSON_AddItemToArray(toks, cJSON_CreateString(tokens.tokens[i]));
    cJSON_AddNumberToObject(obj, "dropped", (double)ids.dropped);
    char *s = cJSON_PrintUnformatted(obj);
    puts(s);
    free(s);
    cJSON_Delete(obj);
  } else if (o->pieces) {
    for (size_t i = 0; i < tokens.n; i++) printf("%s%s", i ? " " : "", tokens.tokens[i]);
    putchar('\n');
  } else {
    for (size_t i = 0; i < ids.n; i++) printf("%s%d", i ? " " : "", (int)ids.ids[i]);
    putchar('\n');
  }
  if (ids.dropped && !o->json) fprintf(stderr, "tolk tokenize: truncated: %zu ids dropped\n", ids.dropped);
  tolk_tokens_free(&tokens);
  tolk_ids_free(&ids, 1);
  return 0;
}

static int for_each_stdin_line(int (*fn)(const tolk_tokenizer *, const struct tok_opts *, const char *, size_t),
                               const tolk_tokenizer *tok, const struct tok_opts *o) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  int rc = 0;
  while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
    size_t len = (size_t)got;
    if (len && line[len - 1] == '\n') len--;
    rc = fn(tok, o, line, len);
    fflush(stdout);
  }
  free(line);
  return rc;
}

static tolk_tokenizer *open_tokenizer(const char *verb, const struct tok_opts *o) {
  tolk_tokenizer_params p = tolk_tokenizer_default_params();
  p.max_length = o->max_length;
  tolk_tokenizer *tok = NULL;
  tolk_error err;
  if (tolk_tokenizer_create(o->model, p, &tok, &err)) cli_fail(verb, &err);
  return tok;
}

int cmd_tokenize(int argc, char **argv) {
  struct tok_opts o = {0};
  int status = 2, first = parse_opts(&tokenize_verb, argc, argv, &o, &status);
  if (first < 0) return status;
  tolk_tokenizer *tok = open_tokenizer("tokenize", &o);
  if (!tok) return 2;
  int rc = 0;
  if (first < argc) {
    for (int i = first; i < argc && !rc; i++) rc = print_encoding(tok, &o, argv[i], strlen(argv[i]));
  } else {
    rc = for_each_stdin_line(print_encoding, tok, &o);
  }
  tolk_tokenizer_free(tok);
  return rc;
}

/* Ids separated by spaces or commas, optionally inside [ ]. */
static int print_decoding(const tolk_tokenizer *tok, const struct tok_opts *o, const char *line,
                          size_t len) {
  int32_t *ids = malloc((len / 2 + 1) * sizeof *ids);
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    char c = line[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '[' || c == ']' || c == '\r') {
      i++;
      continue;
    }
    char buf[32];
    size_t k = 0;
    while (i < len && k < sizeof buf - 1 && line[i] != ' ' && line[i] != ',' && line[i] != ']' &&
           line[i] != '\t' && line[i] != '\r')
      buf[k++] = line[i++];
    buf[k] = '\0';
    long v;
    if (!cli_parse_long(buf, -2147483647L - 1, 2147483647L, &v)) {
      fprintf(stderr, "tolk detokenize: '%s' is not an id\n", buf);
      free(ids);
      return 2;
    }
    ids[n++] = (int32_t)v;
  }
  tolk_ids in = {ids, n, 0};
  char *text = NULL;
  tolk_error err;
  int flags = (o->keep_special ? 0 : TOLK_DECODE_SKIP_SPECIAL) | (o->source ? TOLK_DECODE_SOURCE : 0);
  int rc = 0;
  if (tolk_tokenizer_decode_batch(tok, &in, 1, flags, &text, &err)) rc = cli_fail("detokenize", &err);
  else puts(text);
  tolk_strings_free(&text, 1);
  free(ids);
  return rc;
}

int cmd_detokenize(int argc, char **argv) {
  struct tok_opts o = {0};
  int status = 2, first = parse_opts(&detokenize_verb, argc, argv, &o, &status);
  if (first < 0) return status;
  tolk_tokenizer *tok = open_tokenizer("detokenize", &o);
  if (!tok) return 2;
  int rc = 0;
  if (first < argc) {
    /* The arguments together are one id list. */
    size_t total = 0;
    for (int i = first; i < argc; i++) total += strlen(argv[i]) + 1;
    char *line = malloc(total + 1);
    size_t at = 0;
    for (int i = first; i < argc; i++) {
      size_t l = strlen(argv[i]);
      memcpy(line + at, argv[i], l);
      at += l;
      line[at++] = ' ';
    }
    rc = print_decoding(tok, &o, line, at);
    free(line);
  } else {
    rc = for_each_stdin_line(print_decoding, tok, &o);
  }
  tolk_tokenizer_free(tok);
  return rc;
}
