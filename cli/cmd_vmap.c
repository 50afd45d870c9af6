/*
 * cmd_vmap.c — `tolk vmap build`: a vocabulary shortlist (translate --vmap)
 * from parallel text, without word alignment. Both sides are tokenized
 * with the model's tokenizer; for every source piece s and target piece t,
 * c(s,t) counts the sentence pairs holding both, c(s) those holding s. A
 * source piece's line lists the K targets with the highest c(s,t) / c(s)
 * (an estimate of p(t | s); ties by id), leaving out the N most frequent
 * target pieces, which the line with an empty source n-gram lists once for
 * every batch — the two lists of Bergamot's lexical shortlist (its top-K
 * translations and top-N frequent words), with co-occurrence standing in
 * for its alignment probabilities. The file is CTranslate2's vmap format
 * (README, "Vocabulary shortlist"), written to a temporary name and renamed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

enum { OPT_MODEL, OPT_PAIRS, OPT_SOURCE, OPT_TARGET, OPT_TOP_K, OPT_ALWAYS, OPT_MIN_COUNT, OPT_OUTPUT };

static const struct cli_option options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR", "the model whose tokenizer and vocabulary the shortlist is for\n"
                                        "(default: $TOLK_MODEL, else the bundled demo model)"},
    [OPT_PAIRS] = {"pairs", 0, "FILE", "parallel text, one pair a line: the last two tab-separated\n"
                                       "fields are the source and the target (a leading tag column is fine)"},
    [OPT_SOURCE] = {"source", 0, "FILE", "or the source side, one sentence a line ..."},
    [OPT_TARGET] = {"target", 0, "FILE", "... and the target side, line for line"},
    [OPT_TOP_K] = {"top-k", 'k', "K", "targets per source piece (default 100)"},
    [OPT_ALWAYS] = {"always", 'n', "N", "the N most frequent target pieces are always candidates (default 1000)"},
    [OPT_MIN_COUNT] = {"min-count", 0, "C", "keep a pair of pieces seen together in at least C pairs (default 1)"},
    [OPT_OUTPUT] = {"output", 'o', "FILE", "where to write the shortlist"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "vmap build", "[-m MODEL_DIR] (--pairs FILE | --source FILE --target FILE) -o OUT [options]",
    "Builds a vocabulary shortlist for `tolk translate --vmap` from parallel text:\n"
    "for each source piece, the target pieces that co-occur with it most often\n"
    "(per sentence pair, relative to the source piece's count), and a line of the\n"
    "most frequent target pieces for every batch. CTranslate2's vmap format.",
    options, NULL, false};

struct vb_opts {
  const char *model, *pairs, *source, *target, *output;
  long top_k, always, min_count;
};

/* c(s,t): open addressing on (s << 32 | t) + 1, so 0 marks a free slot. */
struct pair_table {
  uint64_t *key;
  uint32_t *count;
  size_t cap, n;
};

enum { MAX_PAIRS = 1 << 28, MAX_LINE = 1 << 20, CHUNK = 512 };

static size_t slot_of(uint64_t k, size_t cap) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1); }

static bool table_grow(struct pair_table *t) {
  size_t cap = t->cap ? 2 * t->cap : 1 << 16;
  uint64_t *key = calloc(cap, sizeof *key);
  uint32_t *count = calloc(cap, sizeof *count);
  if (!key || !count || cap > 2 * (size_t)MAX_PAIRS) {
    free(key);
    free(count);
    return false;
  }
  for (size_t i = 0; i < t->cap; i++)
    if (t->key[i]) {
      size_t j = slot_of(t->key[i], cap);
      while (key[j]) j = (j + 1) & (cap - 1);
      key[j] = t->key[i];
      count[j] = t->count[i];
    }
  free(t->key);
  free(t->count);
  t->key = key;
  t->count = count;
  t->cap = cap;
  return true;
}

static bool table_add(struct pair_table *t, int32_t s, int32_t tg) {
  if (2 * (t->n + 1) > t->cap && !table_grow(t)) return false;
  uint64_t k = ((uint64_t)(uint32_t)s << 32 | (uint32_t)tg) + 1;
  size_t j = slot_of(k, t->cap);
  while (t->key[j] && t->key[j] != k) j = (j + 1) & (t->cap - 1);
  if (!t->key[j]) t->key[j] = k, t->n++;
  t->count[j]++;
  return true;
}

