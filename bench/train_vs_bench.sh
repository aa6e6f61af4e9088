#!/usr/bin/env bash
# Real training beside the bench (issue 28): `trm pretrain` on generated Sudoku puzzles and mazes,
# at the shapes of bench/gpu.sh's sudoku_att and maze_att, against `trm bench` on the same shapes,
# in one run. Prints each pretrain run's examples/s (the median of its 10-step log intervals, the
# first three dropped: the GEMM timing and the graph capture fall there) and bench's (ROUNDS
# runs). Training then evaluates once, at its end, outside the timed intervals.
# usage: bench/train_vs_bench.sh [TRM_BINARY] [CONFIG...]   env: ROUNDS (2), WORK (/tmp/tvb: a path
#        without spaces), DTYPE and EXTRA as bench/gpu.sh (both runs get them)
set -uo pipefail
TRM=${1:-build/trm}
shift || true
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(sudoku_att maze_att)
W=${WORK:-/tmp/tvb}
mkdir -p "$W/sudoku_csv" "$W/maze_csv"
bench_dir=$(dirname "$0")
. "$(dirname "$0")/common.sh"
# the median examples/s of a pretrain log's status lines, the first three dropped
rates() {
  grep -o '[0-9]* ex/s' "$1" | awk '{ print $1 }' | tail -n +4 | sort -g |
    awk '{ v[NR] = $1 } END { if (!NR) print "none"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), "(" NR " intervals)" }'
}
want() { [[ " ${CONFIGS[*]} " == *" $1 "* ]]; }
data() { # 2000 Sudoku puzzles x 101 augmentations; 1000 mazes x 8 (the reference's layouts)
  if want sudoku_att && [ ! -d "$W/sudoku" ]; then
    "$TRM" data sudoku-gen --count 2000 --out "$W/sudoku_csv/train.csv" --seed 1 --force >>"$W/data.log" 2>&1 &&
      "$TRM" data sudoku-gen --count 200 --out "$W/sudoku_csv/test.csv" --seed 2 --force >>"$W/data.log" 2>&1 &&
      "$TRM" data sudoku --csv-dir "$W/sudoku_csv" --out "$W/sudoku" --num-aug 100 --seed 0 --force \
        >>"$W/data.log" 2>&1 || return 1
  fi
  if want maze_att && [ ! -d "$W/maze" ]; then
    "$TRM" data maze-gen --count 1000 --out "$W/maze_csv/train.csv" --seed 11 --force >>"$W/data.log" 2>&1 &&
      "$TRM" data maze-gen --count 200 --out "$W/maze_csv/test.csv" --seed 12 --force >>"$W/data.log" 2>&1 &&
      "$TRM" data maze --csv-dir "$W/maze_csv" --out "$W/maze" --aug --seed 0 --force >>"$W/data.log" 2>&1 ||
      return 1
  fi
}
data || { echo "train_vs_bench: could not build the datasets under $W:" >&2; tail -3 "$W/data.log" >&2; exit 1; }
# the pretrain overrides of each config: bench/gpu.sh's shapes, its dtype and extra overrides, compile on
overrides() {
  case $1 in
    sudoku_att) ov=(cfg=sudoku "data_paths=[$W/sudoku]" arch.L_cycles=6 global_batch_size=768 epochs=100 eval_interval=100) ;;
    maze_att) ov=(cfg=maze "data_paths=[$W/maze]" arch.L_cycles=4 global_batch_size=192 epochs=30 eval_interval=30) ;;
    *) return 1 ;;
  esac
  # shellcheck disable=SC2206
  ov+=(arch.mlp_t=False arch.pos_encodings=rope "arch.forward_dtype=${DTYPE:-bfloat16}" compile=true device=cuda ${EXTRA:-})
}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
fail=0
for c in "${CONFIGS[@]}"; do
  overrides "$c" || { echo "train_vs_bench: no training set-up for $c" >&2; fail=1; continue; }
  rm -rf "$W/run_$c"
  "$TRM" pretrain "${ov[@]}" +checkpoint_path="$W/run_$c" +run_name="$c" >"$W/train_$c.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "$c: pretrain failed (rc $rc), see $W/train_$c.log" >&2
    fail=1
    continue
  fi
  echo "$c pretrain ex/s: $(rates "$W/train_$c.log")"
  for _ in $(seq "${ROUNDS:-2}"); do
    if ! j=$(STEPS=10 WARMUP=3 COMPILE=true bash "$bench_dir/gpu.sh" "$TRM" "$c" 2>"$W/bench_$c.log"); then
      echo "$c: bench failed, see $W/bench_$c.log" >&2
      fail=1
      break
    fi
    echo "$c bench ex/s: $(echo "$j" | field examples_per_s) ($(echo "$j" | field ms_per_step_median) ms a step)"
  done
done
exit $fail
