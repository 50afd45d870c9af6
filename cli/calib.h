/*
 * calib.h — calibration data for `tolk quantize --calibrate` (calib.c).
 */
#ifndef TOLK_CLI_CALIB_H
#define TOLK_CLI_CALIB_H

#include "tolk.h"

/* Reads the calibration samples under the folder `data` (the layout is
 * described in calib.c), runs the model at `model` on each and finishes
 * the calibration. On success *out receives a calibration the caller frees
 * with tolk_calibration_free(); on failure *out is NULL and err names the
 * file or input and the sample, or says why the data cannot calibrate. */
tolk_status cli_calibrate(const char *model, const char *data, tolk_calibration_params params,
                          tolk_calibration **out, tolk_error *err);

/* The calibrations of a translation model folder's graphs, made by
 * running sentences through them as translation does (calib_text.c). */
struct text_cal {
  tolk_calibration *enc, *dec, *past; /* dec, past NULL without their graph */
  tolk_calibration *merged;           /* decoder_model_merged.onnx, or NULL */
  size_t sentences, tokens, unknown;  /* source text tokens (no tag, </s> or bare "▁"), <unk> among them */
};

/* Tokenizes each non-blank line of `file` with the folder `dir`'s tokenizer
 * and translates it greedily through encoder_model.onnx, decoder_model.onnx
 * and decoder_with_past_model.onnx (when present), every run a sample of its
 * graph's calibration — each step run by decoder_model_merged.onnx too, when
 * present, with the same inputs; without decoder_model.onnx, by the merged
 * decoder alone on its own outputs — then finishes the calibrations. Refuses
 * a folder with neither decoder, a file with no sentence and one whose
 * tokens are mostly unknown. On failure *tc holds nothing and err names the
 * file (and sentence) or the folder. */
tolk_status cli_calibrate_text(const char *dir, const char *file, tolk_calibration_params params,
                               struct text_cal *tc, tolk_error *err);
void cli_text_cal_free(struct text_cal *tc);

/* The non-blank lines of a text file, without their line ends. */
struct cli_lines {
  char **v;
  size_t n, cap;
};

/* Reads `file` into *l (empty on entry); refuses a file with no non-blank
 * line. Free with cli_lines_free. */
tolk_status cli_read_lines(const char *file, struct cli_lines *l, tolk_error *err);
void cli_lines_free(struct cli_lines *l);

/* The target tag a line without one is given: >>cmn_Hans<< when the
 * vocabulary has it (tolk translate's default), else its first; NULL for a
 * model without tags. */
const char *cli_default_tag(const tolk_tokenizer *tok);

/* `tolk quantize --eval FILE` (quant_eval.c): translates each line of FILE
 * ("source" or "source<TAB>reference") greedily with the fp32 graphs of
 * `in_dir` and with the *_quantized graphs written to `out_dir`, and prints
 * chrF of the quantized translations against the fp32 ones, the share of
 * identical lines and, given references, each side's chrF against them.
 * Returns the exit status (0, or 2 after printing the error). */
int cli_quant_eval(const char *in_dir, const char *out_dir, const char *file);

#endif /* TOLK_CLI_CALIB_H */
