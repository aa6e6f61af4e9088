#!/usr/bin/env bash
# Correctness of data-parallel training on GPUs (issue 6), on a machine with 2+ GPUs: the 4x4
# Sudoku config (cfg=tiny, float32, shallow) trained on one GPU and on two (`--nproc-per-node 2`, NCCL):
# per-step losses and final weights compared; a 2-GPU run stopped and resumed against the
# uninterrupted one (bit-exact expected: the kernels are deterministic); the 2-GPU checkpoint
# evaluated by `trm generate` on cuda and on cpu.
# usage: bench/dist_gpu_check.sh [TRM_BINARY]   env: WORK (temp dir), STEPS (200)
set -euo pipefail
TRM=${1:-build/trm}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
STEPS=${STEPS:-200}
cd "$work"
[ -d data ] || "$TRM" data sudoku4 --out data --train 2000 --test 500 --seed 3 > /dev/null
# shallow recursion and lr 1e-4, as tests/cli_distributed.sh: cfg=tiny's 3x6 cycles over 16 ACT
# steps amplify any change of summation order chaotically (on cpu, 1 vs 2 threads in one
# process differ by 1e-2 in the loss after 10 steps, as much as 1 vs 2 ranks)
common=(cfg=tiny "data_paths=[data]" device=cuda arch.forward_dtype=float32 arch.H_cycles=1 arch.L_cycles=2
        arch.halt_max_steps=2 lr=1e-4 log_interval=1 stop_after_steps="$STEPS" +project_name=dist +run_name=check)
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
rm -rf one two res
"$TRM" pretrain "${common[@]}" checkpoint_path=one > one.txt 2>&1 || { cat one.txt; exit 1; }
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=two > two.txt 2>&1 || { cat two.txt; exit 1; }
ck=step_$STEPS.safetensors
paste <(losses one) <(losses two) | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if (NR <= 10 && r > m10) m10 = r; n++ }
  END { printf "1 vs 2 GPUs, %d steps (float32): lm_loss largest relative difference %.3g (first 10 steps %.3g)\n", n, m, m10 }'
"$TRM" inspect --diff one/$ck two/$ck | awk '$1 ~ /^inner\./ { if ($3 > m) m = $3 } END { printf "weights: largest relative difference %.3g\n", m }'

half=$((STEPS / 2))
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=res stop_after_steps=$half > res1.txt 2>&1 || { cat res1.txt; exit 1; }
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=res resume=auto > res2.txt 2>&1 || { cat res2.txt; exit 1; }
"$TRM" inspect --diff two/$ck res/$ck --tol 0 | tail -1 | sed "s/^/2-GPU resume at step $half vs uninterrupted: /"

for dev in cuda cpu; do
  "$TRM" generate --checkpoint two/$ck --data data --json device=$dev > gen_$dev.json
  echo "generate on $dev: $(grep -o '"all/exact_accuracy":[^,}]*' gen_$dev.json) $(grep -o '"all/accuracy":[^,}]*' gen_$dev.json)"
done
