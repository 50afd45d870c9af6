#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need. Called by the Makefile.
# As root it runs apt-get; otherwise it prints the exact command and fails, so
# nothing is installed behind the user's back.
set -euo pipefail
# The service tests (tests/serve, tests/browser) add python3-venv for their
# pinned client libraries (scripts/testenv.sh), curl, and Debian's Chromium
# for the page with a CJK font for its screenshot; the browser is never
# downloaded by a test tool. The Python package (python/) adds python3-dev:
# its extension module is compiled against Python.h. The Java module (java/) builds with Maven;
# its JDK 22+ is not a Debian 12 package (see scripts/java_test.sh).
pkgs=(cmake make gcc g++ pkg-config clang libclang-rt-14-dev libfuzzer-14-dev libcjson-dev libmicrohttpd-dev
      libonnx-testdata python3 python3-venv python3-dev curl chromium fonts-wqy-microhei maven)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js and npm (tests/browser's Playwright driver) may come from another
# apt source (NodeSource's nodejs bundles npm and conflicts with Debian's npm
# package), so they are asked for by command, not by package.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "tolk needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $cmd" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
