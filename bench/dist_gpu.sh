#!/usr/bin/env bash
# Data-parallel scaling on GPUs (issue 6): the published Sudoku recipe (cfg=sudoku: mlp_t,
# hidden 512, L_cycles 6, H_cycles 3, global batch 768, bf16) on a generated Sudoku dataset,
# trained for STEPS steps on one GPU and on NPROC GPUs (`--nproc-per-node`, NCCL), in one run.
# Prints examples/s of both (median of the logged intervals after the first, which holds the
# graph capture), the speed-up, and the largest relative difference of the logged train losses.
# usage: bench/dist_gpu.sh [TRM_BINARY]   env: NPROC (2), STEPS (60), LOG (10), WORK (temp dir)
set -euo pipefail
TRM=${1:-build/trm}
NPROC=${NPROC:-2} STEPS=${STEPS:-60} LOG=${LOG:-10}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work/csv"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/# /'

[ -f "$work/csv/train.csv" ] || "$TRM" data sudoku-gen --count 1000 --out "$work/csv/train.csv" --seed 1 > /dev/null
[ -f "$work/csv/test.csv" ] || "$TRM" data sudoku-gen --count 100 --out "$work/csv/test.csv" --seed 2 > /dev/null
[ -d "$work/data" ] || "$TRM" data sudoku --csv-dir "$work/csv" --out "$work/data" --num-aug 100 --seed 0 > /dev/null

common=(cfg=sudoku "data_paths=[$work/data]" epochs=1000 eval_interval=1000 device=cuda
        stop_after_steps="$STEPS" log_interval="$LOG" +run_name=bench)
run() { # $1 name, rest: extra arguments before the config
  local name=$1; shift
  rm -rf "$work/$name"
  "$TRM" pretrain "$@" "${common[@]}" checkpoint_path="$work/$name" > "$work/$name.txt" 2>&1 ||
    { cat "$work/$name.txt"; exit 1; }
}
# median ex/s of the logged intervals, the first one left out
rate() { grep -o '[0-9.]* ex/s' "$work/$1.txt" | awk 'NR > 1 { print $1 }' | sort -g |
         awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
losses() { grep '"kind":"train"' "$work/$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }

run one
run multi --nproc-per-node "$NPROC"
grep -m1 "^distributed" "$work/multi.txt" || true
r1=$(rate one) rn=$(rate multi)
echo "1 GPU: $r1 ex/s; $NPROC GPUs: $rn ex/s; speed-up $(awk -v a="$r1" -v b="$rn" 'BEGIN { printf "%.3f", b / a }')x"
paste <(losses one) <(losses multi) | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; n++ }
  END { printf "train lm_loss at %d log points: largest relative difference %.3g\n", n, m }'
echo "logs: $work/one.txt $work/multi.txt"
