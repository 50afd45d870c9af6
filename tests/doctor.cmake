# `tolk doctor` (cli/cmd_doctor.c): the release checklist on the bundled model and on marian-tiny, a
# corrupted copy, a folder without a manifest, original files against --source-sha256 and a previous
# release that is gone (tests/doctor.sh, python3 reads the --json output); a missing folder and bad
# option values as exit status 2.
foreach(case bundled tiny corrupt no-manifest source-sha256 bad-rollback)
  add_test(NAME doctor_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/doctor.sh $<TARGET_FILE:tolk> ${case})
  set_tests_properties(doctor_${case} PROPERTIES LABELS unit)
endforeach()

tolk_cli_test(doctor_missing_folder stderr 2 "^tolk doctor: model folder /nonexistent/model: no such folder$"
  -- doctor -m /nonexistent/model)
tolk_cli_test(doctor_missing_sentences stderr 2 "^tolk doctor: /nonexistent/s.txt: cannot read the sentences$"
  -- doctor -m ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny --sentences /nonexistent/s.txt)
tolk_usage_error_test(doctor_usage_sentences_n doctor "--sentences-n wants a whole number from 1 to 1000000, not '0'"
  --sentences-n 0)
tolk_usage_error_test(doctor_usage_memory_n doctor "--memory-n wants a whole number from 10 to 10000000, not '5'"
  --memory-n 5)
tolk_usage_error_test(doctor_usage_memory_seconds doctor
  "--memory-seconds wants a number of seconds from 0 to 86400, not '-1'" --memory-seconds -1)
tolk_usage_error_test(doctor_usage_memory_seconds_text doctor "--memory-seconds wants a number, not 'abc'"
  --memory-seconds abc)
tolk_usage_error_test(doctor_usage_cold_start doctor "--max-cold-start wants a number of seconds above 0, not '-1'"
  --max-cold-start -1)
tolk_usage_error_test(doctor_usage_operand doctor "unexpected argument 'extra'" extra)

# The checker (which the doctor's graphs item reuses) accepts Optimum's merged decoder, whose If
# branches name their outputs as the If names its own, as onnx.checker does.
tolk_cli_test(check_merged_decoder stdout 0 "decoder_model_merged.onnx: valid$"
  -- check ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny/decoder_model_merged.onnx)