struct counts {
  size_t vocab, pairs;
  uint32_t *src;   /* c(s): sentence pairs holding s */
  uint64_t *tgt;   /* occurrences of t on the target side */
  struct pair_table tab;
  uint8_t *seen_s, *seen_t; /* scratch: pieces of the current pair */
};

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Sorts and dedups ids[0..n) in place; returns the distinct count. */
static size_t distinct(int32_t *ids, size_t n) {
  qsort(ids, n, sizeof *ids, cmp_i32);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!k || ids[i] != ids[k - 1]) ids[k++] = ids[i];
  return k;
}

static bool count_pair(struct counts *c, tolk_ids *s, tolk_ids *t) {
  for (size_t i = 0; i < t->n; i++)
    if (t->ids[i] >= 0 && (size_t)t->ids[i] < c->vocab) c->tgt[t->ids[i]]++;
  size_t ns = distinct(s->ids, s->n), nt = distinct(t->ids, t->n);
  for (size_t i = 0; i < ns; i++) {
    if (s->ids[i] < 0 || (size_t)s->ids[i] >= c->vocab) continue;
    c->src[s->ids[i]]++;
    for (size_t j = 0; j < nt; j++)
      if (t->ids[j] >= 0 && (size_t)t->ids[j] < c->vocab && !table_add(&c->tab, s->ids[i], t->ids[j])) return false;
  }
  c->pairs++;
  return true;
}

/* Tokenizes and counts n pairs of texts. */
static int count_chunk(const tolk_tokenizer *tok, struct counts *c, char **src, char **tgt, size_t n) {
  tolk_ids si[CHUNK], ti[CHUNK];
  tolk_error err;
  if (tolk_tokenizer_encode_batch(tok, (const char *const *)src, NULL, n, TOLK_TOKENIZE_NO_EOS, si, &err))
    return cli_fail("vmap build", &err);
  if (tolk_tokenizer_encode_batch(tok, (const char *const *)tgt, NULL, n,
                                  TOLK_TOKENIZE_NO_EOS | TOLK_TOKENIZE_TARGET, ti, &err)) {
    tolk_ids_free(si, n);
    return cli_fail("vmap build", &err);
  }
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++)
    if (!count_pair(c, &si[i], &ti[i])) {
      fprintf(stderr, "tolk vmap build: out of memory for the co-occurrence counts (%zu pairs of pieces)\n", c->tab.n);
      rc = 2;
    }
  tolk_ids_free(si, n);
  tolk_ids_free(ti, n);
  return rc;
}

/* Reads one line without its newline into *buf; 0 at the end, -1 for a
 * line over MAX_LINE bytes. */
static int read_line(FILE *f, char **buf, size_t *cap) {
  ssize_t n = getline(buf, cap, f);
  if (n < 0) return 0;
  if (n > MAX_LINE) return -1;
  if (n && (*buf)[n - 1] == '\n') (*buf)[--n] = '\0';
  if (n && (*buf)[n - 1] == '\r') (*buf)[--n] = '\0';
  return 1;
}

/* Splits a --pairs line into its last two tab-separated fields. */
static bool split_pair(char *line, char **src, char **tgt) {
  char *t = strrchr(line, '\t');
  if (!t) return false;
  *t = '\0';
  char *s = strrchr(line, '\t');
  *src = s ? s + 1 : line;
  *tgt = t + 1;
  return true;
}

static void free_texts(char **a, size_t n) {
  for (size_t i = 0; i < n; i++) free(a[i]);
}

