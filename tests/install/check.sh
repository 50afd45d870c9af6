#!/usr/bin/env bash
# tests/install/check.sh BUILD_DIR: `cmake --install` the build into a
# temporary prefix, then build tests/install/consumer.c against that copy
# four ways — pkg-config shared and static, find_package's tolk::tolk and
# tolk::tolk_static — and check that each translates a sentence with the
# installed demo model exactly as `tolk translate` does, and links as it
# should (the shared ones need libtolk.so.0.1, the static ones no libtolk);
# and that libtolk.so exports tolk.h's functions and nothing else.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"

fail() { echo "install check: $*" >&2; exit 1; }
libdir=$(dirname "$(find "$prefix" -name tolk.pc)")/..
model=$prefix/share/tolk/models/demo-en-zh
[ -f "$prefix/include/tolk.h" ] || fail "include/tolk.h not installed"
[ -f "$model/encoder_model_quantized.onnx" ] || fail "the bundled model is not under share/tolk/models"
[ ! -e "$prefix/include/tolk_serve.h" ] || fail "tolk_serve.h is installed, the service library is not"
readelf -d "$libdir/libtolk.so" | grep -q 'SONAME.*\[libtolk\.so\.0\.1\]' || fail "libtolk.so has no SONAME libtolk.so.0.1"
# Exactly the functions tolk.h declares are exported (cmake/exports.cmake).
exported=$(nm -D --defined-only "$libdir/libtolk.so" | awk '{print $3}' | sort)
internal=$(grep -v '^tolk_' <<<"$exported" || true)
[ -z "$internal" ] || fail "libtolk.so exports internal symbols: $(echo $internal | head -c 200)"
for f in tolk_version tolk_session_run tolk_translator_translate tolk_strings_free tolk_tokens_free; do
  grep -qx "$f" <<<"$exported" || fail "libtolk.so does not export $f"
done
! grep -qx 'tolk_fail' <<<"$exported" || fail "libtolk.so exports the internal tolk_fail"

text="The weather is nice today."
want=$("$build/tolk" translate -m "$model" "$text")
[ -n "$want" ] || fail "tolk translate printed nothing"

export PKG_CONFIG_PATH=$libdir/pkgconfig
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -o "$tmp/pc_shared" "$here/consumer.c" $(pkg-config --cflags --libs tolk) -Wl,-rpath,"$libdir"
# Static through pkg-config: the archive by name, then what --static lists after -ltolk.
# shellcheck disable=SC2046
$cc -o "$tmp/pc_static" "$here/consumer.c" $(pkg-config --cflags tolk) \
    $(pkg-config --static --libs tolk | sed 's/-ltolk\b/-l:libtolk.a/')

cmake -S "$here" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cm.log" || { cat "$tmp/cm.log"; fail "find_package(tolk) failed"; }
cmake --build "$tmp/cm" >"$tmp/cm-build.log" || { cat "$tmp/cm-build.log"; fail "the CMake consumer did not build"; }

for prog in "$tmp/pc_shared" "$tmp/pc_static" "$tmp/cm/consumer_shared" "$tmp/cm/consumer_static"; do
  got=$("$prog" "$model" "$text")
  [ "$got" = "$want" ] || fail "$(basename "$prog") translated '$got', tolk translate '$want'"
  if [[ $prog == *shared ]]; then
    readelf -d "$prog" | grep -q 'NEEDED.*\[libtolk\.so\.0\.1\]' || fail "$(basename "$prog") does not link libtolk.so.0.1"
  else
    ! readelf -d "$prog" | grep -q 'libtolk' || fail "$(basename "$prog") links libtolk.so, not libtolk.a"
  fi
  echo "ok: $(basename "$prog"): $got"
done
