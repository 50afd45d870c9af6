/*
 * cmd_serve.c — `tolk serve`: the HTTP service (tolk_serve.h). This file only
 * turns the command line into a struct tolk_serve_config and calls
 * tolk_serve_run or tolk_serve_check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tolk_serve.h"

enum {
  OPT_MODEL, OPT_HOST, OPT_PORT, OPT_THREADS, OPT_INT8, OPT_INT8_LM_HEAD, OPT_BF16, OPT_BF16_PRODUCTS, OPT_MAX_BATCH_TOKENS, OPT_MAX_BATCH_ROWS, OPT_MAX_STEP_GROWTH, OPT_MAX_WAIT_MS,
  OPT_MAX_QUEUE, OPT_MAX_QUEUE_WAIT, OPT_TIMEOUT, OPT_DRAIN, OPT_CONN_TIMEOUT, OPT_MAX_BODY, OPT_MAX_CHARS,
  OPT_MAX_TEXTS, OPT_MAX_CONNECTIONS, OPT_API_KEYS, OPT_RATE_LIMIT, OPT_CORS_ORIGIN,
  OPT_TRUSTED_PROXY, OPT_ACCESS_LOG, OPT_CHECK, OPT_VMAP
};

static const struct cli_option options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR", "model folder; repeat for several language pairs\n(default: $TOLK_MODEL, else the bundled model)"},
    [OPT_HOST] = {"host", 0, "ADDR", "address to bind"},
    [OPT_PORT] = {"port", 0, "N", "port (0: any free port)"},
    [OPT_THREADS] = {"threads", 0, "N", "intra-op threads per model (default: all cores)"},
    [OPT_INT8] = {"int8", 0, NULL, "use the *_quantized.onnx graphs"},
    [OPT_INT8_LM_HEAD] = {"int8-lm-head", 0, NULL, "multiply the LM head in int8 too (see `tolk translate --help`)"},
    [OPT_BF16] = {"bf16", 0, NULL, "hold the float weights as bfloat16 (see `tolk translate --help`)"},
    [OPT_BF16_PRODUCTS] = {"bf16-products", 0, NULL, "bfloat16 activations and AVX512-BF16 products too (see\n`tolk translate --help`)"},
    [OPT_MAX_BATCH_TOKENS] = {"max-batch-tokens", 0, "N", "rows x padded source tokens in one decoding batch"},
    [OPT_MAX_BATCH_ROWS] = {"max-batch-rows", 0, "N", "rows (beams count) in one decoding batch when a request\njoins it (0: no bound), more wait in the queue; while none\nwaits, a request's sentences join together, up to twice N"},
    [OPT_MAX_STEP_GROWTH] = {"max-step-growth", 0, "G", "bound the rows as measured: a request joins the batch only\nwhile a step of its rows took at most G times a step of one\nsentence (try 1.5; 0: off); rows not timed yet are tried,\nup to twice the most timed; with --max-batch-rows, the smaller"},
    [OPT_MAX_WAIT_MS] = {"max-wait-ms", 0, "N", "an idle scheduler waits up to N ms for company"},
    [OPT_MAX_QUEUE] = {"max-queue", 0, "N", "sentences waiting, all requests together; more: 503"},
    [OPT_MAX_QUEUE_WAIT] = {"max-queue-wait", 0, "S|Nx", "refuse (503) a text that would wait over S s until the\nbatch could hold all of it, at the rate the queue drains,\nor over N times the time a sentence stays in the batch at\nthe current load (0.5x); a quarter of that while the\nqueue stands (overload) (0: only what would miss --timeout)"},
    [OPT_TIMEOUT] = {"timeout", 0, "S", "a request's translation deadline in seconds; past it: 504"},
    [OPT_DRAIN] = {"drain", 0, "S", "on SIGTERM, seconds for the requests in flight"},
    [OPT_CONN_TIMEOUT] = {"conn-timeout", 0, "S", "a request must arrive whole within S s; idle connections close"},
    [OPT_MAX_BODY] = {"max-body", 0, "BYTES", "largest request body (k, M suffixes); more: 413"},
    [OPT_MAX_CHARS] = {"max-chars", 0, "N", "characters per text (0: no limit); more: 400"},
    [OPT_MAX_TEXTS] = {"max-texts", 0, "N", "texts per request (0: no limit); more: 400"},
    [OPT_MAX_CONNECTIONS] = {"max-connections", 0, "N", "open sockets at most; near it, the longest-idle ones are shed"},
    [OPT_API_KEYS] = {"api-keys", 0, "FILE", "require a key from FILE: one a line, [rate=N/min] [chars=N]"},
    [OPT_RATE_LIMIT] = {"rate-limit", 0, "N/min", "requests per minute per client (or key); more: 429"},
    [OPT_CORS_ORIGIN] = {"cors-origin", 0, "ORIGIN", "allow browser requests from ORIGIN (repeat; * for any)"},
    [OPT_TRUSTED_PROXY] = {"trusted-proxy", 0, "CIDR", "believe X-Forwarded-For from these proxies (repeat)"},
    [OPT_ACCESS_LOG] = {"access-log", 0, "FILE|-", "one JSON line per request (- for stdout)"},
    [OPT_CHECK] = {"check", 0, NULL, "validate the flags and the models (manifest, graphs,\na smoke translation), then exit 0 or 1"},
    [OPT_VMAP] = {"vmap", 0, "FILE", "vocabulary shortlist for every model (see `tolk translate --help`)"},
    {NULL, 0, NULL, NULL},
};

/* The defaults are printed from tolk_serve_default_config itself, so the
 * help cannot drift from what the service does. */
