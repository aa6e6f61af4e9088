#!/usr/bin/env bash
# Each architecture on the 4x4 Sudoku at cfg=tiny (1000 steps of 64 examples), one run at a
# time: prints every evaluation's exact accuracy on the 500 unseen test puzzles and the time.
# usage: bash bench/archs.sh build/trm [WORKDIR] [ARCH...]   (default: all five)
# The transformer baseline has no mlp_t and needs positions: it runs with attention + RoPE.
set -uo pipefail
TRM=$(realpath "$1")
WORK=${2:-bench-archs}
shift $(($# < 2 ? $# : 2))
archs=("$@")
((${#archs[@]})) || archs=(trm hrm trm_singlez trm_hier6 transformers_baseline)
# one thread: two OpenMP threads on a busy 2-core machine spin against each other (20x slower)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$WORK" && cd "$WORK" || exit 1
[ -d data/sudoku4 ] || "$TRM" data sudoku4 --out data/sudoku4 > /dev/null || exit 1
for a in "${archs[@]}"; do
  extra=()
  [ "$a" = transformers_baseline ] && extra=(arch.mlp_t=false arch.pos_encodings=rope)
  rm -rf "runs/$a"
  start=$(date +%s)
  "$TRM" pretrain cfg=tiny arch="$a" "${extra[@]}" +run_name="$a" checkpoint_path="runs/$a" > "$a.log" 2>&1 \
    || { echo "$a: failed (see $WORK/$a.log)"; continue; }
  exact=$(grep -o '^eval step [0-9]* .*exact_accuracy [0-9.]*' "$a.log" | sed 's/^eval step \([0-9]*\).*exact_accuracy \([0-9.]*\)/\1:\2/' | tr '\n' ' ')
  echo "$a: exact accuracy by step ${exact}($(( $(date +%s) - start )) s)"
done
