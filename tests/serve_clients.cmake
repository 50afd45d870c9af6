# The service tests (label `serve`, part of `make test`): `tolk serve` on
# loopback driven by the clients users run — requests, libretranslatepy,
# deepl, sseclient-py, schemathesis (tests/serve/test_*.py, one ctest each
# so that -j runs them side by side) and headless Chromium on the page
# (tests/browser). scripts/testenv.sh installs the clients; without them
# each test is skipped and says so. The page's screenshot is left in the
# build folder: serve-page.png and serve-page-phone.png. make sanitize runs
# them on the ASan build too (70 s there, 48 s on the release build).
file(GLOB TOLK_SERVE_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/serve/test_*.py)
set(_serve_env "TOLK=$<TARGET_FILE:tolk>;TOLK_ROOT=${PROJECT_SOURCE_DIR};PYTHONDONTWRITEBYTECODE=1")
foreach(py ${TOLK_SERVE_TESTS})
  get_filename_component(name ${py} NAME_WE)
  string(REGEX REPLACE "^test_" "serve_" name ${name})
  add_test(NAME ${name} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/serve/run.sh pytest
                                ${PROJECT_SOURCE_DIR} ${py})
  set_tests_properties(${name} PROPERTIES LABELS serve TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "${_serve_env}")
endforeach()
add_test(NAME serve_page COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/serve/run.sh browser ${PROJECT_SOURCE_DIR})
set_tests_properties(serve_page PROPERTIES LABELS serve TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "${_serve_env};TOLK_SHOT=${CMAKE_BINARY_DIR}/serve-page.png")