static char footer[512];

static const struct cli_verb verb = {
    "serve", "[-m DIR]... [options]",
    "Serves translation over HTTP: the LibreTranslate API (/translate, /languages, /detect),\n"
    "DeepL's (/v2/translate), tolk's own (/v1/translate, with streaming), /health, /ready,\n"
    "/metrics, /openapi.json and a web page at /. Prints 'listening on http://HOST:PORT'\n"
    "when ready; SIGHUP reloads the models, SIGTERM drains and exits 0.",
    options, footer, false};

static void write_footer(void) {
  struct tolk_serve_config d = tolk_serve_default_config();
  snprintf(footer, sizeof footer,
           "Defaults: --host %s --port %d --max-batch-tokens %d --max-batch-rows %d --max-step-growth %g\n"
           "--max-wait-ms %d "
           "--max-queue %d --max-queue-wait %g --timeout %g --drain %g --conn-timeout %g\n"
           "--max-body %zu --max-chars %ld --max-texts %ld --max-connections %d.\n"
           "Exit status: 0 after a drain (or a passing --check), 1 when it cannot start\n"
           "(or --check fails), 2 for a usage error.",
           d.host, d.port, d.max_batch_tokens, d.max_batch_rows, d.max_step_growth, d.max_wait_ms, d.max_queue, d.max_queue_wait_s,
           d.timeout_s, d.drain_s, d.conn_timeout_s, d.max_body, d.max_chars, d.max_texts, d.max_connections);
}

static bool whole(const struct cli_args *a, long lo, long hi, int *n) {
  long v;
  if (!cli_value_long(a, lo, hi, &v)) return false;
  *n = (int)v;
  return true;
}

/* Seconds: a number from 0 to a billion. */
static bool seconds(const struct cli_args *a, double *out) {
  if (!cli_value_double(a, out)) return false;
  if (*out < 0 || *out > 1e9) return cli_bad_value(a, "a number of seconds from 0 to 1e9"), false;
  return true;
}

/* --max-step-growth: 0, or a factor from 1 to 1000. */
static bool step_growth(const struct cli_args *a, double *out) {
  if (!cli_value_double(a, out)) return false;
  if (*out != 0 && !(*out >= 1 && *out <= 1000)) return cli_bad_value(a, "0, or a factor from 1 to 1000 (1.5)"), false;
  return true;
}

/* --max-queue-wait: seconds, or a multiple of a sentence's stay ("0.25x"). */
static bool queue_wait(const struct cli_args *a, struct tolk_serve_config *c) {
  char *end;
  double v = strtod(a->value, &end);
  bool stays = *end == 'x' && end[1] == '\0';
  c->max_queue_wait_s = c->max_queue_wait_stays = 0;
  if (end != a->value && (stays || !*end) && v >= 0 && v <= (stays ? 1000 : 1e9) && !(stays && v == 0)) {
    *(stays ? &c->max_queue_wait_stays : &c->max_queue_wait_s) = v;
    return true;
  }
  return cli_bad_value(a, "seconds from 0 to 1e9 (0.1), or a multiple of a sentence's stay up to 1000 (0.25x)"), false;
}

static bool bytes(const struct cli_args *a, size_t *out) {
  char *end;
  unsigned long long v = strtoull(a->value, &end, 10);
  unsigned long long mul = !strcmp(end, "") ? 1 : !strcmp(end, "k") || !strcmp(end, "K") ? 1024
                           : !strcmp(end, "M") ? 1024 * 1024 : 0;
  if (end == a->value || a->value[0] == '-' || !mul || v == 0 || v > (1ull << 32) / mul)
    return cli_bad_value(a, "a size from 1 to 4G: bytes, or k or M (1M)"), false;
  *out = (size_t)(v * mul);
  return true;
}

