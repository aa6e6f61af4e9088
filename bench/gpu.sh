#!/usr/bin/env bash
# GPU benchmark of issue 5: ms/step (median), examples/s, model TFLOP/s and device memory for
# sudoku_mlp, sudoku_att and maze_att on synthetic data, compile on and off, in one run.
# Shapes (all: hidden 512, heads 8, expansion 4, L_layers 2, H_cycles 3, puzzle_emb_len 16,
# halt_max_steps 16, bf16 unless DTYPE says otherwise):
#   sudoku_mlp  seq 81, vocab 11, mlp_t, no positions, L_cycles 6, batch 768
#   sudoku_att  seq 81, vocab 11, attention + RoPE,   L_cycles 6, batch 768
#   maze_att    seq 900, vocab 6, attention + RoPE,   L_cycles 4, batch 192
# usage: bench/gpu.sh [TRM_BINARY] [CONFIG...]   env: STEPS (20), WARMUP (5), DTYPE (bfloat16),
#        COMPILE ("true false"), EXTRA (more overrides for every config, e.g. recompute=true)
set -euo pipefail
TRM=${1:-build/trm}
shift || true
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(sudoku_mlp sudoku_att maze_att)
common=(arch.hidden_size=512 arch.num_heads=8 arch.expansion=4 arch.L_layers=2 arch.H_cycles=3
        arch.puzzle_emb_len=16 arch.halt_max_steps=16 arch.forward_dtype=${DTYPE:-bfloat16} device=cuda)
declare -A args=(
  [sudoku_mlp]="arch.mlp_t=True arch.pos_encodings=none arch.L_cycles=6 global_batch_size=768 --seq-len 81 --vocab 11"
  [sudoku_att]="arch.mlp_t=False arch.pos_encodings=rope arch.L_cycles=6 global_batch_size=768 --seq-len 81 --vocab 11"
  [maze_att]="arch.mlp_t=False arch.pos_encodings=rope arch.L_cycles=4 global_batch_size=192 --seq-len 900 --vocab 6"
)
command -v nvidia-smi >/dev/null && echo "# $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
for name in "${CONFIGS[@]}"; do
  for c in ${COMPILE:-true false}; do
    # shellcheck disable=SC2086
    out=$("$TRM" bench "${common[@]}" compile=$c ${args[$name]} ${EXTRA:-} --num-ids 1 \
          --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --json)
    echo "{\"config\": \"$name\", ${out#\{}"
  done
done
