#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need. Called by the Makefile.
# As root it runs apt-get; otherwise it prints the exact command and fails, so
# nothing is installed behind the user's back.
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config clang libclang-rt-14-dev libfuzzer-14-dev libcjson-dev libmicrohttpd-dev
      libonnx-testdata python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
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
