# ONNX reader tests beyond the unit ones: conformance over the ONNX backend
# test data (Debian's libonnx-testdata and the onnx 1.17 wheel's set fetched
# by scripts/testdata.sh into build-data/).
add_executable(onnx_conformance ${CMAKE_CURRENT_SOURCE_DIR}/onnx_conformance.c)
target_compile_options(onnx_conformance PRIVATE ${TOLK_WARNINGS})
target_include_directories(onnx_conformance PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(onnx_conformance PRIVATE tolk_static)
add_test(NAME onnx_conformance COMMAND onnx_conformance
         /usr/include/onnx/backend/test/data ${PROJECT_SOURCE_DIR}/build-data/onnx-1.17.0)
set_tests_properties(onnx_conformance PROPERTIES LABELS conformance TIMEOUT 600)
