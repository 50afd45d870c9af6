/*
 * cmd_quantize.c — `tolk quantize IN.onnx OUT.onnx` or `tolk quantize
 * IN_DIR OUT_DIR`: dynamic int8 quantization as ONNX Runtime's
 * quantize_dynamic does it (tolk_model_quantize in tolk.h), for one graph or
 * for every graph of a model folder (each X.onnx to OUT_DIR/X_quantized.onnx);
 * with --calibrate DATA, static quantization as its quantize_static does in
 * the QDQ format, the ranges observed on the samples under DATA (calib.c;
 * for a folder, DATA/X for each graph X.onnx).
 * Prints what was quantized and skipped, with why, and the sizes.
 * Exit status: 0 done, 2 bad usage or a graph that could not be quantized
 * (no output left behind for it).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib.h"
#include "cli.h"

enum {
  OPT_CALIBRATE, OPT_FORMAT, OPT_METHOD, OPT_PERCENTILE, OPT_BINS,
  OPT_PER_CHANNEL, OPT_REDUCE_RANGE, OPT_OP_TYPES, OPT_EXCLUDE, OPT_LM_HEAD, OPT_EVAL, OPT_QUIET
};

static const struct cli_option options[] = {
    [OPT_CALIBRATE] = {"calibrate", 0, "DATA", "static: activation ranges from the samples or sentences DATA (above)"},
    [OPT_FORMAT] = {"format", 0, "FORMAT", "dynamic, or static qdq (the default with --calibrate) or qoperator"},
    [OPT_METHOD] = {"method", 0, "METHOD", "static ranges: minmax (default), entropy or percentile, as ORT's"},
    [OPT_PERCENTILE] = {"percentile", 0, "P", "percentile: the share of values within the range (default 99.999)"},
    [OPT_BINS] = {"bins", 0, "N", "entropy, percentile: histogram bins (default 128, 2048)"},
    [OPT_PER_CHANNEL] = {"per-channel", 0, NULL, "a scale per column of each MatMul weight (default: per tensor)"},
    [OPT_REDUCE_RANGE] = {"reduce-range", 0, NULL, "MatMul weights in [-64, 64] (7 bits), as ORT's reduce_range"},
    [OPT_OP_TYPES] = {"op-types", 0, "LIST", "the op types to quantize, of MatMul,Gather,Transpose (default: all)"},
    [OPT_EXCLUDE] = {"exclude", 0, "NODE", "leave the node named NODE as it is (repeatable)"},
    [OPT_LM_HEAD] = {"lm-head", 0, "yes|no", "quantize the output projection (default yes, as ORT)"},
    [OPT_EVAL] = {"eval", 0, "FILE", "then translate FILE (source[TAB]reference lines) fp32 and int8: chrF"},
    [OPT_QUIET] = {"quiet", 'q', NULL, "print only each graph's summary"},
    {NULL, 0, NULL, NULL},
};

static const struct cli_verb verb = {
    "quantize", "[options] IN.onnx OUT.onnx | IN_DIR OUT_DIR",
    "Quantizes a model dynamically to int8 in ONNX Runtime's quantize_dynamic form:\n"
    "MatMul weights to int8 with DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul,\n"
    "Gather data (embeddings) to uint8 with DequantizeLinear, and a Transpose of such\n"
    "a weight (a tied LM head) moving the quantized tensor; subgraphs included.\n"
    "Everything else is copied byte for byte. Given folders, each X.onnx of IN_DIR\n"
    "(not already *_quantized) becomes OUT_DIR/X_quantized.onnx. Outputs are written\n"
    "to a temporary file and renamed: complete or absent.\n"
    "\n"
    "With --calibrate DATA, static instead, as quantize_static's QDQ format: each\n"
    "MatMul's activations and output go through QuantizeLinear/DequantizeLinear with\n"
    "the int8 scale of the range they took on the samples, its weight is stored int8;\n"
    "--format qoperator writes QLinearMatMul instead, as its QOperator format.\n"
    "DATA holds one folder per sample (or is the only sample), each with input_K.pb or\n"
    "input_K.npy (the K-th graph input, the ONNX test data layout) or NAME.npy/NAME.pb\n"
    "(the input named NAME); for IN_DIR, DATA/X holds the samples of X.onnx (a graph\n"
    "without is skipped). For a translation model folder DATA may also be a text file\n"
    "of source sentences, one a line: each is tokenized and translated greedily through\n"
    "the encoder, decoder and decoder-with-past graphs, every run a sample of its graph,\n"
    "the merged decoder taking each step too; a folder of only the encoder and the\n"
    "merged decoder is translated by the merged decoder alone.\n"
    "Samples must match the graph's inputs; empty or random-looking data, and text\n"
    "mostly unknown to the tokenizer, are refused.",
    options, "exit status: 0 done, 2 bad usage or a model that could not be quantized", false};

struct q_opts {
  tolk_quantize_params p;
  const char *calibrate; /* DATA, or NULL */
  const char *eval;      /* --eval FILE, or NULL */
  tolk_calibration_params cp;
  int format;            /* --format, or -1 */
  const char *op_types[3];
  const char **exclude;
  bool quiet;
};

