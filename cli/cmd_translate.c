/*
 * cmd_translate.c — `tolk translate`: texts from the arguments, from stdin
 * line by line (each printed as soon as it is done, so it works in pipes), or
 * from a file into a file with a progress bar, an orderly stop on Ctrl-C and
 * --resume. `tolk info` describes a model folder.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

struct tr_opts {
  const char *model, *to, *input, *output, *vmap;
  bool json, resume, int8, int8_lm_head, no_verify, sample;
  int bf16; /* TOLK_BF16_* */
  int beam, max_new_tokens, threads, batch_tokens, top_k;
  float temperature, top_p;
  unsigned long long seed;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

enum {
  OPT_MODEL, OPT_TO, OPT_BEAM, OPT_MAX_NEW_TOKENS, OPT_THREADS, OPT_BATCH_TOKENS, OPT_INT8, OPT_INT8_LM_HEAD, OPT_BF16, OPT_BF16_PRODUCTS,
  OPT_NO_VERIFY, OPT_SAMPLE, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SEED, OPT_JSON,
  OPT_INPUT, OPT_OUTPUT, OPT_RESUME, OPT_VMAP
};

static const struct cli_option options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR",
                   "model folder (Optimum export layout); default $TOLK_MODEL,\n"
                   "else the bundled demo model (see `tolk info`)"},
    [OPT_TO] = {"to", 0, "LANG", "zh (simplified, default), zh-Hant, yue, or a tag like >>cmn_Hans<<"},
    [OPT_BEAM] = {"beam", 0, "N", "beam size (default: the model's num_beams)"},
    [OPT_MAX_NEW_TOKENS] = {"max-new-tokens", 0, "N", "at most N generated tokens per sentence"},
    [OPT_THREADS] = {"threads", 0, "N", "intra-op threads (default: all cores)"},
    [OPT_BATCH_TOKENS] = {"batch-tokens", 0, "N", "source tokens per batch, padding included (default 4096)"},
    [OPT_INT8] = {"int8", 0, NULL, "use the *_quantized.onnx graphs"},
    [OPT_INT8_LM_HEAD] = {"int8-lm-head", 0, NULL,
                          "multiply the LM head (output projection) in int8 too:\n"
                          "faster, 4x less memory for it, logits within its quantization error"},
    [OPT_BF16] = {"bf16", 0, NULL,
                  "hold the float weight matrices as bfloat16, computing in fp32:\n"
                  "half their memory, ~2x faster one sentence at a time (fp32 models)"},
    [OPT_BF16_PRODUCTS] = {"bf16-products", 0, NULL,
                           "--bf16, and the activations rounded to bfloat16 too, the products\n"
                           "AVX512-BF16's: ~2x faster again in batches and beams (CPUs with it)"},
    [OPT_NO_VERIFY] = {"no-verify", 0, NULL, "skip the tolk-manifest.json checksums"},
    [OPT_SAMPLE] = {"sample", 0, NULL, "sample instead of searching (--temperature, --top-k, --top-p, --seed)"},
    [OPT_TEMPERATURE] = {"temperature", 0, "T", "sampling temperature, above 0"},
    [OPT_TOP_K] = {"top-k", 0, "K", "sample from the K most likely tokens (0: all)"},
    [OPT_TOP_P] = {"top-p", 0, "P", "sample from the most likely tokens holding P of the mass, in (0, 1]"},
    [OPT_SEED] = {"seed", 0, "N", "the sampling seed"},
    [OPT_JSON] = {"json", 0, NULL, "one JSON object per sentence: source, translation, ids, score, timings"},
    [OPT_INPUT] = {"input", 0, "FILE", "translate FILE line by line ..."},
    [OPT_OUTPUT] = {"output", 0, "FILE", "... into FILE (progress on stderr; Ctrl-C keeps finished lines)"},
    [OPT_RESUME] = {"resume", 0, NULL, "continue a stopped --input/--output job"},
    [OPT_VMAP] = {"vmap", 0, "FILE",
                  "vocabulary shortlist (CTranslate2's vmap format, `tolk vmap build`):\n"
                  "the LM head computes only the batch's candidate tokens"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "translate", "[-m MODEL_DIR] [options] [TEXT...]",
    "Translates each TEXT; with none, each line of stdin, printed as soon as it is done.\n"
    "Long texts are split into sentences and rejoined; line breaks are kept.",
    options, NULL, true};

