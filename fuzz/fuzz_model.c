/*
 * fuzz_model.c — libFuzzer target over the ONNX reader: the input is loaded
 * as a model from memory (tolk_model_load_buffer), checked
 * (tolk_model_check) and rendered by the CLI's inspect printer
 * (cli/inspect_print.c: text, JSON, dot) to /dev/null,
 * and also decoded as a standalone TensorProto and SequenceProto, as test
 * data files are. Seeds in fuzz/corpus/fuzz_model/: small valid models and
 * the malformed cases of tests/test_onnx_malformed.c.
 */
#include <stdint.h>
#include <stdio.h>

#include "inspect_print.h"
#include "onnx/onnx.h"

static void ignore(void *user, const char *line) {
  (void)user;
  (void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *null_out;
  if (!null_out) null_out = fopen("/dev/null", "w");
  tolk_model_params p = tolk_model_default_params();
  tolk_model *m = NULL;
  tolk_error err;
  if (tolk_model_load_buffer(data, size, NULL, p, &m, &err) == TOLK_OK) {
    tolk_model_check(m, ignore, NULL, &err);
    if (null_out) {
      inspect_print(m, "fuzz", p.load_external_data, INSPECT_TEXT, null_out);
      inspect_print(m, "fuzz", p.load_external_data, INSPECT_JSON, null_out);
      inspect_print_dot(m, null_out);
    }
    tolk_model_free(m);
  }
  struct tolk_arena arena;
  tolk_arena_init(&arena, (size_t)256 << 20);
  struct onnx_value *v;
  onnx_value_decode(data, size, ONNX_VALUE_TENSOR, &arena, &v, &err);
  onnx_value_decode(data, size, ONNX_VALUE_SEQUENCE, &arena, &v, &err);
  tolk_arena_release(&arena);
  return 0;
}
