#!/usr/bin/env bash
# One trm binary under several environments, alternated on one GPU in one call: for each
# config, ROUNDS rounds of bench/gpu.sh (compile on), each round running every variant once;
# prints each run and each variant's median ms/step. Times a kernel switch (TRM_LINEAR_NORM,
# TRM_ATT_FWD_ROPE, ...) against the path it replaces. The machines drift 20-40% between
# calls: compare only within one.
# usage: bench/gpu_ab.sh TRM_BINARY
#   env: VARIANTS (space-separated; each VAR=VALUE[,VAR=VALUE...], or - for none),
#        ROUNDS (3), STEPS (10), WARMUP (3), CONFIGS (sudoku_att maze_att)
set -uo pipefail
TRM=${1:-build/trm}
VARIANTS=${VARIANTS:--}
CONFIGS=${CONFIGS:-sudoku_att maze_att}
R=${ROUNDS:-3}
out=$(mktemp -d /tmp/gpu_ab.XXXXXX)
. "$(dirname "$0")/common.sh"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
printf "%-11s %5s %-40s %10s\n" config round variant "ms/step"
status=0
for c in $CONFIGS; do
  for i in $(seq "$R"); do
    v=0
    for var in $VARIANTS; do
      v=$((v + 1))
      envs=()
      [ "$var" = - ] || IFS=, read -ra envs <<<"$var"
      f=$out/${c}_${v}_$i.json
      if ! env "${envs[@]}" STEPS=${STEPS:-10} WARMUP=${WARMUP:-3} COMPILE=true \
        bash "$(dirname "$0")/gpu.sh" "$TRM" "$c" >"$f" 2>"$out/err"; then
        echo "$c $var: bench failed: $(tail -2 "$out/err")" >&2
        status=1
      fi
      printf "%-11s %5s %-40s %10s\n" "$c" "$i" "$var" "$(field ms_per_step_median "$f")"
    done
  done
  v=0
  for var in $VARIANTS; do
    v=$((v + 1))
    m=$(for f in "$out/${c}_${v}"_*.json; do field ms_per_step_median "$f"; done | median)
    printf "%-11s median %-40s %10s  (%s GiB)\n" "$c" "$var" "$m" "$(field device_mem_gib "$out/${c}_${v}_1.json")"
  done
done
rm -rf "$out"
exit $status
