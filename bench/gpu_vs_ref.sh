#!/usr/bin/env bash
# trm beside the reference on one GPU, in one call (issue 12): bench/gpu.sh's three configs with
# compile on and off, the reference's throughput harness with torch.compile on the same shapes
# (../shared/anchors/README.md says how to bring .ref), then trm's compiled runs again to bracket
# any drift of the machine, and once more with recompute=gate_up (the MLPs' gate/up products
# recomputed in the backward: the memory-saving setting). Prints a table: ms/step, device
# memory, reference / trm.
# usage: bench/gpu_vs_ref.sh TRM_BINARY REF_DIR   env: STEPS (10), WARMUP (3), CONFIGS
set -uo pipefail
TRM=${1:-build/trm}
REF=${2:-.ref}
CONFIGS=${CONFIGS:-sudoku_mlp sudoku_att maze_att}
S=${STEPS:-10}
W=${WARMUP:-3}
export PYTHONUNBUFFERED=1
out=/tmp/gpu_vs_ref
rm -rf $out && mkdir -p $out
. "$(dirname "$0")/common.sh"
STEPS=$S WARMUP=$W COMPILE="true false" bash "$(dirname "$0")/gpu.sh" "$TRM" $CONFIGS >$out/trm1.jsonl 2>$out/trm1.err
for c in $CONFIGS; do
  python3 "$REF/ref_bench.py" "$REF" "$c" --compile --steps $((S * 2)) --warmup 5 >$out/ref_$c.json 2>$out/ref_$c.err ||
    tail -3 $out/ref_$c.err
done
STEPS=$S WARMUP=$W COMPILE=true bash "$(dirname "$0")/gpu.sh" "$TRM" $CONFIGS >$out/trm2.jsonl 2>$out/trm2.err
STEPS=$S WARMUP=$W COMPILE=true EXTRA=recompute=gate_up bash "$(dirname "$0")/gpu.sh" "$TRM" $CONFIGS \
  >$out/trm3.jsonl 2>$out/trm3.err
head -1 $out/trm1.jsonl
printf "%-11s %10s %10s %10s %10s %8s %9s %9s %10s %9s\n" config "trm c=on" "again" "c=off" "reference" "ref/trm" \
  "trm GiB" "ref GiB" "gate_up ms" "gate_up GiB"
for c in $CONFIGS; do
  grep "\"$c\".*\"compile\": true" $out/trm1.jsonl >$out/a.json
  grep "\"$c\".*\"compile\": false" $out/trm1.jsonl >$out/b.json
  grep "\"$c\"" $out/trm2.jsonl >$out/c.json
  grep "\"$c\"" $out/trm3.jsonl >$out/d.json
  t1=$(field ms_per_step_median $out/a.json) t2=$(field ms_per_step_median $out/c.json)
  t0=$(field ms_per_step_median $out/b.json) mem=$(field device_mem_gib $out/a.json)
  r=$(field step_ms_median $out/ref_$c.json) rm_=$(field peak_mem_gb $out/ref_$c.json)
  ratio=$(python3 -c "print(f'{$r / max($t1, $t2):.3f}')" 2>/dev/null)
  printf "%-11s %10s %10s %10s %10s %8s %9s %9s %10s %9s\n" "$c" "$t1" "$t2" "$t0" "$r" "${ratio}x" "$mem" "$rm_" \
    "$(field ms_per_step_median $out/d.json)" "$(field device_mem_gib $out/d.json)"
done
echo "raw:"; cat $out/ref_*.json; cat $out/trm1.jsonl $out/trm3.jsonl