/* Reads every pair (from --pairs, or --source and --target) and counts it. */
static int count_all(const struct vb_opts *o, const tolk_tokenizer *tok, struct counts *c) {
  FILE *fp = fopen(o->pairs ? o->pairs : o->source, "r");
  FILE *ft = o->pairs ? NULL : fopen(o->target, "r");
  const char *bad = !fp ? (o->pairs ? o->pairs : o->source) : !o->pairs && !ft ? o->target : NULL;
  if (bad) {
    fprintf(stderr, "tolk vmap build: %s: %s\n", bad, strerror(errno));
    if (fp) fclose(fp);
    return 2;
  }
  char *src[CHUNK], *tgt[CHUNK], *l1 = NULL, *l2 = NULL;
  size_t c1 = 0, c2 = 0, n = 0, line = 0;
  int rc = 0;
  for (;;) {
    int r1 = read_line(fp, &l1, &c1), r2 = o->pairs ? r1 : read_line(ft, &l2, &c2);
    line++;
    char *s = l1, *t = l2;
    if (r1 < 0 || r2 < 0) {
      fprintf(stderr, "tolk vmap build: line %zu is longer than %d bytes\n", line, MAX_LINE);
      rc = 2;
    } else if (r1 != r2) {
      fprintf(stderr, "tolk vmap build: %s has fewer lines than %s (%zu)\n", r1 ? o->target : o->source,
              r1 ? o->source : o->target, line - 1);
      rc = 2;
    } else if (r1 && o->pairs && !split_pair(l1, &s, &t)) {
      fprintf(stderr, "tolk vmap build: %s:%zu: no tab between the source and the target\n", o->pairs, line);
      rc = 2;
    } else if (r1 && (!(src[n] = strdup(s)) || !(tgt[n] = strdup(t)))) {
      free(src[n]);
      fprintf(stderr, "tolk vmap build: out of memory\n");
      rc = 2;
    } else if (r1) {
      n++;
    }
    if (!rc && (n == CHUNK || (!r1 && n))) {
      rc = count_chunk(tok, c, src, tgt, n);
      free_texts(src, n);
      free_texts(tgt, n);
      n = 0;
    }
    if (rc || !r1) break;
  }
  free_texts(src, n);
  free_texts(tgt, n);
  free(l1);
  free(l2);
  fclose(fp);
  if (ft) fclose(ft);
  return rc;
}

/* A piece the file can hold: neither empty nor with the format's separators. */
static const char *writable(const tolk_tokenizer *tok, int32_t id) {
  const char *p = tolk_tokenizer_id_to_piece(tok, id);
  return p && *p && !strpbrk(p, " \t\r\n") ? p : NULL;
}

struct cand {
  int32_t s, t;
  uint32_t n;
};

static int cand_cmp(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  if (x->n != y->n) return x->n > y->n ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

static const uint64_t *freq_ctx; /* for qsort */

static int freq_cmp(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (freq_ctx[x] != freq_ctx[y]) return freq_ctx[x] > freq_ctx[y] ? -1 : 1;
  return (x > y) - (x < y);
}

/* Marks the N most frequent target pieces in always[] and writes their line. */
static void write_always(FILE *f, const tolk_tokenizer *tok, const struct counts *c, long n, uint8_t *always) {
  int32_t *ids = malloc(c->vocab * sizeof *ids);
  size_t k = 0;
  for (size_t i = 0; ids && i < c->vocab; i++)
    if (c->tgt[i] && writable(tok, (int32_t)i)) ids[k++] = (int32_t)i;
  freq_ctx = c->tgt;
  if (ids) qsort(ids, k, sizeof *ids, freq_cmp);
  fputc('\t', f);
  for (size_t i = 0; i < k && (long)i < n; i++) {
    always[ids[i]] = 1;
    fprintf(f, "%s%s", i ? " " : "", tolk_tokenizer_id_to_piece(tok, ids[i]));
  }
  fputc('\n', f);
  free(ids);
}

/* One line per source piece: its top-K co-occurring targets not always in. */
static size_t write_rules(FILE *f, const tolk_tokenizer *tok, const struct counts *c, const struct vb_opts *o,
                          const uint8_t *always, struct cand *cs) {
  size_t n = 0, lines = 0;
  for (size_t i = 0; i < c->tab.cap; i++)
    if (c->tab.key[i]) {
      uint64_t k = c->tab.key[i] - 1;
      struct cand x = {(int32_t)(k >> 32), (int32_t)(uint32_t)k, c->tab.count[i]};
      if (x.n >= (uint32_t)o->min_count && !always[x.t] && writable(tok, x.t) && writable(tok, x.s)) cs[n++] = x;
    }
  qsort(cs, n, sizeof *cs, cand_cmp);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    fprintf(f, "%s\t", tolk_tokenizer_id_to_piece(tok, cs[i].s));
    for (; j < n && cs[j].s == cs[i].s; j++)
      if ((long)(j - i) < o->top_k) fprintf(f, "%s%s", j > i ? " " : "", tolk_tokenizer_id_to_piece(tok, cs[j].t));
    fputc('\n', f);
    lines++;
    i = j;
  }
  return lines;
}

