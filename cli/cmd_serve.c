/*
 * cmd_serve.c — `tolk serve`: the HTTP service (src/serve/). This file only
 * turns the command line into a struct serve_config and calls serve_run or
 * serve_check; the options live in one table (long name, argument, what it
 * sets) read by getopt_long, ready to fold into a shared cli/ helper.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve/serve.h"

enum opt_kind { O_FLAG, O_INT, O_SECONDS, O_BYTES, O_STRING, O_LIST, O_RATE };

struct opt {
  const char *name;
  char short_name;
  enum opt_kind kind;
  const char *arg, *help;
  size_t off;       /* where in struct serve_config */
  size_t count_off; /* O_LIST: its counter */
  long lo, hi;      /* O_INT */
};

#define OFF(f) offsetof(struct serve_config, f)

static const struct opt opts[] = {
    {"model", 'm', O_LIST, "DIR", "model folder; repeat for several language pairs (default: the bundled model)", OFF(models), OFF(n_models), 0, 0},
    {"host", 0, O_STRING, "ADDR", "address to bind (default 127.0.0.1)", OFF(host), 0, 0, 0},
    {"port", 0, O_INT, "N", "port (default 8080; 0: any free port)", OFF(port), 0, 0, 65535},
    {"threads", 0, O_INT, "N", "intra-op threads per model (default: all cores)", OFF(threads), 0, 1, 1024},
    {"int8", 0, O_FLAG, NULL, "use the *_quantized.onnx graphs", OFF(int8), 0, 0, 0},
    {"max-batch-tokens", 0, O_INT, "N", "rows x padded source tokens per decoder step (default 4096)", OFF(max_batch_tokens), 0, 1, 1 << 24},
    {"max-wait-ms", 0, O_INT, "N", "an idle scheduler waits this long to batch (default 2)", OFF(max_wait_ms), 0, 0, 10000},
    {"max-queue", 0, O_INT, "N", "sentences waiting, all requests together; more: 503 (default 256)", OFF(max_queue), 0, 1, 1 << 20},
    {"timeout", 0, O_SECONDS, "S", "a request's translation deadline; past it: 504 (default 60)", OFF(timeout_s), 0, 0, 0},
    {"drain", 0, O_SECONDS, "S", "on SIGTERM, time for requests in flight (default 30)", OFF(drain_s), 0, 0, 0},
    {"conn-timeout", 0, O_SECONDS, "S", "a request must arrive whole within S s; idle connections close (default 10)", OFF(conn_timeout_s), 0, 0, 0},
    {"max-body", 0, O_BYTES, "BYTES", "largest request body; more: 413 (default 1M; k, M suffixes)", OFF(max_body), 0, 0, 0},
    {"max-chars", 0, O_INT, "N", "characters per text; more: 400 (default 10000; 0: none)", OFF(max_chars), 0, 0, 1L << 30},
    {"max-texts", 0, O_INT, "N", "texts per request; more: 400 (default 64; 0: none)", OFF(max_texts), 0, 0, 1 << 20},
    {"max-connections", 0, O_INT, "N", "open sockets at most (default 256)", OFF(max_connections), 0, 1, 1 << 16},
    {"api-keys", 0, O_STRING, "FILE", "require a key from FILE: one a line, [rate=N/min] [chars=N]", OFF(api_keys), 0, 0, 0},
    {"rate-limit", 0, O_RATE, "N/min", "requests per minute per client (or key); more: 429", OFF(rate_per_min), 0, 0, 0},
    {"cors-origin", 0, O_LIST, "ORIGIN", "allow browser requests from ORIGIN (repeat; * for any)", OFF(cors), OFF(n_cors), 0, 0},
    {"trusted-proxy", 0, O_LIST, "CIDR", "believe X-Forwarded-For from these proxies (repeat)", OFF(trusted), OFF(n_trusted), 0, 0},
    {"access-log", 0, O_STRING, "FILE|-", "one JSON line per request (- for stdout)", OFF(access_log), 0, 0, 0},
    {"check", 0, O_FLAG, NULL, "validate the flags and the models (manifest, graphs, a smoke translation), then exit 0/1", 0, 0, 0, 0},
};
#define N_OPTS (sizeof opts / sizeof opts[0])

