# `cmake --install` into a temporary prefix, then programs built against that
# copy with pkg-config and with find_package(tolk) (tests/install/check.sh).
# Not under the sanitizers (nosan): the consumers are built without them.
add_test(NAME install_consumer COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install_consumer PROPERTIES LABELS "unit;nosan")