/* Writes the shortlist to a temporary file beside OUT, then renames it. */
static int write_vmap(const struct vb_opts *o, const tolk_tokenizer *tok, const struct counts *c) {
  size_t len = strlen(o->output);
  char *tmp = malloc(len + 16);
  uint8_t *always = calloc(c->vocab, 1);
  struct cand *cs = malloc((c->tab.n ? c->tab.n : 1) * sizeof *cs);
  int fd = -1;
  if (tmp) snprintf(tmp, len + 16, "%s.tmp.XXXXXX", o->output);
  if (!tmp || !always || !cs || (fd = mkstemp(tmp)) < 0) {
    fprintf(stderr, "tolk vmap build: %s: %s\n", o->output, tmp && always && cs ? strerror(errno) : "out of memory");
    free(tmp);
    free(always);
    free(cs);
    return 2;
  }
  FILE *f = fdopen(fd, "w");
  if (!f) close(fd);
  size_t lines = 0;
  if (f) {
    write_always(f, tok, c, o->always, always);
    lines = write_rules(f, tok, c, o, always, cs);
  }
  bool ok = f && !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = (f && fclose(f) == 0) && ok;
  if (ok && rename(tmp, o->output) != 0) ok = false;
  if (!ok) {
    fprintf(stderr, "tolk vmap build: %s: %s\n", o->output, strerror(errno));
    unlink(tmp);
  } else {
    fprintf(stderr, "tolk vmap build: %zu sentence pairs, %zu source pieces with candidates, "
                    "%ld always-included targets: %s\n", c->pairs, lines, o->always, o->output);
  }
  free(tmp);
  free(always);
  free(cs);
  return ok ? 0 : 2;
}

static int parse(int argc, char **argv, struct vb_opts *o) {
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    if (opt == CLI_EXIT) return a.status;
    bool ok = true;
    switch (opt) {
    case OPT_MODEL: o->model = a.value; break;
    case OPT_PAIRS: o->pairs = a.value; break;
    case OPT_SOURCE: o->source = a.value; break;
    case OPT_TARGET: o->target = a.value; break;
    case OPT_TOP_K: ok = cli_value_long(&a, 1, 1 << 20, &o->top_k); break;
    case OPT_ALWAYS: ok = cli_value_long(&a, 0, 1 << 24, &o->always); break;
    case OPT_MIN_COUNT: ok = cli_value_long(&a, 1, 1L << 30, &o->min_count); break;
    case OPT_OUTPUT: o->output = a.value; break;
    }
    if (!ok) return 2;
  }
  if (a.first < argc) return cli_usage_error(&verb, "unexpected argument '%s'", argv[a.first]);
  const char *why;
  if (!o->model) o->model = cli_default_model(&why);
  if (!o->model) return cli_usage_error(&verb, "no model: pass -m MODEL_DIR or set TOLK_MODEL");
  if (!o->pairs == !(o->source || o->target) || (!o->pairs && (!o->source || !o->target)))
    return cli_usage_error(&verb, "give --pairs FILE, or --source FILE and --target FILE");
  if (!o->output) return cli_usage_error(&verb, "no output: pass -o FILE");
  return -1;
}

static int vmap_build(int argc, char **argv) {
  struct vb_opts o = {.top_k = 100, .always = 1000, .min_count = 1};
  int rc = parse(argc, argv, &o);
  if (rc >= 0) return rc;
  tolk_tokenizer *tok = NULL;
  tolk_error err;
  if (tolk_tokenizer_create(o.model, tolk_tokenizer_default_params(), &tok, &err)) return cli_fail("vmap build", &err);
  struct counts c = {.vocab = tolk_tokenizer_vocab_size(tok)};
  c.src = calloc(c.vocab, sizeof *c.src);
  c.tgt = calloc(c.vocab, sizeof *c.tgt);
  if (!c.src || !c.tgt) {
    fprintf(stderr, "tolk vmap build: out of memory\n");
    rc = 2;
  } else {
    rc = count_all(&o, tok, &c);
  }
  if (!rc) rc = write_vmap(&o, tok, &c);
  free(c.src);
  free(c.tgt);
  free(c.tab.key);
  free(c.tab.count);
  tolk_tokenizer_free(tok);
  return rc;
}

int cmd_vmap(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "build")) return vmap_build(argc - 1, argv + 1);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: tolk vmap build [options]\n\nVocabulary shortlists for `tolk translate --vmap`; "
           "`tolk vmap build --help` for the options.\n");
    return 0;
  }
  fprintf(stderr, "tolk vmap: %s\nRun 'tolk vmap --help' for its subcommands.\n",
          argc < 2 ? "no subcommand: build" : "unknown subcommand (build is the one)");
  return 2;
}