static void serve_usage(FILE *f) {
  fprintf(f, "usage: tolk serve [-m DIR]... [options]\n\n"
             "Serves translation over HTTP: the LibreTranslate API (/translate, /languages, /detect),\n"
             "DeepL's (/v2/translate), tolk's own (/v1/translate, with streaming), /health, /ready,\n"
             "/metrics, /openapi.json and a web page at /. Prints 'listening on http://HOST:PORT'\n"
             "when ready; SIGHUP reloads the models, SIGTERM drains and exits 0.\n\n");
  for (size_t i = 0; i < N_OPTS; i++) {
    char left[48];
    snprintf(left, sizeof left, "%s%s--%s%s%s", opts[i].short_name ? "-m, " : "", "", opts[i].name,
             opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
    fprintf(f, "  %-28s %s\n", left, opts[i].help);
  }
}

static bool parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0) || v > 1e9) return false;
  *out = v;
  return true;
}

static bool parse_bytes(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return false;
  unsigned long long mul = !strcmp(end, "") ? 1 : !strcmp(end, "k") || !strcmp(end, "K") ? 1024
                           : !strcmp(end, "M") ? 1024 * 1024 : 0;
  if (!mul || v == 0 || v > (1ull << 32) / mul) return false;
  *out = (size_t)(v * mul);
  return true;
}

static bool set_option(const struct opt *o, const char *v, struct serve_config *c) {
  char *base = (char *)c + o->off;
  long n;
  switch (o->kind) {
  case O_FLAG: *(bool *)base = true; return true;
  case O_STRING: *(const char **)base = v; return true;
  case O_INT:
    if (!cli_parse_long(v, o->lo, o->hi, &n)) return false;
    if (o->off == OFF(max_chars) || o->off == OFF(max_texts)) *(long *)base = n;
    else *(int *)base = (int)n;
    return true;
  case O_SECONDS: return parse_double(v, (double *)base);
  case O_BYTES: return parse_bytes(v, (size_t *)base);
  case O_RATE: {
    size_t l = strlen(v);
    char num[32];
    if (l < 5 || l - 4 >= sizeof num || strcmp(v + l - 4, "/min")) return false;
    memcpy(num, v, l - 4);
    num[l - 4] = '\0';
    return parse_double(num, (double *)base) && *(double *)base > 0;
  }
  case O_LIST: {
    size_t *count = (size_t *)((char *)c + o->count_off);
    if (*count == SERVE_MAX_LIST) return false;
    ((const char **)base)[(*count)++] = v;
    return true;
  }
  }
  return false;
}

int cmd_serve(int argc, char **argv) {
  struct option longs[N_OPTS + 2];
  for (size_t i = 0; i < N_OPTS; i++)
    longs[i] = (struct option){opts[i].name, opts[i].kind == O_FLAG ? no_argument : required_argument, NULL, (int)(256 + i)};
  longs[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
  longs[N_OPTS + 1] = (struct option){NULL, 0, NULL, 0};
  struct serve_config c = serve_default_config();
  bool check = false;
  optind = 1;
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, "+m:h", longs, NULL)) != -1) {
    if (ch == 'h') {
      serve_usage(stdout);
      return 0;
    }
    const struct opt *o = ch == 'm' ? &opts[0] : ch >= 256 && ch < 256 + (int)N_OPTS ? &opts[ch - 256] : NULL;
    if (o && !strcmp(o->name, "check")) {
      check = true;
      continue;
    }
    if (!o || !set_option(o, optarg, &c)) {
      fprintf(stderr, "tolk serve: unknown option, or a bad or missing value: '%s'\n",
              optind > 0 && optind <= argc ? argv[optind - 1] : "?");
      fprintf(stderr, "Run 'tolk serve --help' for the options.\n");
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tolk serve: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (c.n_models == 0) {
    const char *why;
    const char *dir = cli_default_model(&why);
    if (!dir) {
      fprintf(stderr, "tolk serve: no model: pass -m MODEL_DIR or set TOLK_MODEL\n");
      return 2;
    }
    c.models[c.n_models++] = dir;
  }
  return check ? serve_check(&c) : serve_run(&c);
}
