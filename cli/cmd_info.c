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

enum { OPT_MODEL, OPT_INT8 };

static const struct cli_option options[] = {
    [OPT_MODEL] = {"model", 'm', "DIR", "the model folder (default: $TOLK_MODEL, else the bundled demo model)"},
    [OPT_INT8] = {"int8", 0, NULL, "describe the *_quantized.onnx graphs"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "info", "[-m MODEL_DIR] [--int8]",
    "Describes a translation model folder: the graphs tolk runs (fp32, or the\n"
    "*_quantized ones with --int8), checksums, sizes, special ids, language tags.\n"
    "The folder defaults to $TOLK_MODEL, else the bundled demo model; the first\n"
    "line says which model is in use and why.",
    options, NULL, false};

int cmd_info(int argc, char **argv) {
  const char *model = NULL, *why = "-m";
  bool int8 = false;
  struct cli_args a;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: return a.status;
    case OPT_MODEL: model = a.value; break;
    case OPT_INT8: int8 = true; break;
    }
  }
  if (a.first < argc) return cli_usage_error(&verb, "unexpected argument '%s'", argv[a.first]);
  if (!model) model = cli_default_model(&why);
  if (!model) return cli_usage_error(&verb, "no model: pass -m MODEL_DIR or set TOLK_MODEL");
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
