#!/usr/bin/env bash
# Device-side proofs of issue 11 for the mps backend (prints a summary):
#  1. the 4x4 Sudoku task (cfg=tiny, 1000 steps) trained on mps reaches the exact accuracy it
#     reaches on cpu;
#  2. the mps checkpoint evaluated by `trm generate` on mps and on cpu: prediction agreement;
#  3. a run resumed mps (300 steps) -> cpu (600) -> mps (end) against the uninterrupted one.
# On a GPU host mps runs on the GPU's Vulkan driver; on a machine with only lavapipe it runs on
# the CPU and takes about 100x longer (set STEPS to shorten every run, e.g. STEPS=100).
# usage: bench/mps_check.sh [TRM_BINARY] [WORKDIR]
set -euo pipefail
TRM=${1:-build/trm}
W=${2:-/tmp/trm_mps_check}
rm -rf "$W"
mkdir -p "$W"
"$TRM" data sudoku4 --out "$W/data" --force >/dev/null
common=(cfg=tiny data_paths="[$W/data]" compile=false)
[ -n "${STEPS:-}" ] && common+=(stop_after_steps="$STEPS")
exact() { grep '"kind":"eval"' "$W/$1/metrics.jsonl" | tail -1 | sed 's/.*"all\/exact_accuracy":\([^,}]*\).*/\1/'; }
for dev in mps cpu; do
  t0=$(date +%s)
  "$TRM" pretrain "${common[@]}" device=$dev +run_name="full_$dev" checkpoint_path="$W/full_$dev" \
    >"$W/full_$dev.log" 2>&1 || tail -5 "$W/full_$dev.log"
  printf "cfg=tiny on %s: test exact accuracy %s (%d s)\n" "$dev" "$(exact "full_$dev")" "$(($(date +%s) - t0))"
done
ck=$(ls -v "$W"/full_mps/step_*.safetensors | tail -1)
for dev in mps cpu; do
  "$TRM" generate --checkpoint "$ck" --data "$W/data" --json --output "$W/preds_$dev.npy" device=$dev \
    >"$W/gen_$dev.json" 2>"$W/gen_$dev.log"
done
# the prediction files are int32 .npy of the same shape: compare their bytes after the header
npy_body() { tail -c +$((11 + $(od -An -tu2 -j8 -N2 "$1"))) "$1" | od -An -v -tu4 -w4; }
diffs=$(paste <(npy_body "$W/preds_mps.npy") <(npy_body "$W/preds_cpu.npy") | awk '$1 != $2 { n++ } END { print n + 0 }')
total=$(npy_body "$W/preds_mps.npy" | wc -l)
gen_exact() { grep -o '"all/exact_accuracy":[^,}]*' "$W/gen_$1.json" | tail -1 | cut -d: -f2; }
echo "generate from the mps checkpoint: $diffs of $total predictions differ between mps and cpu; exact accuracy mps $(gen_exact mps), cpu $(gen_exact cpu)"
half=${STEPS:-1000}
r1=$((half * 3 / 10)) r2=$((half * 6 / 10))
"$TRM" pretrain "${common[@]}" device=mps stop_after_steps=$r1 +run_name=r checkpoint_path="$W/r" >"$W/r1.log" 2>&1
"$TRM" pretrain "${common[@]}" device=cpu stop_after_steps=$r2 resume="$W/r/step_$r1.safetensors" \
  +run_name=r checkpoint_path="$W/r" >"$W/r2.log" 2>&1
"$TRM" pretrain "${common[@]}" device=mps resume="$W/r/step_$r2.safetensors" +run_name=r \
  checkpoint_path="$W/r" >"$W/r3.log" 2>&1
echo "resume mps($r1) -> cpu($r2) -> mps(end): final $(grep '^eval step' "$W/r3.log" | tail -1)"
echo "  uninterrupted mps run:                   $(grep '^eval step' "$W/full_mps.log" | tail -1)"
