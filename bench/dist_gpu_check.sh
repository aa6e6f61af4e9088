#!/usr/bin/env bash
# Correctness of data-parallel training on GPUs (issues 6 and 17), on a machine with NGPU+ GPUs:
# the 4x4 Sudoku config (cfg=tiny, float32, shallow) trained on one GPU and on NGPU
# (`--nproc-per-node NGPU`, NCCL): per-step losses and final weights compared; an NGPU run
# stopped and resumed against the uninterrupted one (bit-exact expected: the kernels are
# deterministic); the NGPU checkpoint resumed on one GPU, and evaluated by `trm generate` on cuda
# and on cpu.
# usage: bench/dist_gpu_check.sh [TRM_BINARY]   env: NGPU (2), WORK (temp dir), STEPS (200)
set -euo pipefail
TRM=${1:-build/trm}
NGPU=${NGPU:-2}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
STEPS=${STEPS:-200}
if ! [[ $NGPU =~ ^[1-9][0-9]*$ ]] || [ "$NGPU" -lt 2 ]; then
  echo "dist_gpu_check.sh: NGPU=$NGPU: expected a GPU count >= 2" >&2
  exit 2
fi
have=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
[ "$NGPU" -le "$have" ] || { echo "dist_gpu_check.sh: NGPU=$NGPU, but this machine has $have GPUs" >&2; exit 2; }
cd "$work"
[ -d data ] || "$TRM" data sudoku4 --out data --train 2000 --test 500 --seed 3 > /dev/null
# shallow recursion and lr 1e-4, as tests/cli_distributed.sh: cfg=tiny's 3x6 cycles over 16 ACT
# steps amplify any change of summation order chaotically (on cpu, 1 vs 2 threads in one
# process differ by 1e-2 in the loss after 10 steps, as much as 1 vs 2 ranks); cfg=tiny's global
# batch of 64 splits over 2, 4 or 8 GPUs
common=(cfg=tiny "data_paths=[data]" device=cuda arch.forward_dtype=float32 arch.H_cycles=1 arch.L_cycles=2
        arch.halt_max_steps=2 lr=1e-4 log_interval=1 stop_after_steps="$STEPS" +project_name=dist +run_name=check)
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
# largest relative difference of the inner.* weights; non-zero with a message when nothing was
# compared (inspect failed, no inner.* row, a value that is not a number); run in $(...), so
# callers check its status
weights_rel() {
  local out
  out=$("$TRM" inspect --diff "$1" "$2") || { echo "dist_gpu_check.sh: trm inspect --diff $1 $2 failed" >&2; return 1; }
  awk '$1 ~ /^inner\./ { n++; if ($3 !~ /^[0-9.eE+-]+$/) bad = 1; else if ($3 + 0 > m) m = $3 + 0 }
       END { if (bad || !n) exit 1; printf "%.3g", m }' <<< "$out" ||
    { echo "dist_gpu_check.sh: no comparable inner.* weights in trm inspect --diff $1 $2" >&2; return 1; }
}
# the NGPU runs keep the 2-GPU names (two, res) when NGPU is 2, as this script's output always had
multi=two
[ "$NGPU" = 2 ] || multi=gpus$NGPU
rm -rf one "$multi" res one_from_multi
"$TRM" pretrain "${common[@]}" checkpoint_path=one > one.txt 2>&1 || { cat one.txt; exit 1; }
"$TRM" pretrain --nproc-per-node "$NGPU" "${common[@]}" checkpoint_path="$multi" > "$multi.txt" 2>&1 || { cat "$multi.txt"; exit 1; }
ck=step_$STEPS.safetensors
paste <(losses one) <(losses "$multi") | awk -v g="$NGPU" '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if (NR <= 10 && r > m10) m10 = r; n++ }
  END { printf "1 vs %d GPUs, %d steps (float32): lm_loss largest relative difference %.3g (first 10 steps %.3g)\n", g, n, m, m10 }'
rel=$(weights_rel one/"$ck" "$multi/$ck") || exit 1
echo "weights: largest relative difference $rel"

half=$((STEPS / 2))
"$TRM" pretrain --nproc-per-node "$NGPU" "${common[@]}" checkpoint_path=res stop_after_steps=$half > res1.txt 2>&1 || { cat res1.txt; exit 1; }
"$TRM" pretrain --nproc-per-node "$NGPU" "${common[@]}" checkpoint_path=res resume=auto > res2.txt 2>&1 || { cat res2.txt; exit 1; }
"$TRM" inspect --diff "$multi/$ck" res/"$ck" --tol 0 | tail -1 | sed "s/^/$NGPU-GPU resume at step $half vs uninterrupted: /"

# the NGPU run's half-way checkpoint continued on one GPU, against the uninterrupted NGPU run
mkdir one_from_multi && cp res/step_$half.safetensors res/config.yaml one_from_multi/
"$TRM" pretrain "${common[@]}" checkpoint_path=one_from_multi resume=auto > one_from_multi.txt 2>&1 || { cat one_from_multi.txt; exit 1; }
rel=$(weights_rel one_from_multi/"$ck" "$multi/$ck") || exit 1
echo "$NGPU-GPU checkpoint of step $half continued on 1 GPU vs the $NGPU-GPU run: weights largest relative difference $rel"

for dev in cuda cpu; do
  "$TRM" generate --checkpoint "$multi/$ck" --data data --json device=$dev > gen_$dev.json
  echo "generate on $dev: $(grep -o '"all/exact_accuracy":[^,}]*' gen_$dev.json) $(grep -o '"all/accuracy":[^,}]*' gen_$dev.json)"
done
