#!/usr/bin/env bash
# scripts/java_test.sh [BUILD_DIR] — the Java module's tests (java/: JUnit 5 under Maven
# Surefire) against BUILD_DIR/libtolk.so and BUILD_DIR/tolk (default: build/), Maven's output in
# BUILD_DIR/java. Registered with ctest as `java`.
#
# java/ uses java.lang.foreign, final since Java 22. The JDK is, in this order: $TOLK_JAVA_HOME,
# $JAVA_HOME when it is 22 or newer, else the newest JDK 22+ under /usr/lib/jvm. Debian 12 packages
# only OpenJDK 17, and no other source of JDKs is reachable from these machines, so no script can
# install one: the project's machines come with Temurin 25 in /usr/lib/jvm/temurin-25-jdk-amd64.
# Without a JDK 22+ or Maven (Debian `maven`, scripts/deps.sh) the tests are skipped (exit 77,
# which ctest reports as skipped) and the reason printed.
#
# Maven runs offline from build-m2/, which scripts/testenv.sh fills from Maven Central.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
repo=$root/build-m2

skip() {
  echo "java_test: skipped: $1" >&2
  exit 77
}

# The major version of the JDK at $1, or 0.
jdk_major() {
  local v
  v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release" 2>/dev/null || true)
  [ -x "$1/bin/javac" ] && echo "${v:-0}" || echo 0
}

find_jdk() {
  local best="" best_v=0 d v
  for d in ${TOLK_JAVA_HOME:-} ${JAVA_HOME:-}; do
    [ "$(jdk_major "$d")" -ge 22 ] && { echo "$d"; return; }
  done
  for d in /usr/lib/jvm/*/; do
    d=${d%/}
    v=$(jdk_major "$d")
    [ "$v" -gt "$best_v" ] && best=$d best_v=$v
  done
  [ "$best_v" -ge 22 ] && echo "$best"
}

jdk=$(find_jdk) || true
[ -n "$jdk" ] || skip "no JDK 22 or newer (java.lang.foreign) in TOLK_JAVA_HOME, JAVA_HOME or /usr/lib/jvm"
command -v mvn >/dev/null || skip "mvn not found (Debian: maven, scripts/deps.sh)"
[ -f "$build/libtolk.so" ] || { echo "java_test: $build/libtolk.so missing: build first" >&2; exit 1; }
[ -d "$repo" ] || skip "no Maven artifacts in $repo: run scripts/testenv.sh (make deps)"

export JAVA_HOME=$jdk
# Maven 3.8's own Guice calls sun.misc.Unsafe, which JDK 24+ warns about on every run.
[ "$(jdk_major "$jdk")" -ge 24 ] && export MAVEN_OPTS="${MAVEN_OPTS:-} --sun-misc-unsafe-memory-access=allow"
echo "java_test: $("$jdk/bin/java" -version 2>&1 | head -1), $build/libtolk.so"
exec mvn -B -o -ntp -f "$root/java/pom.xml" -Dmaven.repo.local="$repo" \
  -Dtolk.library.path="$build/libtolk.so" -Dtolk.cli="$build/tolk" -Dtolk.root="$root" \
  -Dtolk.java.build="$build/java" test
