# CLI checks of `tolk translate` and `tolk info` on the Marian fixture.
set(_tiny ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
add_test(NAME cli_translate_file COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_translate_file.sh
         $<TARGET_FILE:tolk> ${_tiny})
set_tests_properties(cli_translate_file PROPERTIES LABELS unit)
add_test(NAME cli_translate_json COMMAND tolk translate -m ${_tiny} --beam 1 --max-new-tokens 4 --json "Open file. Save it.")
set_tests_properties(cli_translate_json PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "^\\{\"line\":1,\"source\":\"Open file.\",\"translation\":\"[^\n]*\",\"ids\":\\[4268,[^\n]*\n\\{\"line\":1,\"source\":\"Save it.\"")
tolk_cli_test(cli_translate_bad_tag stderr 2 "^tolk translate: the model has no tag for 'xx'; its tags: >>cmn_Hans<< " --
              translate -m ${_tiny} --to xx "Hello")
tolk_cli_test(cli_translate_missing_model stderr 2 "^tolk translate: not found: model folder .*/no-such-model: no such folder$" --
              translate -m ${CMAKE_CURRENT_SOURCE_DIR}/no-such-model "Hello")
add_test(NAME cli_info COMMAND tolk info -m ${_tiny} --int8)
set_tests_properties(cli_info PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "encoder_model_quantized.onnx.*checksums: match tolk-manifest.json.*>>cmn_Hans<<")
add_test(NAME cli_int8_only COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_int8_only.sh $<TARGET_FILE:tolk> ${_tiny})
set_tests_properties(cli_int8_only PROPERTIES LABELS unit)
# The bundled demo model (issue 7): its checksums, and the most common interface string right.
set(_demo ${PROJECT_SOURCE_DIR}/models/demo-en-zh)
add_test(NAME demo_model_info COMMAND tolk info -m ${_demo})
set_tests_properties(demo_model_info PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "graphs \\(int8, the only ones in the folder\\).*checksums: match tolk-manifest.json")
add_test(NAME demo_model_translate COMMAND tolk translate -m ${_demo} "Open file")
set_tests_properties(demo_model_translate PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^打开文件\n$")
# --int8-lm-head (the LM head multiplied in int8): the same string comes out right.
add_test(NAME demo_model_translate_int8_head COMMAND tolk translate -m ${_demo} --int8-lm-head "Open file")
set_tests_properties(demo_model_translate_int8_head PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^打开文件\n$")
# `tolk serve --int8-lm-head --check`: the service loads the model with it and says so.
add_test(NAME demo_model_serve_int8_head COMMAND tolk serve -m ${_demo} --int8-lm-head --check)
set_tests_properties(demo_model_serve_int8_head PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "ok  [^\n]*demo-en-zh: en -> [^\n]*\\(int8, int8 LM head, checksums match")
# `make demo` itself (the README's first command): scripts/demo.sh on the bundled model must run to the
# end; it stopped at the inspect step once, when the int8-only bundle had no encoder_model.onnx.
add_test(NAME make_demo_script COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/demo.sh $<TARGET_FILE:tolk>)
set_tests_properties(make_demo_script PROPERTIES LABELS unit ENVIRONMENT "TOLK_MODEL="
  PASS_REGULAR_EXPRESSION "打开文件.*== tolk inspect.*encoder_model_quantized.onnx.*The real model")