/* The option's value as a whole number in [lo, hi] into *n; false after a
 * usage error. */
static bool whole(const struct cli_args *a, long lo, long hi, int *n) {
  long v;
  if (!cli_value_long(a, lo, hi, &v)) return false;
  *n = (int)v;
  return true;
}

/* The option's value as a number above 0 (and at most 1 when `unit`) into
 * *out; false after a usage error. */
static bool fraction(const struct cli_args *a, bool unit, float *out) {
  double v;
  if (!cli_value_double(a, &v)) return false;
  if (v <= 0 || (unit && v > 1)) {
    cli_bad_value(a, unit ? "a number above 0 and at most 1" : "a number above 0");
    return false;
  }
  *out = (float)v;
  return true;
}

/* Sets o from one option; false after a usage error. */
static bool translate_option(const struct cli_args *a, int opt, struct tr_opts *o) {
  long seed;
  switch (opt) {
  case OPT_MODEL: o->model = a->value; return true;
  case OPT_TO: o->to = a->value; return true;
  case OPT_BEAM: return whole(a, 1, 64, &o->beam);
  case OPT_MAX_NEW_TOKENS: return whole(a, 1, 1 << 20, &o->max_new_tokens);
  case OPT_THREADS: return whole(a, 1, 1024, &o->threads);
  case OPT_BATCH_TOKENS: return whole(a, 1, 1 << 24, &o->batch_tokens);
  case OPT_INT8: o->int8 = true; return true;
  case OPT_INT8_LM_HEAD: o->int8_lm_head = true; return true;
  case OPT_BF16: o->bf16 = o->bf16 > TOLK_BF16_WEIGHTS ? o->bf16 : TOLK_BF16_WEIGHTS; return true;
  case OPT_BF16_PRODUCTS: o->bf16 = TOLK_BF16_PRODUCTS; return true;
  case OPT_NO_VERIFY: o->no_verify = true; return true;
  case OPT_SAMPLE: o->sample = true; return true;
  case OPT_TEMPERATURE: return fraction(a, false, &o->temperature);
  case OPT_TOP_K: return whole(a, 0, 1 << 24, &o->top_k);
  case OPT_TOP_P: return fraction(a, true, &o->top_p);
  case OPT_SEED:
    if (!cli_value_long(a, 0, 0x7fffffffL, &seed)) return false;
    o->seed = (unsigned long long)seed;
    return true;
  case OPT_JSON: o->json = true; return true;
  case OPT_INPUT: o->input = a->value; return true;
  case OPT_OUTPUT: o->output = a->value; return true;
  case OPT_RESUME: o->resume = true; return true;
  case OPT_VMAP: o->vmap = a->value; return true;
  }
  return true;
}

/* Parses the options into o; returns the index of the first text, or -1
 * when the verb is done with *status (--help or a usage error). */
static int parse_translate(int argc, char **argv, struct tr_opts *o, int *status) {
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    *status = opt == CLI_EXIT ? a.status : 2;
    if (opt == CLI_EXIT || !translate_option(&a, opt, o)) return -1;
  }
  const char *why, *problem = NULL;
  if (!o->model) o->model = cli_default_model(&why);
  if (!o->model) problem = "no model: pass -m MODEL_DIR or set TOLK_MODEL";
  else if ((o->input == NULL) != (o->output == NULL)) problem = "--input and --output go together";
  if (problem) {
    *status = cli_usage_error(&verb, "%s", problem);
    return -1;
  }
  return a.first;
}

/* The tag for --to, checked against the model's tags; NULL when the model
 * has none (a single-target model needs no tag). */
