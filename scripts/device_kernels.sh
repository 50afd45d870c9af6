#!/usr/bin/env bash
# The int8 GEMM's tiers and the bfloat16 dot product on a CPU other than the
# build machine's (the lent device machine's, where AVX-VNNI, AVX-512 VNNI,
# AVX512-BF16 or AMX may be present): prints
# the CPU and its flags, builds the kernel tests and bench_igemm with -j16,
# runs them. Uses CMake when libcjson is there; otherwise compiles only what
# the kernel tests need with the compiler directly (the engine's layers below
# src/mt need no library). Output under $OUT (else ./build-device) too.
#   scripts/device_kernels.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-device}
mkdir -p "$out"
exec > >(tee "$out/device_kernels.log") 2>&1
echo "== cpu"
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|Flags' | sed 's/^Flags:/Flags:/'
grep -o -w 'avx2\|avx512f\|avx512bw\|avx512_vnni\|avx_vnni\|avx512_bf16\|amx_int8' /proc/cpuinfo | sort | uniq -c
gcc --version | head -1
cd "$root"
if [[ -f CMakeLists.txt ]] && pkg-config --exists libcjson 2>/dev/null && command -v cmake >/dev/null; then
  echo "== cmake build"
  cmake -S . -B build-dev -DTOLK_WERROR=ON >/dev/null &&
    cmake --build build-dev -j16 --target test_kern_igemm test_ops_matmul_int8 test_ops_quant \
      test_exec_quant_rows test_kern_bf16dot bench_igemm >/dev/null || exit 1
  (cd build-dev && ctest -R 'kern_igemm|matmul_int8|quant|kern_bf16dot' --output-on-failure)
  for t in test_kern_igemm test_ops_matmul_int8 test_kern_bf16dot; do build-dev/tests/$t | tail -3; done
  bench=build-dev/bench/bench_igemm
else
  echo "== direct build (no libcjson here)"
  b=build-dev; mkdir -p $b/obj
  cf="-O2 -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -Itests -pthread"
  srcs=$(ls src/core/*.c src/exec/*.c src/ir/*.c src/kern/*.c src/kern/x86/*.c src/onnx/*.c src/ops/*.c)
  for s in $srcs; do
    f=""
    case $s in
      *_amx.c) f="-mamx-tile -mamx-int8 -mavx512f -mavx512bw -mavx512vnni -mavx2" ;;
      *_avx512bf16.c) f="-mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx2" ;;
      *_avx512vnni.c) f="-mavx512f -mavx512bw -mavx512vnni -mavx2" ;;
      *_avxvnni.c) f="-mavx2 -mavxvnni" ;;
      *_avx512.c) f="-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c" ;;
      *_avx2.c) f="-mavx2 -mfma -mf16c" ;;
    esac
    echo "gcc $cf $f -c $s -o $b/obj/$(echo $s | tr / _).o"
  done | xargs -P16 -I{} sh -c '{}' || exit 1
  ar rcs $b/libk.a $b/obj/*.o
  for t in test_kern_igemm test_ops_matmul_int8 test_kern_bf16dot; do
    gcc $cf tests/$t.c $b/libk.a -lm -o $b/$t || exit 1
    echo "== $t"; $b/$t
  done
  gcc $cf bench/igemm.c $b/libk.a -lm -o $b/bench_igemm || exit 1
  bench=$b/bench_igemm
fi
echo "== bench_igemm"
$bench --ms 200
