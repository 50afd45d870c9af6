# The verbs' shared option parser (cli/opts.c): for every verb, --help on
# stdout with exit status 0, and each kind of usage error — an unknown or
# ambiguous option, a value missing, given to a flag or bad, wrong operands —
# as one line naming the verb and the problem, the --help hint, exit status 2.
# The options are parsed before any model is opened, so no model is needed.
set(_cnn ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/simple-cnn/model.onnx)

foreach(verb inspect check info tokenize detokenize run translate serve doctor quantize)
  tolk_cli_test(cli_help_${verb} stdout 0 "^usage: tolk ${verb} " "^  -h, --help +this text$" -- ${verb} --help)
  tolk_usage_error_test(cli_usage_${verb}_unknown ${verb} "unknown option '--bogus'" --bogus x)
endforeach()
tolk_cli_test(cli_help_short stdout 0 "^usage: tolk run MODEL.onnx " -- run -h)

tolk_usage_error_test(cli_usage_inspect_no_value inspect "--dot needs a value" ${_cnn} --dot)
tolk_usage_error_test(cli_usage_inspect_flag_value inspect "--json takes no value" --json=yes ${_cnn})
tolk_usage_error_test(cli_usage_inspect_no_model inspect "no model given")
tolk_usage_error_test(cli_usage_inspect_two_models inspect "one model at a time" ${_cnn} ${_cnn})
tolk_usage_error_test(cli_usage_check_short check "unknown option '-x'" -x ${_cnn})
tolk_usage_error_test(cli_usage_check_no_model check "no model given" -q)
tolk_usage_error_test(cli_usage_info_no_value info "--model needs a value" -m)
tolk_usage_error_test(cli_usage_info_operand info "unexpected argument 'extra'" --int8 extra)
tolk_usage_error_test(cli_usage_tokenize_no_value tokenize "--max-length needs a value" -m x --max-length)
tolk_usage_error_test(cli_usage_tokenize_bad_number tokenize
  "--max-length wants a whole number from -1 to 1073741824, not '1e3'" -m x --max-length 1e3 text)
tolk_usage_error_test(cli_usage_detokenize_no_value detokenize "--model needs a value" --model)
tolk_usage_error_test(cli_usage_run_no_value run "--repeat needs a value" ${_cnn} --repeat)
tolk_usage_error_test(cli_usage_run_bad_number run "--repeat wants a whole number from 0 to 1000000, not 'x'"
  ${_cnn} --repeat x)
tolk_usage_error_test(cli_usage_run_bad_atol run "--atol wants a non-negative number, not '-1'" ${_cnn} --atol -1)
tolk_usage_error_test(cli_usage_run_bad_opt run "--opt wants none, basic, extended or all, not 'fast'" ${_cnn} --opt fast)
tolk_usage_error_test(cli_usage_run_bad_input run "--input wants NAME=FILE or FILE, not '=x'" ${_cnn} --input =x)
tolk_usage_error_test(cli_usage_run_no_model run "no model given" --stats)
tolk_usage_error_test(cli_usage_translate_no_value translate "--beam needs a value" -m x --beam)
tolk_usage_error_test(cli_usage_translate_bad_number translate
  "--beam wants a whole number from 1 to 64, not '0'" -m x --beam 0 text)
tolk_usage_error_test(cli_usage_translate_bad_top_p translate
  "--top-p wants a number above 0 and at most 1, not '2'" -m x --top-p 2 text)
tolk_usage_error_test(cli_usage_translate_ambiguous translate "option '--in' is ambiguous" -m x --in f)
tolk_usage_error_test(cli_usage_translate_input_alone translate "--input and --output go together"
  -m x --input f)

# The top level: no command, an unknown one, --version.
tolk_cli_test(cli_no_command stderr 2 "^usage: tolk <command> " --)
tolk_cli_test(cli_unknown_command stderr 2 "^tolk: unknown command 'frobnicate'$" -- frobnicate)
tolk_cli_test(cli_version stdout 0 "^tolk [0-9]+\\.[0-9]+\\.[0-9]+$" -- --version)
tolk_usage_error_test(cli_usage_serve_bad_port serve "--port wants a whole number from 0 to 65535, not 'nope'" --port nope)
tolk_usage_error_test(cli_usage_serve_bad_rate serve "--rate-limit wants a rate such as 60/min, not '60'" --rate-limit 60)
tolk_usage_error_test(cli_usage_serve_bad_body serve "--max-body wants a size from 1 to 4G: bytes, or k or M .1M., not '1G'"
  --max-body 1G)
tolk_usage_error_test(cli_usage_serve_bad_queue_wait serve
  "--max-queue-wait wants seconds from 0 to 1e9 .0.1., or a multiple of a sentence's stay up to 1000 .0.25x., not '-1x'"
  --max-queue-wait -1x)
tolk_usage_error_test(cli_usage_serve_bad_queue_wait_s serve
  "--max-queue-wait wants seconds from 0 to 1e9 .0.1., or a multiple of a sentence's stay up to 1000 .0.25x., not 'soon'"
  --max-queue-wait soon)
tolk_usage_error_test(cli_usage_serve_bad_step_growth serve
  "--max-step-growth wants 0, or a factor from 1 to 1000 .1.5., not '0.5'" --max-step-growth 0.5)
tolk_usage_error_test(cli_usage_serve_operand serve "unexpected argument 'extra'" --check extra)
