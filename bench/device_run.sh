#!/usr/bin/env bash
# The GPU side of bench/device_pack.sh: unpacks the carried binaries and runs the named steps,
# a short table of each at the end of its output (what the device tool's reply shows).
#   parity   test_backend_parity on cuda (every op against cpu, bf16 activations included)
#   golden   test_golden on cuda in fp32 and in bf16 (worst errors printed)
#   shapes   cuBLASLt's heuristic and tuned times on the step's GEMM shapes (sudoku, maze)
#   bench    bench/gpu.sh, compile on (STEPS, WARMUP, CONFIGS as there)
#   profile  TRM_PROFILE=1 per-op table of each config (op by op)
#   check    bench/gpu_check.sh (compile on = off; 4x4 Sudoku cuda vs cpu)
#   portable bench/portable_check.sh (a bf16 cuda checkpoint evaluated on cpu; cuda → cpu → cuda resume)
# usage: bench/device_run.sh PKG_DIR STEP...
set -uo pipefail
PKG=$1
shift
BIN=/tmp/trm-bin
mkdir -p "$BIN" /tmp/trm-golden
for f in "$PKG"/*.xz; do
  n=$(basename "$f" .xz)
  [ "$n" = golden.tar ] && continue
  xz -dc "$f" >"$BIN/$n" && chmod +x "$BIN/$n"
done
[ -f "$PKG/golden.tar.xz" ] && tar -xJf "$PKG/golden.tar.xz" -C /tmp/trm-golden
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for step in "$@"; do
  echo "== $step"
  case $step in
    parity)
      # the Hopper-only fused kernels must take their shapes there
      [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)" = 9.0 ] && export TRM_TEST_HOPPER=1
      CK_FORK=yes TRM_TEST_BACKEND=cuda "$BIN/test_backend_parity" 2>&1 | tail -25
      echo "deterministic attention backward:"
      CK_FORK=yes TRM_TEST_BACKEND=cuda TRM_DETERMINISTIC=1 "$BIN/test_backend_parity" 2>&1 | tail -2 ;;
    golden)
      for dt in 32 16; do
        [ $dt = 16 ] && export TRM_TEST_BF16=1
        CK_FORK=yes TRM_TEST_BACKEND=cuda TRM_GOLDEN_VERBOSE=1 "$BIN/test_golden" >/tmp/golden$dt.log 2>&1
        echo "golden $([ $dt = 16 ] && echo bf16 || echo fp32): rc $?; $(tail -1 /tmp/golden$dt.log)"
        echo "  worst relative errors:"; awk '/ \[[0-9]+\] / {print "   ", $2, $1}' /tmp/golden$dt.log | sort -g -k1 | tail -3
        grep -E ":[FE]:" /tmp/golden$dt.log | cut -c1-200
        [ $dt = 16 ] && { echo "  lowest agreement:"; grep agreement /tmp/golden16.log | sort -t'(' -k2 -g | head -2; }
      done
      unset TRM_TEST_BF16 ;;
    portable) bash bench/portable_check.sh "$BIN/trm" /tmp/trm-portable ;;
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
