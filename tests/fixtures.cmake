# Registers the fixture manifest check (tests/check_fixtures.cmake): a missing or corrupted fixture fails loudly.
# Included by tests/CMakeLists.txt (every tests/*.cmake is). Needs only CMake, no Python.
add_test(NAME fixtures_manifest
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}/tests/fixtures
                 -P ${PROJECT_SOURCE_DIR}/tests/check_fixtures.cmake)
set_tests_properties(fixtures_manifest PROPERTIES LABELS unit)
