#!/bin/sh
# tests/serve/run.sh KIND ROOT ARGS... — runs one service test for ctest:
#   pytest ROOT TEST_FILE   pytest on tests/serve/TEST_FILE with build-venv's Python
#   browser ROOT            node --test tests/browser/page.test.mjs
# TOLK (the binary) comes in the environment. Exits 77 (ctest: skipped) with
# the reason when scripts/testenv.sh has not set up the clients, so a build
# without `make deps` says what it lacks instead of failing on an import.
set -u
kind=$1 root=$2
shift 2
case $kind in
pytest)
  py=$root/build-venv/bin/python
  if [ ! -x "$py" ] || ! cmp -s "$root/tests/requirements.txt" "$root/build-venv/requirements.txt"; then
    echo "skipped: build-venv/ is missing or stale; run scripts/testenv.sh (make deps does)"
    exit 77
  fi
  cd "$root/tests/serve" || exit 1
  exec "$py" -m pytest -p no:cacheprovider -q -rfEs --timeout 240 "$@" ;;
browser)
  if [ ! -d "$root/tests/browser/node_modules/playwright-core" ]; then
    echo "skipped: tests/browser/node_modules is missing; run scripts/testenv.sh (make deps does)"
    exit 77
  fi
  if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
    echo "skipped: no ${CHROMIUM:-/usr/bin/chromium}; scripts/deps.sh installs Debian's chromium"
    exit 77
  fi
  cd "$root/tests/browser" || exit 1
  exec node --test --test-reporter=spec page.test.mjs ;;
*)
  echo "usage: run.sh pytest|browser ROOT ARGS..." >&2; exit 2 ;;
esac
