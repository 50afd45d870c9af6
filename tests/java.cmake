# The Java module (java/: java.lang.foreign bindings, JUnit 5 under Maven Surefire) against this
# build's libtolk.so and tolk (scripts/java_test.sh). Skipped (exit 77) where no JDK 22+ or Maven
# is found; not in the sanitizer builds, whose instrumented libtolk.so a JVM cannot load.
add_test(NAME java COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/java_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(java PROPERTIES LABELS "unit;java;nosan" SKIP_RETURN_CODE 77 TIMEOUT 300)
