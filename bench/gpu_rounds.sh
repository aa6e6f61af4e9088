#!/usr/bin/env bash
# trm and the reference alternated on one GPU, in one call: for each config, ROUNDS rounds of
# trm (bench/gpu.sh, compile on) then the reference's harness with torch.compile
# (../shared/anchors/README.md says how to bring .ref); prints each round and the medians'
# ratio (reference / trm). The machines drift 20–40% between calls: compare only within one.
# usage: bench/gpu_rounds.sh TRM_BINARY REF_DIR   env: ROUNDS (3), STEPS (10), WARMUP (3), CONFIGS
set -uo pipefail
TRM=${1:-build/trm}
REF=${2:-.ref}
CONFIGS=${CONFIGS:-sudoku_mlp sudoku_att maze_att}
R=${ROUNDS:-3}
S=${STEPS:-10}
W=${WARMUP:-3}
export PYTHONUNBUFFERED=1
out=/tmp/gpu_rounds
rm -rf $out && mkdir -p $out
. "$(dirname "$0")/common.sh"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
printf "%-11s %5s %10s %10s\n" config round "trm ms" "ref ms"
for c in $CONFIGS; do
  for i in $(seq "$R"); do
    STEPS=$S WARMUP=$W COMPILE=true bash "$(dirname "$0")/gpu.sh" "$TRM" "$c" >$out/trm_${c}_$i.json 2>$out/trm.err
    python3 "$REF/ref_bench.py" "$REF" "$c" --compile --steps $((S * 2)) --warmup 5 >$out/ref_${c}_$i.json \
      2>$out/ref.err || tail -3 $out/ref.err
    printf "%-11s %5s %10s %10s\n" "$c" "$i" "$(field ms_per_step_median $out/trm_${c}_$i.json)" \
      "$(field step_ms_median $out/ref_${c}_$i.json)"
  done
  t=$(for f in $out/trm_${c}_*.json; do field ms_per_step_median "$f"; done | median)
  r=$(for f in $out/ref_${c}_*.json; do field step_ms_median "$f"; done | median)
  printf "%-11s median %9s %10s  reference / trm %s  (trm %s GiB, reference %s GB)\n" "$c" "$t" "$r" \
    "$(python3 -c "print(f'{$r / $t:.3f}x')" 2>/dev/null)" "$(field device_mem_gib $out/trm_${c}_1.json)" \
    "$(field peak_mem_gb $out/ref_${c}_1.json)"
done
