/*
 * quant_eval.c — `tolk quantize --eval FILE MODEL_DIR OUT_DIR`: what the
 * quantization just written costs the translations. The fp32 graphs of
 * MODEL_DIR and the *_quantized graphs of OUT_DIR (joined to MODEL_DIR's
 * tokenizer and config files in a temporary folder of links, no checksums)
 * translate each line of FILE greedily, at most 128 new tokens, with the
 * default target tag; reported: chrF (cli/chrf.c, sacrebleu's chrF2) of the
 * quantized translations against the fp32 ones and the share of identical
 * lines, and, for "source<TAB>reference" lines, both sides' chrF against the
 * references. BLEU with a Chinese tokenization is left to
 * tools/quant_quality.py.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib.h"
#include "chrf.h"
#include "cli.h"

#define EVAL_BATCH 16
#define EVAL_MAX_NEW_TOKENS 128

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

/* Links into `tmp` the *_quantized.onnx graphs of `dir`, or (quantized
 * false) its other files but the graphs and the manifest. */
static bool link_files(const char *dir, const char *tmp, bool quantized) {
  DIR *d = opendir(dir);
  bool ok = d != NULL;
  for (struct dirent *e; ok && (e = readdir(d));) {
    const char *f = e->d_name;
    bool want = quantized ? ends_with(f, "_quantized.onnx")
                          : f[0] != '.' && !ends_with(f, ".onnx") && strcmp(f, "tolk-manifest.json");
    char src[8400], dst[8400], abs[8400];
    if (!want) continue;
    snprintf(src, sizeof src, "%s/%s", dir, f);
    snprintf(dst, sizeof dst, "%s/%s", tmp, f);
    struct stat st;
    if (stat(src, &st) || !S_ISREG(st.st_mode)) continue;
    ok = realpath(src, abs) && !symlink(abs, dst);
  }
  if (d) closedir(d);
  return ok;
}

static void remove_links(const char *tmp) {
  DIR *d = opendir(tmp);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", tmp, e->d_name);
    if (e->d_name[0] != '.') unlink(p);
  }
  if (d) closedir(d);
  rmdir(tmp);
}

/* Translates src[0..n) into out[0..n) in batches. */
static tolk_status translate_all(const tolk_translator *tr, char **src, size_t n, char **out, tolk_error *err) {
  tolk_generate_params gp = tolk_generate_default_params(tr);
  gp.num_beams = 1;
  gp.max_new_tokens = EVAL_MAX_NEW_TOKENS;
  const char *tag = cli_default_tag(tolk_translator_tokenizer(tr));
  tolk_status st = TOLK_OK;
  for (size_t i = 0; !st && i < n; i += EVAL_BATCH) {
    size_t k = n - i < EVAL_BATCH ? n - i : EVAL_BATCH;
    st = tolk_translator_translate(tr, (const char *const *)src + i, k, tag, &gp, out + i, err);
  }
  return st;
}

static void report(char **refs, char **fp32, char **q, size_t n, const char *file) {
  struct chrf vs = {{0}, {0}, {0}}, rf = {{0}, {0}, {0}}, rq = {{0}, {0}, {0}};
  size_t same = 0, n_ref = 0;
  for (size_t i = 0; i < n; i++) {
    chrf_add(&vs, q[i], fp32[i]);
    same += !strcmp(q[i], fp32[i]);
    if (refs[i]) {
      chrf_add(&rf, fp32[i], refs[i]);
      chrf_add(&rq, q[i], refs[i]);
      n_ref++;
    }
  }
  printf("eval on %zu sentences of %s (greedy): int8 against fp32 chrF %.2f, %.1f %% of lines identical\n", n, file,
         chrf_score(&vs), 100.0 * (double)same / (double)n);
  if (n_ref)
    printf("  against the references (%zu): chrF fp32 %.2f, int8 %.2f (%+.2f)\n", n_ref, chrf_score(&rf),
           chrf_score(&rq), chrf_score(&rq) - chrf_score(&rf));
}

int cli_quant_eval(const char *in_dir, const char *out_dir, const char *file) {
  tolk_error err = {TOLK_OK, ""};
  struct cli_lines l = {NULL, 0, 0};
  char tmp[] = "/tmp/tolk-eval-XXXXXX";
  tolk_translator *fp = NULL, *q = NULL;
  tolk_translator_params tp = tolk_translator_default_params();
  tolk_status st = cli_read_lines(file, &l, &err);
  char **refs = calloc(l.n + 1, sizeof *refs), **a = calloc(l.n + 1, sizeof *a), **b = calloc(l.n + 1, sizeof *b);
  if (!st && (!refs || !a || !b)) {
    snprintf(err.message, sizeof err.message, "out of memory");
    st = err.status = TOLK_ERR_NO_MEMORY;
  }
  for (size_t i = 0; !st && i < l.n; i++) {
    char *tab = strchr(l.v[i], '\t');
    if (tab) *tab = '\0', refs[i] = tab + 1;
  }
  bool made = !st && mkdtemp(tmp);
  if (!st && (!made || !link_files(in_dir, tmp, false) || !link_files(out_dir, tmp, true))) {
    snprintf(err.message, sizeof err.message, "%s: cannot link the quantized model folder together", tmp);
    st = err.status = TOLK_ERR_IO;
  }
  if (!st) st = tolk_translator_create(in_dir, tp, &fp, &err);
  tp.int8 = 1;
  tp.verify = 0;
  if (!st) st = tolk_translator_create(tmp, tp, &q, &err);
  if (!st) st = translate_all(fp, l.v, l.n, a, &err);
  if (!st) st = translate_all(q, l.v, l.n, b, &err);
  if (!st) report(refs, a, b, l.n, file);
  tolk_translator_free(fp);
  tolk_translator_free(q);
  if (made) remove_links(tmp);
  if (a) tolk_strings_free(a, l.n);
  if (b) tolk_strings_free(b, l.n);
  free(a);
  free(b);
  free(refs);
  cli_lines_free(&l);
  return st ? cli_fail("quantize", &err) : 0;
}
