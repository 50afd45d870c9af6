# The ONNX backend conformance runner (tests/conformance.c) and its ctest
# registrations (label `conformance`). The node sets must pass every test
# whose operators are implemented; unsupported ones are counted, not failed.
# The pytorch-converted, pytorch-operator and simple sets are reported only.
add_executable(conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance.c)
target_compile_options(conformance PRIVATE ${TOLK_WARNINGS})
target_link_libraries(conformance PRIVATE tolk_static)

set(TOLK_ONNX112_DATA /usr/include/onnx/backend/test/data)
set(TOLK_ONNX117_DATA ${PROJECT_SOURCE_DIR}/build-data/onnx-1.17.0)
if(DEFINED ENV{TOLK_TESTDATA})
  set(TOLK_ONNX117_DATA $ENV{TOLK_TESTDATA}/onnx-1.17.0)
endif()

function(tolk_conformance name dir)
  if(EXISTS ${dir})
    add_test(NAME ${name} COMMAND conformance ${ARGN} ${dir})
    set_tests_properties(${name} PROPERTIES LABELS conformance TIMEOUT 1800)
  endif()
endfunction()

tolk_conformance(conformance_onnx112_node ${TOLK_ONNX112_DATA}/node --verbose --min-pass 700)
tolk_conformance(conformance_onnx117_node ${TOLK_ONNX117_DATA}/node --verbose)
foreach(set pytorch-converted pytorch-operator simple)
  tolk_conformance(conformance_onnx112_${set} ${TOLK_ONNX112_DATA}/${set} --report --verbose)
  tolk_conformance(conformance_onnx117_${set} ${TOLK_ONNX117_DATA}/${set} --report --verbose)
endforeach()
