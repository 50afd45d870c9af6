# `tolk serve` end to end on loopback (tests/serve_http.sh: curl against
# every endpoint and error status, keys, limits, reloads, SIGTERM), on the
# fixture model and, with no -m, on the bundled default model.
add_test(NAME serve_http COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_http.sh $<TARGET_FILE:tolk>
         ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
set_tests_properties(serve_http PROPERTIES LABELS unit TIMEOUT 60 ENVIRONMENT "TOLK_MODEL=")
