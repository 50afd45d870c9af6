# `tolk serve` end to end on loopback (tests/serve_http.sh: curl against
# every endpoint and error status, keys, limits, reloads, SIGTERM), on the
# fixture model and, with no -m, on the bundled default model.
add_test(NAME serve_http COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_http.sh $<TARGET_FILE:tolk>
         ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
set_tests_properties(serve_http PROPERTIES LABELS unit TIMEOUT 60 ENVIRONMENT "TOLK_MODEL=")
# Raw sockets (tests/serve_sockets.c): slow clients cut, --max-connections,
# hang-ups cancelling work, concurrent clients, SIGTERM under load and past
# --drain. The program the TSan build runs too.
add_executable(serve_sockets ${CMAKE_CURRENT_SOURCE_DIR}/serve_sockets.c)
target_compile_options(serve_sockets PRIVATE ${TOLK_WARNINGS})
target_link_libraries(serve_sockets PRIVATE Threads::Threads)
add_test(NAME serve_sockets COMMAND serve_sockets $<TARGET_FILE:tolk> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/marian-tiny)
set_tests_properties(serve_sockets PROPERTIES LABELS unit TIMEOUT 120)
if(TOLK_TSAN)
  set_tests_properties(serve_sockets PROPERTIES ENVIRONMENT "TOLK_TEST_TIME_SCALE=10" TIMEOUT 600)
endif()
