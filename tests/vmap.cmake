# The vocabulary shortlist on the command line: `tolk vmap build` and
# `tolk translate --vmap` (the parser and the engine: test_mt_vmap.c).
set(_tiny ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
set(_vm ${CMAKE_CURRENT_SOURCE_DIR}/data/vmap)
tolk_cli_test(cli_help_vmap_build stdout 0 "^usage: tolk vmap build " "^  -h, --help +this text$" -- vmap build --help)
tolk_cli_test(cli_usage_vmap_build_input stderr 2 "^tolk vmap build: give --pairs FILE, or --source FILE and --target FILE$"
  "^Run 'tolk vmap build --help' for its options\\.$" -- vmap build -m ${_tiny} -o x.vmap)
tolk_cli_test(cli_usage_vmap_build_output stderr 2 "^tolk vmap build: no output: pass -o FILE$"
  -- vmap build -m ${_tiny} --pairs ${_vm}/pairs.tsv)
tolk_cli_test(cli_usage_vmap_build_top_k stderr 2 "^tolk vmap build: --top-k wants a whole number from 1 to 1048576, not '0'$"
  -- vmap build -m ${_tiny} --pairs ${_vm}/pairs.tsv -o x.vmap --top-k 0)
tolk_cli_test(cli_usage_vmap_no_subcommand stderr 2 "^tolk vmap: no subcommand: build$" -- vmap)
tolk_cli_test(cli_vmap_build_no_tab stderr 2 "^tolk vmap build: .*notab\\.tsv:2: no tab between the source and the target$"
  -- vmap build -m ${_tiny} --pairs ${_vm}/notab.tsv -o ${CMAKE_CURRENT_BINARY_DIR}/notab.vmap)
tolk_cli_test(cli_vmap_malformed stderr 2 "^tolk translate: .*bad\\.vmap:2: no tab between the source n-gram and its targets$"
  -- translate -m ${_tiny} --vmap ${_vm}/bad.vmap "Open the file.")
tolk_cli_test(cli_vmap_unknown stderr 0
  "^tolk translate: .*unknown\\.vmap: 1 of 2 lines name a source piece not in the vocabulary \\(skipped\\), 1 target pieces not in it \\(left out\\)$"
  -- translate -m ${_tiny} --vmap ${_vm}/unknown.vmap "Open the file.")
tolk_cli_test(cli_vmap_serve_check stderr 1 "^tolk serve: .*marian-tiny: .*bad\\.vmap:2: no tab between the source n-gram and its targets$"
  -- serve --check -m ${_tiny} --vmap ${_vm}/bad.vmap)
add_test(NAME cli_vmap_build COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/vmap_build.sh $<TARGET_FILE:tolk> ${_tiny}
  ${_vm}/pairs.tsv)
set_tests_properties(cli_vmap_build PROPERTIES LABELS unit)