static int resolve_tag(const tolk_tokenizer *tok, const char *to, const char **tag) {
  size_t n;
  const char *const *tags = tolk_tokenizer_language_tags(tok, &n);
  *tag = NULL;
  if (n == 0) {
    if (to) fprintf(stderr, "tolk translate: this model has no target-language tags; --to ignored\n");
    return 0;
  }
  static const char *const map[][4] = {
      {"zh", ">>cmn_Hans<<", ">>cmn<<", ">>zho_Hans<<"},    {"zh-Hans", ">>cmn_Hans<<", ">>cmn<<", NULL},
      {"zh-Hant", ">>cmn_Hant<<", ">>zho_Hant<<", NULL},     {"zh-TW", ">>cmn_Hant<<", NULL, NULL},
      {"yue", ">>yue_Hant<<", ">>yue_Hans<<", ">>yue<<"},    {"yue-Hans", ">>yue_Hans<<", NULL, NULL},
      {"yue-Hant", ">>yue_Hant<<", NULL, NULL}};
  if (!to) to = "zh";
  if (!strncmp(to, ">>", 2)) {
    if (tolk_tokenizer_piece_to_id(tok, to) >= 0) {
      *tag = to;
      return 0;
    }
  } else {
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
      if (strcmp(map[i][0], to) != 0) continue;
      for (int k = 1; k < 4 && map[i][k]; k++)
        if (tolk_tokenizer_piece_to_id(tok, map[i][k]) >= 0) {
          *tag = map[i][k];
          return 0;
        }
    }
  }
  fprintf(stderr, "tolk translate: the model has no tag for '%s'; its tags:", to);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", tags[i]);
  fprintf(stderr, "\n");
  return 2;
}

static void print_json(const char *text, size_t len, const tolk_text_translation *t, size_t line0) {
  for (size_t i = 0; i < t->n_sentences; i++) {
    const tolk_sentence *s = &t->sentences[i];
    cJSON *o = cJSON_CreateObject();
    char *src = strndup(text + s->begin, s->end - s->begin);
    cJSON_AddNumberToObject(o, "line", (double)(line0 + s->line + 1));
    cJSON_AddStringToObject(o, "source", src ? src : "");
    cJSON_AddStringToObject(o, "translation", s->translation);
    cJSON *ids = cJSON_AddArrayToObject(o, "ids");
    for (size_t k = 0; k < s->n_ids; k++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(s->ids[k]));
    cJSON_AddNumberToObject(o, "score", s->score);
    cJSON *tm = cJSON_AddObjectToObject(o, "timings_ms");
    cJSON_AddNumberToObject(tm, "tokenize", t->tokenize_ms);
    cJSON_AddNumberToObject(tm, "generate", t->generate_ms);
    cJSON_AddNumberToObject(tm, "decode", t->decode_ms);
    char *out = cJSON_PrintUnformatted(o);
    puts(out);
    free(out);
    free(src);
    cJSON_Delete(o);
  }
  (void)len;
}

struct job {
  const tolk_translator *tr;
  const tolk_generate_params *gp;
  const char *tag;
  bool json;
};

static int translate_one(const struct job *j, const char *text, size_t len, size_t line0) {
  tolk_text_translation t;
  tolk_error err;
  if (tolk_translator_translate_text(j->tr, text, len, j->tag, j->gp, &t, &err)) return cli_fail("translate", &err);
  if (j->json) print_json(text, len, &t, line0);
  else puts(t.text);
  fflush(stdout);
  tolk_text_translation_free(&t);
  return 0;
}

static int translate_stdin(const struct job *j) {
  char *line = NULL;
  size_t cap = 0, no = 0;
  ssize_t got;
  int rc = 0;
  while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
    size_t len = (size_t)got;
    if (len && line[len - 1] == '\n') len--;
    if (len && line[len - 1] == '\r') len--;
    rc = translate_one(j, line, len, no++);
  }
  free(line);
  return rc;
}