static void print_line(void *user, const char *line) {
  if (!*(const bool *)user) printf("  %s\n", line);
}

/* `data`: the calibration samples of this graph (static), or NULL; `given`:
 * its calibration already made (from sentences), or NULL. */
static int quantize_one(const char *in, const char *out, const struct q_opts *o, const char *data,
                        const tolk_calibration *given) {
  tolk_quantize_summary s;
  tolk_error err;
  tolk_quantize_params p = o->p;
  tolk_calibration *cal = NULL;
  printf("%s -> %s\n", in, out);
  if (data && cli_calibrate(in, data, o->cp, &cal, &err)) return cli_fail("quantize", &err);
  if (cal) printf("  calibrated on %zu samples of %s\n", tolk_calibration_samples(cal), data);
  if (given) printf("  calibrated on %zu runs of the sentences\n", tolk_calibration_samples(given));
  p.calibration = given ? given : cal;
  bool quiet = o->quiet;
  tolk_status st = tolk_model_quantize(in, out, p, print_line, &quiet, &s, &err);
  tolk_calibration_free(cal);
  if (st) return cli_fail("quantize", &err);
  printf("  %zu quantized, %zu skipped; %.2f MB -> %.2f MB (%.0f %%)\n", s.quantized, s.skipped,
         (double)s.bytes_before / 1e6, (double)s.bytes_after / 1e6,
         s.bytes_before ? 100.0 * (double)s.bytes_after / (double)s.bytes_before : 0.0);
  return 0;
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

/* The calibration of graph `stem` from sentences, or NULL (and *why). */
static const tolk_calibration *text_cal_of(const struct text_cal *tc, const char *stem, size_t len,
                                           const char **why) {
  *why = "only encoder_model, decoder_model, decoder_with_past_model and decoder_model_merged are run by sentences";
  if (len == 13 && !strncmp(stem, "encoder_model", len)) return tc->enc;
  if (len == 13 && !strncmp(stem, "decoder_model", len)) return tc->dec;
  if (len == 23 && !strncmp(stem, "decoder_with_past_model", len)) return tc->past;
  if (len == 20 && !strncmp(stem, "decoder_model_merged", len)) return tc->merged;
  return NULL;
}

static int quantize_folder(const char *in, const char *out, const struct q_opts *o) {
  if (mkdir(out, 0755) && errno != EEXIST) {
    fprintf(stderr, "tolk quantize: %s: cannot create the folder: %s\n", out, strerror(errno));
    return 2;
  }
  /* --calibrate FILE: sentences, run through the folder as translation does. */
  struct text_cal tc = {0};
  struct stat cs;
  bool text = o->calibrate && !stat(o->calibrate, &cs) && S_ISREG(cs.st_mode);
  tolk_error err;
  if (text && cli_calibrate_text(in, o->calibrate, o->cp, &tc, &err)) return cli_fail("quantize", &err);
  if (text)
    printf("calibrated on %zu sentences of %s (%zu tokens, %zu unknown)\n", tc.sentences, o->calibrate, tc.tokens,
           tc.unknown);
  struct dirent **names;
  int n = scandir(in, &names, NULL, alphasort), rc = 0, done = 0;
  for (int i = 0; i < n; i++) {
    const char *f = names[i]->d_name;
    if (!rc && ends_with(f, ".onnx") && !ends_with(f, "_quantized.onnx")) {
      char src[8400], dst[8400], data[8400];
      snprintf(src, sizeof src, "%s/%s", in, f);
      snprintf(dst, sizeof dst, "%s/%.*s_quantized.onnx", out, (int)(strlen(f) - 5), f);
      snprintf(data, sizeof data, "%s/%.*s", o->calibrate ? o->calibrate : "", (int)(strlen(f) - 5), f);
      struct stat st;
      const char *why = NULL;
      const tolk_calibration *given = text ? text_cal_of(&tc, f, strlen(f) - 5, &why) : NULL;
      if (text && !given) {
        printf("%s: skipped, %s\n", src, why);
      } else if (!text && o->calibrate && (stat(data, &st) || !S_ISDIR(st.st_mode))) {
        printf("%s: skipped, no calibration data in %s\n", src, data);
      } else {
        rc = quantize_one(src, dst, o, o->calibrate && !text ? data : NULL, given);
        done++;
      }
    }
    free(names[i]);
  }
  if (n >= 0) free(names);
  cli_text_cal_free(&tc);
  if (n < 0 || (!done && !rc)) {
    if (o->calibrate)
      fprintf(stderr, "tolk quantize: %s: no .onnx graph with calibration data in %s\n", in, o->calibrate);
    else fprintf(stderr, "tolk quantize: %s: no .onnx graphs to quantize\n", in);
    return 2;
  }
  return rc;
}

/* --op-types: a comma-separated list of MatMul, Gather and Transpose. */
static int parse_op_types(const struct cli_args *a, struct q_opts *o) {
  static const char *const known[] = {"MatMul", "Gather", "Transpose"};
  const char *s = a->value;
  size_t n = 0;
  while (*s) {
    size_t len = strcspn(s, ","), k = 0;
    while (k < 3 && (strlen(known[k]) != len || strncmp(s, known[k], len))) k++;
    if (k == 3 || n == 3) return cli_bad_value(a, "a list of MatMul, Gather and Transpose");
    o->op_types[n++] = known[k];
    s += len + (s[len] == ',');
  }
  if (!n) return cli_bad_value(a, "a list of MatMul, Gather and Transpose");
  o->p.op_types = o->op_types;
  o->p.n_op_types = n;
  return 0;
}

int cmd_quantize(int argc, char **argv) {
  struct q_opts o = {.p = tolk_quantize_default_params(), .cp = tolk_calibration_default_params(), .format = -1};
  long bins;
  const char *static_only = NULL; /* a calibration option given */
  o.exclude = calloc((size_t)argc, sizeof *o.exclude);
  if (!o.exclude) return 2;
  o.p.exclude = o.exclude;
  struct cli_args a;
  int rc = -1;
  cli_args_init(&a, &verb, argc, argv);
  for (int opt; rc < 0 && (opt = cli_next(&a)) != CLI_END;) {
    switch (opt) {
    case CLI_EXIT: rc = a.status; break;
    case OPT_CALIBRATE: o.calibrate = a.value; break;
    case OPT_FORMAT:
      if (!strcmp(a.value, "dynamic")) o.format = TOLK_QUANTIZE_DYNAMIC;
      else if (!strcmp(a.value, "qdq")) o.format = TOLK_QUANTIZE_QDQ;
      else if (!strcmp(a.value, "qoperator")) o.format = TOLK_QUANTIZE_QOPERATOR;
      else rc = cli_bad_value(&a, "dynamic, qdq or qoperator");
      break;
    case OPT_METHOD:
      static_only = "--method";
      if (!strcmp(a.value, "minmax")) o.cp.method = TOLK_CALIBRATE_MINMAX;
      else if (!strcmp(a.value, "entropy")) o.cp.method = TOLK_CALIBRATE_ENTROPY;
      else if (!strcmp(a.value, "percentile")) o.cp.method = TOLK_CALIBRATE_PERCENTILE;
      else rc = cli_bad_value(&a, "minmax, entropy or percentile");
      break;
    case OPT_PERCENTILE:
      static_only = "--percentile";
      if (!cli_value_double(&a, &o.cp.percentile)) rc = 2;
      else if (!(o.cp.percentile > 0 && o.cp.percentile <= 100))
        rc = cli_bad_value(&a, "a percentage above 0 and at most 100");
      break;
    case OPT_BINS:
      static_only = "--bins";
      if (cli_value_long(&a, 1, 1 << 20, &bins)) o.cp.num_bins = (int)bins;
      else rc = 2;
      break;
    case OPT_PER_CHANNEL: o.p.per_channel = 1; break;
    case OPT_REDUCE_RANGE: o.p.reduce_range = 1; break;
    case OPT_OP_TYPES: if (parse_op_types(&a, &o)) rc = 2; break;
    case OPT_EXCLUDE: o.exclude[o.p.n_exclude++] = a.value; break;
    case OPT_LM_HEAD:
      if (!strcmp(a.value, "yes") || !strcmp(a.value, "no")) o.p.float_lm_head = !strcmp(a.value, "no");
      else rc = cli_bad_value(&a, "yes or no");
      break;
    case OPT_EVAL: o.eval = a.value; break;
    case OPT_QUIET: o.quiet = true; break;
    }
  }
  if (rc < 0 && o.calibrate && o.format == TOLK_QUANTIZE_DYNAMIC)
    rc = cli_usage_error(&verb, "--calibrate is for static quantization, not --format dynamic");
  if (rc < 0 && !o.calibrate && static_only) rc = cli_usage_error(&verb, "%s needs --calibrate DATA", static_only);
  if (rc < 0 && !o.calibrate && o.format > TOLK_QUANTIZE_DYNAMIC)
    rc = cli_usage_error(&verb, "--format %s needs --calibrate DATA",
                         o.format == TOLK_QUANTIZE_QDQ ? "qdq" : "qoperator");
  if (o.calibrate) o.p.format = o.format > TOLK_QUANTIZE_DYNAMIC ? (tolk_quantize_format)o.format : TOLK_QUANTIZE_QDQ;
  if (rc < 0 && argc - a.first != 2)
    rc = cli_usage_error(&verb, argc - a.first < 2 ? "needs IN and OUT" : "unexpected argument '%s'", argv[a.first + 2]);
  if (rc < 0) {
    const char *in = argv[a.first], *out = argv[a.first + 1];
    struct stat st;
    bool dir = stat(in, &st) == 0 && S_ISDIR(st.st_mode);
    if (o.eval && !dir) rc = cli_usage_error(&verb, "--eval needs a model folder: IN_DIR OUT_DIR");
    else if (dir) rc = quantize_folder(in, out, &o);
    else rc = quantize_one(in, out, &o, o.calibrate, NULL);
    if (!rc && o.eval) rc = cli_quant_eval(in, out, o.eval);
  }
  free(o.exclude);
  return rc;
}
