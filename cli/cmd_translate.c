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
  const char *model, *to, *input, *output;
  bool json, resume, int8, no_verify, sample;
  int beam, max_new_tokens, threads, batch_tokens, top_k;
  float temperature, top_p;
  unsigned long long seed;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

static void translate_usage(FILE *f) {
  fprintf(f,
          "usage: tolk translate [-m MODEL_DIR] [options] [TEXT...]\n\n"
          "Translates each TEXT; with none, each line of stdin, printed as soon as it is done.\n"
          "Long texts are split into sentences and rejoined; line breaks are kept.\n\n"
          "  -m, --model DIR       model folder (Optimum export layout); default $TOLK_MODEL,\n"
          "                        else the bundled demo model (see `tolk info`)\n"
          "  --to LANG             zh (simplified, default), zh-Hant, yue, or a tag like >>cmn_Hans<<\n"
          "  --beam N              beam size (default: the model's num_beams)\n"
          "  --max-new-tokens N    at most N generated tokens per sentence\n"
          "  --threads N           intra-op threads (default: all cores)\n"
          "  --batch-tokens N      source tokens per batch, padding included (default 4096)\n"
          "  --int8                use the *_quantized.onnx graphs\n"
          "  --no-verify           skip the tolk-manifest.json checksums\n"
          "  --sample              sample instead of searching (--temperature, --top-k, --top-p, --seed)\n"
          "  --json                one JSON object per sentence: source, translation, ids, score, timings\n"
          "  --input FILE          translate FILE line by line ...\n"
          "  --output FILE         ... into FILE (progress on stderr; Ctrl-C keeps finished lines)\n"
          "  --resume              continue a stopped --input/--output job\n");
}

static bool parse_float(const char *s, float *out) {
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || end == s || *end) return false;
  *out = v;
  return true;
}

static int parse_translate(int argc, char **argv, struct tr_opts *o) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    if (!strcmp(a, "--")) return i + 1;
    if (a[0] != '-') break;
    if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--resume")) o->resume = true;
    else if (!strcmp(a, "--int8")) o->int8 = true;
    else if (!strcmp(a, "--no-verify")) o->no_verify = true;
    else if (!strcmp(a, "--sample")) o->sample = true;
    else if (!v) goto bad;
    else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v, i++;
    else if (!strcmp(a, "--to")) o->to = v, i++;
    else if (!strcmp(a, "--input")) o->input = v, i++;
    else if (!strcmp(a, "--output")) o->output = v, i++;
    else if (!strcmp(a, "--beam") && cli_parse_long(v, 1, 64, &n)) o->beam = (int)n, i++;
    else if (!strcmp(a, "--max-new-tokens") && cli_parse_long(v, 1, 1 << 20, &n)) o->max_new_tokens = (int)n, i++;
    else if (!strcmp(a, "--threads") && cli_parse_long(v, 1, 1024, &n)) o->threads = (int)n, i++;
    else if (!strcmp(a, "--batch-tokens") && cli_parse_long(v, 1, 1 << 24, &n)) o->batch_tokens = (int)n, i++;
    else if (!strcmp(a, "--top-k") && cli_parse_long(v, 0, 1 << 24, &n)) o->top_k = (int)n, i++;
    else if (!strcmp(a, "--seed") && cli_parse_long(v, 0, 0x7fffffffL, &n)) o->seed = (unsigned long long)n, i++;
    else if (!strcmp(a, "--temperature") && parse_float(v, &o->temperature) && o->temperature > 0) i++;
    else if (!strcmp(a, "--top-p") && parse_float(v, &o->top_p) && o->top_p > 0 && o->top_p <= 1) i++;
    else goto bad;
    continue;
  bad:
    fprintf(stderr, "tolk translate: unknown option, or a bad or missing value: '%s'\n", a);
    return -1;
  }
  const char *why;
  if (!o->model) o->model = cli_default_model(&why);
  if (!o->model) {
    fprintf(stderr, "tolk translate: no model: pass -m MODEL_DIR or set TOLK_MODEL\n");
    return -1;
  }
  if ((o->input == NULL) != (o->output == NULL)) {
    fprintf(stderr, "tolk translate: --input and --output go together\n");
    return -1;
  }
  return i;
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

