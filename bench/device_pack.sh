#!/usr/bin/env bash
# Builds what a GPU machine without the project's build dependencies needs, into one folder to
# carry there (the device tool's `carry`): trm and the device test binaries for sm_90a (no MPI,
# no Vulkan; libc, libgomp and cuBLASLt dynamic), xz-compressed, the golden files, and the
# cuBLASLt shape timer. bench/device_run.sh unpacks and runs them on the other side.
# usage: bench/device_pack.sh [OUT_DIR (.dev/pkg)] [BUILD_DIR (.dev/build)]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.dev/pkg}
BUILD=${2:-.dev/build}
mkdir -p "$OUT"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRM_MPI=OFF -DTRM_VULKAN=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90a-real -DTRM_GOLDEN_DIR=/tmp/trm-golden >/dev/null
cmake --build "$BUILD" -j2 --target trm test_golden test_backend_parity bench_cublaslt >/dev/null
for t in trm tests/test_golden tests/test_backend_parity bench_cublaslt; do
  strip -o "$OUT/$(basename "$t")" "$BUILD/$t"
  xz -T2 -6 -f "$OUT/$(basename "$t")"
done
tar -C tests/golden -cJf "$OUT/golden.tar.xz" --exclude='*.py' .
ls -la "$OUT"
