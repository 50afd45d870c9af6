# `tolk run` end to end (tests/run_cli.sh): inputs from .pb and .npy,
# --expect, --output-dir, --repeat, --stats, and errors for malformed files.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/simple-cnn/model.onnx)
  add_test(NAME cli_run COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_cli.sh $<TARGET_FILE:tolk>
                                   ${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
  set_tests_properties(cli_run PROPERTIES LABELS unit)
endif()
