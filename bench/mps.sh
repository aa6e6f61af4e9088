#!/usr/bin/env bash
# mps benchmark (issue 11): ms/step (median) of the Vulkan-compute mps backend beside trm's other
# backends on the same machine, float32 (mps has no bf16), synthetic data, compile off (mps has
# no compile stage; the others run op by op too, so the kernels are compared, not the graphs).
#   tiny        cfg=tiny's model on the 4x4 Sudoku shape: seq 16, vocab 6, hidden 64, mlp_t, batch 64
#   sudoku_att  bench/gpu.sh's sudoku_att: seq 81, vocab 11, hidden 512, attention + RoPE,
#               L_cycles 6, H_cycles 3, batch 768
# Each line is trm bench's JSON as it is: for mps it carries the command stream's counters per step
# (dispatches_per_step, barriers_per_step, submits_per_step, host_waits_per_step,
# record_ms_per_step, host_wait_ms_per_step).
# usage: bench/mps.sh [TRM_BINARY] [DEVICE...]   (default: mps cuda; on a laptop: mps cpu)
#        env: CONFIGS ("tiny sudoku_att"), STEPS (10), WARMUP (tiny 100, sudoku_att 3)
set -euo pipefail
TRM=${1:-build/trm}
shift || true
DEVICES=("$@")
[ ${#DEVICES[@]} -gt 0 ] || DEVICES=(mps cuda)
declare -A args=(
  [tiny]="cfg=tiny --seq-len 16 --vocab 6"
  [sudoku_att]="arch.hidden_size=512 arch.num_heads=8 arch.expansion=4 arch.L_layers=2 arch.H_cycles=3
                arch.puzzle_emb_len=16 arch.halt_max_steps=16 arch.mlp_t=False arch.pos_encodings=rope
                arch.L_cycles=6 global_batch_size=768 --seq-len 81 --vocab 11"
)
# Warm-up steps unless WARMUP says: on an H100 tiny's mps steps took 28 ms after 3 warm-up
# steps and 7 ms after 100 (cuda's the same either way; likely the GPU's clocks, slow to rise
# while 7 ms steps of small dependent kernels leave it mostly idle), so tiny warms up for 100
# steps: about a second on a GPU (on lavapipe pass WARMUP=1).
declare -A warm=([tiny]=100 [sudoku_att]=3)
"$TRM" devices | sed -n 's/^  \(cpu\|cuda\|mps\) .*/# &/p'
for name in ${CONFIGS:-tiny sudoku_att}; do
  for dev in "${DEVICES[@]}"; do
    # shellcheck disable=SC2086
    out=$("$TRM" bench ${args[$name]} arch.forward_dtype=float32 compile=false device="$dev" --num-ids 1 \
          --steps "${STEPS:-10}" --warmup "${WARMUP:-${warm[$name]}}" --json 2>/dev/null) || out='{"error": "failed"}'
    echo "{\"config\": \"$name\", \"device\": \"$dev\", ${out#\{}"
  done
done