static int translate_file(const struct job *j, const struct tr_opts *o) {
  struct lines in = {0};
  int rc = read_lines(o->input, &in);
  if (rc) return rc;
  long skip = o->resume ? resume_point(o->output) : 0;
  if (skip < 0 || (size_t)skip > in.n) {
    fprintf(stderr, "tolk translate: %s does not look like the output of %s (cannot resume)\n", o->output, o->input);
    return 2;
  }
  FILE *out = fopen(o->output, o->resume ? "ab" : "wb");
  if (!out) {
    fprintf(stderr, "tolk translate: %s: %s\n", o->output, strerror(errno));
    return 2;
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, NULL);
  bool tty = isatty(2);
  double t0 = now_s();
  size_t done = (size_t)skip, chunk = 16;
  tolk_error err;
  while (!rc && done < in.n && !interrupted) {
    size_t end = done + chunk < in.n ? done + chunk : in.n;
    /* Lines of a chunk go through as one text: sentences of all of them
     * share batches, and line breaks come back in place. */
    size_t b = in.start[done], e = in.start[end - 1] + in.len[end - 1];
    char *text = malloc(e - b + 1);
    size_t w = 0;
    for (size_t i = done; i < end; i++) {
      memcpy(text + w, in.buf + in.start[i], in.len[i]);
      w += in.len[i];
      if (i + 1 < end) text[w++] = '\n';
    }
    tolk_text_translation t;
    if (tolk_translator_translate_text(j->tr, text, w, j->tag, j->gp, &t, &err)) {
      rc = cli_fail("translate", &err);
    } else {
      size_t lines_out = 1;
      for (const char *p = t.text; *p; p++) lines_out += *p == '\n';
      fputs(t.text, out);
      for (; lines_out < end - done; lines_out++) fputc('\n', out);
      fputc('\n', out);
      fflush(out);
      if (j->json) print_json(text, w, &t, done);
      tolk_text_translation_free(&t);
      done = end;
      if (tty) progress(done, in.n, now_s() - t0, done - (size_t)skip);
    }
    free(text);
  }
  if (tty) fputc('\n', stderr);
  fclose(out);
  if (interrupted) {
    fprintf(stderr, "tolk translate: interrupted: %zu of %zu lines are in %s; run the same command with --resume to continue\n",
            done, in.n, o->output);
    rc = 130;
  } else if (!rc) {
    fprintf(stderr, "tolk translate: %zu lines in %.1f s\n", in.n - (size_t)skip, now_s() - t0);
  }
  free(in.buf);
  free(in.start);
  free(in.len);
  return rc;
}

static tolk_translator *open_translator(const struct tr_opts *o) {
  tolk_translator_params p = tolk_translator_default_params();
  p.threads = o->threads;
  p.int8 = o->int8;
  p.verify = !o->no_verify;
  tolk_translator *tr = NULL;
  tolk_error err;
  if (tolk_translator_create(o->model, p, &tr, &err)) cli_fail("translate", &err);
  return tr;
}

int cmd_translate(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      translate_usage(stdout);
      return 0;
    }
  struct tr_opts o = {0};
  int first = parse_translate(argc, argv, &o);
  if (first < 0) return 2;
  tolk_translator *tr = open_translator(&o);
  if (!tr) return 2;
  tolk_generate_params gp = tolk_generate_default_params(tr);
  if (o.beam) gp.num_beams = o.beam;
  if (o.max_new_tokens) gp.max_new_tokens = o.max_new_tokens;
  if (o.batch_tokens) gp.batch_tokens = o.batch_tokens;
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