/* ---------------------------------------------------------- file jobs */

struct lines {
  char *buf;
  size_t *start, *len;
  size_t n;
};

static int read_lines(const char *path, struct lines *l) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tolk translate: %s: %s\n", path, strerror(errno));
    return 2;
  }
  size_t cap = 1 << 16, size = 0;
  l->buf = malloc(cap);
  size_t got;
  while (l->buf && (got = fread(l->buf + size, 1, cap - size, f)) > 0) {
    size += got;
    if (size == cap) l->buf = realloc(l->buf, cap *= 2);
  }
  fclose(f);
  if (!l->buf) return 2;
  size_t n = 0;
  for (size_t i = 0; i < size; i++) n += l->buf[i] == '\n';
  n += size && l->buf[size - 1] != '\n';
  l->start = malloc((n + 1) * sizeof *l->start);
  l->len = malloc((n + 1) * sizeof *l->len);
  l->n = 0;
  for (size_t b = 0; b < size && l->start && l->len;) {
    char *nl = memchr(l->buf + b, '\n', size - b);
    size_t e = nl ? (size_t)(nl - l->buf) : size;
    size_t le = e;
    if (le > b && l->buf[le - 1] == '\r') le--;
    l->start[l->n] = b;
    l->len[l->n++] = le - b;
    b = e + 1;
  }
  return 0;
}

/* Lines already complete in a stopped job's output; a partial last line is
 * cut off so the job restarts cleanly after it. */
static long resume_point(const char *path) {
  FILE *f = fopen(path, "rb+");
  if (!f) return 0;
  long done = 0, last_nl = -1, pos = 0;
  int c;
  while ((c = fgetc(f)) != EOF) {
    if (c == '\n') done++, last_nl = pos;
    pos++;
  }
  fclose(f);
  if (truncate(path, last_nl + 1) != 0) return -1;
  return done;
}

static void progress(size_t done, size_t total, double elapsed, size_t done_now) {
  double rate = elapsed > 0 ? (double)done_now / elapsed : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu lines  %.1f lines/s  ETA %dm%02ds ", fill,
          "##############################", width - fill, "", done, total, rate, (int)eta / 60, (int)eta % 60);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void lines_free(struct lines *l) {
  free(l->buf);
  free(l->start);
  free(l->len);
}

/* Lines [from, to) of `in` go through as one text — sentences of all of them
 * share batches, and line breaks come back in place — and their translation
 * is written to `out` as as many lines. */
static int translate_chunk(const struct job *j, const struct lines *in, size_t from, size_t to,
                           FILE *out) {
  size_t b = in->start[from], e = in->start[to - 1] + in->len[to - 1];
  char *text = malloc(e - b + 1);
  if (!text) return 2;
  size_t w = 0;
  for (size_t i = from; i < to; i++) {
    memcpy(text + w, in->buf + in->start[i], in->len[i]);
    w += in->len[i];
    if (i + 1 < to) text[w++] = '\n';
  }
  tolk_text_translation t;
  tolk_error err;
  int rc = 0;
  if (tolk_translator_translate_text(j->tr, text, w, j->tag, j->gp, &t, &err)) {
    rc = cli_fail("translate", &err);
  } else {
    size_t lines_out = 1;
    for (const char *p = t.text; *p; p++) lines_out += *p == '\n';
    fputs(t.text, out);
    for (; lines_out < to - from; lines_out++) fputc('\n', out);
    fputc('\n', out);
    fflush(out);
    if (j->json) print_json(text, w, &t, from);
    tolk_text_translation_free(&t);
  }
  free(text);
  return rc;
}

/* Opens the output for a new job, or for --resume after the lines already
 * done (*skip); NULL after printing why not. */
static FILE *open_output(const struct tr_opts *o, size_t n_lines, size_t *skip) {
  long done = o->resume ? resume_point(o->output) : 0;
  if (done < 0 || (size_t)done > n_lines) {
    fprintf(stderr, "tolk translate: %s does not look like the output of %s (cannot resume)\n", o->output, o->input);
    return NULL;
  }
  *skip = (size_t)done;
  FILE *out = fopen(o->output, o->resume ? "ab" : "wb");
  if (!out) fprintf(stderr, "tolk translate: %s: %s\n", o->output, strerror(errno));
  return out;
}

