# `tolk optimize` (cli/cmd_optimize.c; src/exec/optimize.c, src/ir/rewrite.c, src/ir/fuse.c,
# src/onnx/write.c): marian-tiny's graphs optimized at every level, checked and run by tolk against
# the fixture's ONNX Runtime outputs; the refusals, each with exit status 2, its message and no file
# left (tests/optimize.sh). tests/optimize.py (label parity) checks the written graphs with
# onnx.checker and runs them in ONNX Runtime next to the originals (build-pyvenv from
# scripts/testenv.sh; skipped, exit 77, without it unless CI is set).
foreach(case golden-encoder_model golden-decoder_model golden-decoder_with_past_model
             golden-decoder_model_merged not-onnx missing unwritable same-file)
  add_test(NAME optimize_${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/optimize.sh $<TARGET_FILE:tolk> $<TARGET_FILE:conformance> ${case})
  set_tests_properties(optimize_${case} PROPERTIES LABELS unit)
endforeach()

foreach(case marian gelu fastgelu gemm layernorm shapes limits skiplayernorm layout mmifloat)
  add_test(NAME optimize_ort_${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ort_python.sh ${PROJECT_SOURCE_DIR} optimize.py $<TARGET_FILE:tolk> ${case}
                   $<TARGET_FILE:conformance>)
  set_tests_properties(optimize_ort_${case} PROPERTIES LABELS parity SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

tolk_usage_error_test(optimize_usage_level optimize "--level wants basic, extended or all, not 'max'"
  --level max a.onnx b.onnx)
tolk_usage_error_test(optimize_usage_operands optimize "needs IN and OUT" a.onnx)
tolk_usage_error_test(optimize_usage_extra optimize "unexpected argument 'c.onnx'" a.onnx b.onnx c.onnx)
