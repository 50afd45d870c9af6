# Registers the layering check (tests/check_layers.cmake): an #include under src/ that points up the layer
# order core < kern < ir < onnx < ops < exec < tokenizer < mt fails. Included by tests/CMakeLists.txt
# (every tests/*.cmake is). Needs only CMake.
add_test(NAME layers
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -P ${PROJECT_SOURCE_DIR}/tests/check_layers.cmake)
set_tests_properties(layers PROPERTIES LABELS unit)