static int translate_file(const struct job *j, const struct tr_opts *o) {
  struct lines in = {0};
  int rc = read_lines(o->input, &in);
  size_t skip = 0;
  FILE *out = rc ? NULL : open_output(o, in.n, &skip);
  if (!out) {
    lines_free(&in);
    return 2;
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, NULL);
  bool tty = isatty(2);
  double t0 = now_s();
  size_t done = skip, chunk = 16;
  while (!rc && done < in.n && !interrupted) {
    size_t end = done + chunk < in.n ? done + chunk : in.n;
    if (!(rc = translate_chunk(j, &in, done, end, out))) done = end;
    if (!rc && tty) progress(done, in.n, now_s() - t0, done - skip);
  }
  if (tty) fputc('\n', stderr);
  fclose(out);
  if (interrupted) {
    fprintf(stderr, "tolk translate: interrupted: %zu of %zu lines are in %s; run the same command with --resume to continue\n",
            done, in.n, o->output);
    rc = 130;
  } else if (!rc) {
    fprintf(stderr, "tolk translate: %zu lines in %.1f s\n", in.n - skip, now_s() - t0);
  }
  lines_free(&in);
  return rc;
}

static tolk_translator *open_translator(const struct tr_opts *o) {
  tolk_translator_params p = tolk_translator_default_params();
  p.threads = o->threads;
  p.int8 = o->int8;
  p.int8_lm_head = o->int8_lm_head;
  p.bf16 = o->bf16;
  p.verify = !o->no_verify;
  p.vmap = o->vmap;
  tolk_translator *tr = NULL;
  tolk_error err;
  if (tolk_translator_create(o->model, p, &tr, &err)) cli_fail("translate", &err);
  tolk_vmap_info vi;
  /* Pieces the vocabulary lacks are no error (a shortlist built for another
   * model's vocabulary still loads), but they are worth knowing about. */
  if (tr && tolk_translator_vmap_info(tr, &vi) && (vi.unknown_sources || vi.unknown_targets))
    fprintf(stderr, "tolk translate: %s: %zu of %zu lines name a source piece not in the vocabulary (skipped), "
            "%zu target pieces not in it (left out)\n", o->vmap, vi.unknown_sources, vi.lines, vi.unknown_targets);
  return tr;
}

int cmd_translate(int argc, char **argv) {
  struct tr_opts o = {0};
  int status = 2, first = parse_translate(argc, argv, &o, &status);
  if (first < 0) return status;
  tolk_translator *tr = open_translator(&o);
  if (!tr) return 2;
  tolk_generate_params gp = tolk_generate_default_params(tr);
  if (o.beam) gp.num_beams = o.beam;
  if (o.max_new_tokens) gp.max_new_tokens = o.max_new_tokens;
  if (o.batch_tokens) gp.batch_tokens = o.batch_tokens;
  gp.output_scores = o.json; /* only --json prints a score */
  if (o.sample) {
    gp.do_sample = 1;
    gp.num_beams = 1;
    gp.seed = o.seed;
    if (o.temperature > 0) gp.temperature = o.temperature;
    if (o.top_k) gp.top_k = o.top_k;
    if (o.top_p > 0) gp.top_p = o.top_p;
  }
  struct job j = {tr, &gp, NULL, o.json};
  int rc = resolve_tag(tolk_translator_tokenizer(tr), o.to, &j.tag);
  if (!rc) {
    if (o.input) rc = translate_file(&j, &o);
    else if (first < argc)
      for (int i = first; i < argc && !rc; i++) rc = translate_one(&j, argv[i], strlen(argv[i]), 0);
    else rc = translate_stdin(&j);
  }
  tolk_translator_free(tr);
  return rc;
}
