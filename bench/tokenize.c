/*
 * tokenize.c — tokenizer throughput: encodes every line of a text file with
 * a SentencePiece model (the sentencepiece stage alone, as the Python
 * binding's encode) and, given a Marian model folder, with the whole Marian
 * tokenizer. One thread; prints MB/s of input for the median of N passes.
 *
 *   bench_tokenize TEXT_FILE MODEL_DIR [PASSES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/spm.h"
#include "tolk.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_tokenize TEXT_FILE MODEL_DIR [PASSES]\n");
    return 2;
  }
  int passes = argc > 3 ? atoi(argv[3]) : 5;
  if (passes < 1 || passes > 100) passes = 5;
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  if (fread(text, 1, (size_t)size, f) != (size_t)size) return 2;
  fclose(f);
  text[size] = '\0';
  size_t n_lines = 0;
  for (long i = 0; i < size; i++) n_lines += text[i] == '\n';
  const char **lines = malloc((n_lines + 1) * sizeof *lines);
  size_t *lens = malloc((n_lines + 1) * sizeof *lens);
  size_t n = 0;
  for (char *p = text, *e; p < text + size; p = e + 1) {
    e = memchr(p, '\n', (size_t)(text + size - p));
    if (!e) e = text + size;
    lines[n] = p;
    lens[n++] = (size_t)(e - p);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/source.spm", argv[2]);
  struct spm_model *m;
  tolk_tokenizer *tok;
  tolk_error err;
  if (spm_model_load_file(path, &m, &err) ||
      tolk_tokenizer_create(argv[2], tolk_tokenizer_default_params(), &tok, &err)) {
    fprintf(stderr, "%s\n", err.message);
    return 2;
  }
  double *t_spm = malloc((size_t)passes * sizeof *t_spm), *t_marian = malloc((size_t)passes * sizeof *t_marian);
  struct spm_encoding enc = {0};
  size_t pieces = 0;
  for (int p = 0; p < passes; p++) {
    double t0 = now();
    pieces = 0;
    for (size_t i = 0; i < n; i++) {
      spm_encode(m, lines[i], lens[i], &enc, &err);
      pieces += enc.n_pieces;
    }
    t_spm[p] = now() - t0;
    t0 = now();
    for (size_t i = 0; i < n; i++) {
      tolk_ids ids;
      if (tolk_tokenizer_encode_batch(tok, &lines[i], &lens[i], 1, 0, &ids, &err) == TOLK_OK)
        tolk_ids_free(&ids, 1);
    }
    t_marian[p] = now() - t0;
  }
  qsort(t_spm, (size_t)passes, sizeof *t_spm, cmp_double);
  qsort(t_marian, (size_t)passes, sizeof *t_marian, cmp_double);
  double mb = (double)size / 1e6;
  printf("tolk spm_encode     %8.2f MB/s  (%zu lines, %zu pieces, median of %d)\n",
         mb / t_spm[passes / 2], n, pieces, passes);
  printf("tolk marian encode  %8.2f MB/s\n", mb / t_marian[passes / 2]);
  spm_encoding_free(&enc);
  spm_model_free(m);
  tolk_tokenizer_free(tok);
  free(t_spm);
  free(t_marian);
  free(lines);
  free(lens);
  free(text);
  return 0;
}
