#!/usr/bin/env bash
# The fuzz test of every file reader (tests/test_fuzz.c, issue 31), run longer than CI runs
# it, with its table: target, inputs tried, accepted, refused, crashes, hangs, bad answers
# (silent or multi-line refusals, leaks), worst time and worst memory of one input.
# usage: bench/fuzz.sh [BUILD_DIR] [INPUTS_PER_TARGET] [SEED] [TARGETS]
#   BUILD_DIR: a build with the tests (default build; an ASan/UBSan build works too)
#   INPUTS_PER_TARGET: default 20000 (CI runs 3000)
#   SEED: default 1 (CI's); another seed makes other inputs
#   TARGETS: comma-separated (safetensors,torch_zip,pickle,npy,config,dataset_json,arc_json,
#            sudoku_csv,maze_csv), default all
# A failing input is kept under BUILD_DIR/tests/tmp/fuzz/failures/ (the lines above the table
# name it); copy it to tests/data/fuzz/<target>/ to keep it as a regression case.
set -euo pipefail
BUILD=${1:-build}
INPUTS=${2:-20000}
SEED=${3:-1}
TARGETS=${4:-}
bin="$BUILD/tests/test_fuzz"
[ -x "$bin" ] || { echo "no $bin: build the tests first (cmake --build $BUILD)"; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
start=$(date +%s)
set +e
CK_FORK=yes CK_RUN_CASE=fuzz CK_DEFAULT_TIMEOUT=36000 TRM_FUZZ_INPUTS="$INPUTS" TRM_FUZZ_SEED="$SEED" \
  TRM_FUZZ_TARGETS="$TARGETS" "$bin" | grep -v '^Running suite'
rc=${PIPESTATUS[0]}
set -e
echo "($(( $(date +%s) - start )) s; $(uname -m), $(nproc) cores; exit $rc)"
exit "$rc"
