#!/usr/bin/env bash
# The GPU side of bench/device_pack.sh: unpacks the carried binaries and runs the named steps,
# a short table of each at the end of its output (what the device tool's reply shows).
#   parity   test_backend_parity on cuda (every op against cpu, bf16 activations included)
#   golden   test_golden on cuda in fp32 and in bf16 (worst errors printed)
#   shapes   cuBLASLt's heuristic and tuned times on the step's GEMM shapes (sudoku, maze)
#   bench    bench/gpu.sh, compile on (STEPS, WARMUP, CONFIGS as there)
#   profile  TRM_PROFILE=1 per-op table of each config (op by op)
#   check    bench/gpu_check.sh (compile on = off; 4x4 Sudoku cuda vs cpu)
# usage: bench/device_run.sh PKG_DIR STEP...
set -uo pipefail
PKG=$1
shift
BIN=/tmp/trm-bin
mkdir -p "$BIN" /tmp/trm-shared
for f in "$PKG"/*.xz; do
  n=$(basename "$f" .xz)
  [ "$n" = golden.tar ] && continue
  xz -dc "$f" >"$BIN/$n" && chmod +x "$BIN/$n"
done
[ -f "$PKG/golden.tar.xz" ] && tar -xJf "$PKG/golden.tar.xz" -C /tmp/trm-shared
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for step in "$@"; do
  echo "== $step"
  case $step in
    parity) CK_FORK=yes TRM_TEST_BACKEND=cuda "$BIN/test_backend_parity" 2>&1 | tail -25 ;;
    golden)
      CK_FORK=yes TRM_TEST_BACKEND=cuda TRM_GOLDEN_VERBOSE=1 "$BIN/test_golden" >/tmp/golden32.log 2>&1
      echo "fp32: rc $?; worst: $(grep -o 'relative error [0-9.e+-]*' /tmp/golden32.log | sort -k3 -g | tail -1)"
      tail -3 /tmp/golden32.log
      CK_FORK=yes TRM_TEST_BACKEND=cuda TRM_TEST_BF16=1 TRM_GOLDEN_VERBOSE=1 "$BIN/test_golden" >/tmp/golden16.log 2>&1
      echo "bf16: rc $?"
      grep -E "agreement|Checks|Failure|failed" /tmp/golden16.log | tail -15 ;;
    shapes) "$BIN/bench_cublaslt" 768 97 512 1536; "$BIN/bench_cublaslt" 192 916 512 1536 | head -12 ;;
    bench) COMPILE=${COMPILE:-true} bash bench/gpu.sh "$BIN/trm" ${CONFIGS:-} ;;
    profile)
      for c in ${CONFIGS:-sudoku_mlp sudoku_att maze_att}; do
        TRM_PROFILE=1 COMPILE=false STEPS=${STEPS:-3} WARMUP=1 bash bench/gpu.sh "$BIN/trm" "$c" 2>&1 | head -24
      done ;;
    check) bash bench/gpu_check.sh "$BIN/trm" /tmp/trm-gpu-check ;;
    *) echo "unknown step $step" ;;
  esac
done
