# CLI checks of `tolk tokenize` / `tolk detokenize` on the Marian fixture.
set(_tiny ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
add_test(NAME cli_tokenize_ids COMMAND tolk tokenize -m ${_tiny} "Zip archive")
set_tests_properties(cli_tokenize_ids PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^[0-9 ]+ 0\n$")
add_test(NAME cli_tokenize_tag COMMAND tolk tokenize -m ${_tiny} --pieces ">>cmn_Hans<< a</s>b")
set_tests_properties(cli_tokenize_tag PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^>>cmn_Hans<< ▁a </s> ▁b\n$")
add_test(NAME cli_detokenize COMMAND tolk detokenize -m ${_tiny} 2 435 729 2 1666 0)
set_tests_properties(cli_detokenize PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^Zip 归档文件\n$")
tolk_cli_test(cli_detokenize_bad_id stderr 2 "^tolk detokenize: 'x3' is not an id$" --
              detokenize -m ${_tiny} 12 x3)
tolk_cli_test(cli_tokenize_missing_model stderr 2 "^tolk tokenize: not found: .*/no-such-model/source.spm: cannot open$" --
              tokenize -m ${CMAKE_CURRENT_SOURCE_DIR}/no-such-model x)
