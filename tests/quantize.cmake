# `tolk quantize` (cli/cmd_quantize.c; the library side is tested by test_onnx_quantize*.c against ONNX
# Runtime's references): a model folder quantized and translated next to ORT's quantized graphs, --exclude
# and --op-types, static quantization of the folder with --calibrate (the merged decoder's If branches included,
# by sentences with or without decoder_model.onnx),
# and the refusals — not a model,
# nothing to quantize, an output folder that does not exist, calibration data naming no input, of another
# shape, empty or random — each with exit status 2, its message and no file left (tests/quantize.sh).
foreach(case folder not-onnx nothing unwritable excluded lm-head static-folder static-methods static-mismatch static-shape
             static-empty static-random static-merged-mismatch text-folder text-merged text-merged-only
             text-no-decoder text-blank text-unknown eval)
  add_test(NAME quantize_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/quantize.sh $<TARGET_FILE:tolk> ${case})
  set_tests_properties(quantize_${case} PROPERTIES LABELS unit)
endforeach()

tolk_usage_error_test(quantize_usage_op_types quantize "--op-types wants a list of MatMul, Gather and Transpose, not 'Conv'"
  --op-types Conv a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_operands quantize "needs IN and OUT" a.onnx)
tolk_usage_error_test(quantize_usage_extra quantize "unexpected argument 'c.onnx'" a.onnx b.onnx c.onnx)
tolk_usage_error_test(quantize_usage_format quantize "--format wants dynamic, qdq or qoperator, not 'int4'"
  --format int4 a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_qdq quantize "--format qdq needs --calibrate DATA" --format qdq a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_method quantize "--method wants minmax, entropy or percentile, not 'kl'"
  --method kl --calibrate d a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_method_alone quantize "--method needs --calibrate DATA" --method entropy a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_percentile quantize "--percentile wants a percentage above 0 and at most 100, not '100.5'"
  --percentile 100.5 --calibrate d a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_lm_head quantize "--lm-head wants yes or no, not 'maybe'" --lm-head maybe a.onnx b.onnx)
tolk_usage_error_test(quantize_usage_eval_file quantize "--eval needs a model folder: IN_DIR OUT_DIR"
  --eval s.tsv ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny/encoder_model.onnx b.onnx)
tolk_usage_error_test(quantize_usage_calibrate_dynamic quantize "--calibrate is for static quantization, not --format dynamic"
  --calibrate d --format dynamic a.onnx b.onnx)

# chrF as `tolk quantize --eval` reports it (cli/chrf.c) against sacrebleu's scores.
add_executable(chrf_check chrf_check.c ${PROJECT_SOURCE_DIR}/cli/chrf.c)
target_compile_options(chrf_check PRIVATE ${TOLK_WARNINGS})
target_link_libraries(chrf_check PRIVATE m)
add_test(NAME chrf_check COMMAND chrf_check)
set_tests_properties(chrf_check PROPERTIES LABELS unit)

# The graphs ONNX Runtime's quantize_static cannot quantize (the merged decoder's If branches), run in ONNX
# Runtime by tests/quantize_ort.py (build-pyvenv from scripts/testenv.sh; skipped, exit 77, without it unless
# CI is set).
foreach(case merged)
  add_test(NAME quantize_ort_${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ort_python.sh ${PROJECT_SOURCE_DIR} quantize_ort.py $<TARGET_FILE:tolk> ${case})
  set_tests_properties(quantize_ort_${case} PROPERTIES LABELS parity SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
