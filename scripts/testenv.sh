#!/usr/bin/env bash
# Sets up what the service tests run with, outside the tracked files:
#   build-venv/                 a venv with tests/requirements.txt (pinned clients: requests,
#                               libretranslatepy, deepl, sseclient-py, schemathesis, pytest)
#   tests/browser/node_modules  `npm ci` of tests/browser/package-lock.json (playwright-core;
#                               it drives Debian's /usr/bin/chromium, no browser is downloaded)
#   build-pyvenv/               a venv with python/requirements-test.txt (scikit-build-core,
#                               build, numpy, onnxruntime, pytest) for the Python package's
#                               build and tests (python/test.sh)
#   build-m2/                   the Maven artifacts of java/pom.xml (JUnit 5, Surefire, the
#                               plugins), from Maven Central, for scripts/java_test.sh
# Called by the Makefile's deps target, after deps.sh has installed python3-venv, Node.js and
# Chromium. Each part is redone only when its pin file changed (a copy is kept as the stamp),
# so the tests themselves run offline. Without the registries the service tests are skipped
# and say why; under CI (CI set) that is an error instead, so no run passes without them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web=$root/tests/browser
m2=$root/build-m2
pom=$root/java/pom.xml

fail() {
  echo "testenv: $1; ${2:-the tests needing it (ctest -L serve, python/test.sh)} will be skipped" >&2
  [ -n "${CI:-}" ] && exit 1
  exit 0
}

# Makes the venv $1 again with the pins in $2 when they changed since it was made; $3 says
# what it holds.
pip_venv() {
  local venv=$1 req=$2
  cmp -s "$req" "$venv/requirements.txt" 2>/dev/null && return
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: python3-venv)"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >"$venv/pip.log" 2>&1; then
    cat "$venv/pip.log" >&2
    rm -rf "$venv"
    fail "could not install ${req#"$root"/} from PyPI"
  fi
  cp "$req" "$venv/requirements.txt"
  echo "testenv: $3 in $venv"
}

pip_venv "$root/build-venv" "$root/tests/requirements.txt" "service test clients"
pip_venv "$root/build-pyvenv" "$root/python/requirements-test.txt" "the Python package's build and test tools"

if ! cmp -s "$web/package-lock.json" "$web/node_modules/.tolk-lock.json" 2>/dev/null; then
  command -v npm >/dev/null || fail "npm not found (Debian: nodejs npm)"
  if ! (cd "$web" && npm ci --no-audit --no-fund --loglevel=error >&2); then
    rm -rf "$web/node_modules"
    fail "npm ci in tests/browser failed"
  fi
  cp "$web/package-lock.json" "$web/node_modules/.tolk-lock.json"
  echo "testenv: playwright-core in $web/node_modules"
fi

# Maven's lifecycle up to `test` with compiling and testing skipped loads every plugin the tests
# run with (and Surefire's JUnit provider, named in the pom), which dependency:go-offline misses;
# any JDK Maven runs on will do for that.
if ! cmp -s "$pom" "$m2/pom.xml" 2>/dev/null; then
  command -v mvn >/dev/null || fail "mvn not found (Debian: maven)" "the Java tests (ctest -R java)"
  rm -rf "$m2"
  if ! mvn -B -q -ntp -f "$pom" -Dmaven.repo.local="$m2" -Dmaven.main.skip -Dmaven.test.skip=true \
       -Dtolk.java.build="$root/build-m2/target" test >&2; then
    rm -rf "$m2"
    fail "could not fetch java/pom.xml's artifacts from Maven Central" "the Java tests (ctest -R java)"
  fi
  rm -rf "$m2/target"
  cp "$pom" "$m2/pom.xml"
  echo "testenv: java/ test artifacts in $m2"
fi
