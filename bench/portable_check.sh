#!/usr/bin/env bash
# Portable checkpoints across devices (issue 6), run on a machine with a GPU:
#  1. train cfg=tiny on cuda in bf16, evaluate the checkpoint with `trm generate` on cuda and on
#     cpu: token agreement of the predictions and exact accuracy of each;
#  2. resume a cuda run on cpu and then back on cuda (resume=FILE), and report the final accuracy.
# usage: bench/portable_check.sh [TRM_BINARY] [WORKDIR]
set -euo pipefail
TRM=${1:-build/trm}
W=${2:-/tmp/trm_portable}
rm -rf "$W"
mkdir -p "$W"
"$TRM" data sudoku4 --out "$W/data" --force >/dev/null
common=(cfg=tiny data_paths="[$W/data]" arch.forward_dtype=bfloat16)
"$TRM" pretrain "${common[@]}" device=cuda +run_name=a checkpoint_path="$W/a" >"$W/a.log" 2>&1
ck=$(ls -v "$W"/a/step_*.safetensors | tail -1)
for dev in cuda cpu; do
  "$TRM" generate --checkpoint "$ck" --data "$W/data" --json --output "$W/preds_$dev.npy" device=$dev \
    >"$W/gen_$dev.json" 2>"$W/gen_$dev.log"
done
python3 - "$W" <<'PY'
import json, sys, numpy as np
w = sys.argv[1]
a, b = np.load(f"{w}/preds_cuda.npy"), np.load(f"{w}/preds_cpu.npy")
def exact(dev):
    line = open(f"{w}/gen_{dev}.json").read().strip().splitlines()[-1]
    return json.loads(line).get("all/exact_accuracy")
print(f"generate from a cuda bf16 checkpoint: token agreement cuda vs cpu {np.mean(a == b):.5f} "
      f"({int(np.sum(a != b))} of {a.size} differ); exact accuracy cuda {exact('cuda')}, cpu {exact('cpu')}")
PY
# resume: 300 steps on cuda, to 600 on cpu, to the end on cuda
"$TRM" pretrain "${common[@]}" device=cuda stop_after_steps=300 +run_name=r checkpoint_path="$W/r" >"$W/r1.log" 2>&1
"$TRM" pretrain "${common[@]}" device=cpu stop_after_steps=600 resume="$W/r/step_300.safetensors" \
  +run_name=r checkpoint_path="$W/r" >"$W/r2.log" 2>&1
"$TRM" pretrain "${common[@]}" device=cuda resume="$W/r/step_600.safetensors" +run_name=r \
  checkpoint_path="$W/r" >"$W/r3.log" 2>&1
echo "resume cuda(300) -> cpu(600) -> cuda(end): $(grep -h '^resumed' "$W"/r2.log "$W"/r3.log | tr '\n' ' ')"
echo "  final: $(grep '^eval step' "$W/r3.log" | tail -1)"
echo "  uninterrupted cuda run: $(grep '^eval step' "$W/a.log" | tail -1)"