static bool rate(const struct cli_args *a, double *out) {
  size_t l = strlen(a->value);
  char num[32], *end;
  if (l > 4 && l - 4 < sizeof num && !strcmp(a->value + l - 4, "/min")) {
    memcpy(num, a->value, l - 4);
    num[l - 4] = '\0';
    *out = strtod(num, &end);
    if (end != num && !*end && *out > 0 && *out <= 1e9) return true;
  }
  return cli_bad_value(a, "a rate such as 60/min"), false;
}

static bool list(const struct cli_args *a, const char **items, size_t *n) {
  if (*n == TOLK_SERVE_MAX_LIST) {
    cli_usage_error(a->verb, "--%s is given more than %d times", a->opt->name, TOLK_SERVE_MAX_LIST);
    return false;
  }
  items[(*n)++] = a->value;
  return true;
}

/* Sets c from one option; false after a usage error. */
static bool serve_option(const struct cli_args *a, int opt, struct tolk_serve_config *c, bool *check) {
  long v;
  switch (opt) {
  case OPT_MODEL: return list(a, c->models, &c->n_models);
  case OPT_HOST: c->host = a->value; return true;
  case OPT_PORT: return whole(a, 0, 65535, &c->port);
  case OPT_THREADS: return whole(a, 1, 1024, &c->threads);
  case OPT_INT8: c->int8 = true; return true;
  case OPT_INT8_LM_HEAD: c->int8_lm_head = true; return true;
  case OPT_BF16: c->bf16 = c->bf16 > TOLK_BF16_WEIGHTS ? c->bf16 : TOLK_BF16_WEIGHTS; return true;
  case OPT_BF16_PRODUCTS: c->bf16 = TOLK_BF16_PRODUCTS; return true;
  case OPT_VMAP: c->vmap = a->value; return true;
  case OPT_MAX_BATCH_TOKENS: return whole(a, 1, 1 << 24, &c->max_batch_tokens);
  case OPT_MAX_BATCH_ROWS: return whole(a, 0, 1 << 20, &c->max_batch_rows);
  case OPT_MAX_STEP_GROWTH: return step_growth(a, &c->max_step_growth);
  case OPT_MAX_WAIT_MS: return whole(a, 0, 10000, &c->max_wait_ms);
  case OPT_MAX_QUEUE: return whole(a, 1, 1 << 20, &c->max_queue);
  case OPT_MAX_QUEUE_WAIT: return queue_wait(a, c);
  case OPT_TIMEOUT: return seconds(a, &c->timeout_s);
  case OPT_DRAIN: return seconds(a, &c->drain_s);
  case OPT_CONN_TIMEOUT: return seconds(a, &c->conn_timeout_s);
  case OPT_MAX_BODY: return bytes(a, &c->max_body);
  case OPT_MAX_CHARS:
    if (!cli_value_long(a, 0, 1L << 30, &v)) return false;
    c->max_chars = v;
    return true;
  case OPT_MAX_TEXTS:
    if (!cli_value_long(a, 0, 1 << 20, &v)) return false;
    c->max_texts = v;
    return true;
  case OPT_MAX_CONNECTIONS: return whole(a, 1, 1 << 16, &c->max_connections);
  case OPT_API_KEYS: c->api_keys = a->value; return true;
  case OPT_RATE_LIMIT: return rate(a, &c->rate_per_min);
  case OPT_CORS_ORIGIN: return list(a, c->cors, &c->n_cors);
  case OPT_TRUSTED_PROXY: return list(a, c->trusted, &c->n_trusted);
  case OPT_ACCESS_LOG: c->access_log = a->value; return true;
  case OPT_CHECK: *check = true; return true;
  }
  return true;
}

int cmd_serve(int argc, char **argv) {
  write_footer();
  struct tolk_serve_config c = tolk_serve_default_config();
  bool check = false;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  int opt;
  while ((opt = cli_next(&a)) >= 0)
    if (!serve_option(&a, opt, &c, &check)) return 2;
  if (opt == CLI_EXIT) return a.status;
  if (a.first < argc) return cli_usage_error(&verb, "unexpected argument '%s'", argv[a.first]);
  if (c.n_models == 0) {
    const char *why;
    const char *dir = cli_default_model(&why);
    if (!dir) return cli_usage_error(&verb, "no model: pass -m DIR or set TOLK_MODEL");
    c.models[c.n_models++] = dir;
  }
  return check ? tolk_serve_check(&c) : tolk_serve_run(&c);
}
