/*
 * cmd_info.c — `tolk info`: what a translation model folder holds — the
 * graphs tolk uses with their sizes, whether they match tolk-manifest.json,
 * the model's sizes and special ids, and the target-language tags.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static void file_line(const char *what, const char *path) {
  struct stat st;
  if (!*path) return;
  if (stat(path, &st) == 0) printf("  %-18s %s  (%.1f MB)\n", what, path, (double)st.st_size / 1e6);
  else printf("  %-18s %s  (missing)\n", what, path);
}

int cmd_info(int argc, char **argv) {
  const char *model = NULL, *why = "-m";
  bool int8 = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tolk info [-m MODEL_DIR] [--int8]\n\n"
             "Describes a translation model folder: the graphs tolk runs (fp32, or the\n"
             "*_quantized ones with --int8), checksums, sizes, special ids, language tags.\n"
             "The folder defaults to $TOLK_MODEL, else the bundled demo model; the first\n"
             "line says which model is in use and why.\n");
      return 0;
    }
    if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--int8")) int8 = true;
    else {
      fprintf(stderr, "tolk info: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!model) model = cli_default_model(&why);
  if (!model) {
    fprintf(stderr, "tolk info: no model: pass -m MODEL_DIR or set TOLK_MODEL\n");
    return 2;
  }
  tolk_translator_params p = tolk_translator_default_params();
  p.int8 = int8;
  p.threads = 1;
  tolk_translator *tr;
  tolk_error err;
  if (tolk_translator_create(model, p, &tr, &err)) return cli_fail("info", &err);
  tolk_translator_info in = tolk_translator_describe(tr);
  printf("model in use: %s  (%s)\n", in.folder, why);
  printf("graphs (%s%s):\n", in.int8 ? "int8" : "fp32",
         in.int8 && !int8 ? ", the only ones in the folder" : "");
  file_line("encoder", in.encoder);
  file_line("decoder", in.decoder);
  file_line("decoder_with_past", in.decoder_with_past);
  file_line("decoder_merged", in.decoder_merged);
  printf("checksums: %s\n", in.verified ? "match tolk-manifest.json" : "no tolk-manifest.json");
  printf("sizes: vocab %d, d_model %d, decoder layers %d, heads %d, max positions %d\n", in.vocab_size,
         in.d_model, in.decoder_layers, in.decoder_heads, in.max_positions);
  printf("ids: decoder start %d, eos %d, pad %d\n", (int)in.decoder_start, (int)in.eos, (int)in.pad);
  tolk_generate_params g = tolk_generate_default_params(tr);
  printf("generation: num_beams %d, max_length %d, length_penalty %g\n", g.num_beams, g.max_length,
         (double)g.length_penalty);
  size_t n;
  const char *const *tags = tolk_tokenizer_language_tags(tolk_translator_tokenizer(tr), &n);
  printf("target languages (%zu):", n);
  for (size_t i = 0; i < n; i++) printf(" %s", tags[i]);
  printf("\n");
  tolk_translator_free(tr);
  return 0;
}
