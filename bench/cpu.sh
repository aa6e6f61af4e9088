#!/usr/bin/env bash
# CPU benchmark of issue 3: ms/step (median), examples/s and peak RSS for tiny_mlp and
# tiny_att on synthetic data (seq_len 81, vocab 11, one puzzle id, hidden 128, heads 2,
# expansion 4, L_layers 2, H_cycles 2, L_cycles 2, puzzle_emb_len 4, batch 64, float32).
# usage: bench/cpu.sh [TRM_BINARY] [THREADS...]   (default: build/trm, $(nproc))
set -euo pipefail
TRM=${1:-build/trm}
shift || true
THREADS=("$@")
[ ${#THREADS[@]} -gt 0 ] || THREADS=("$(nproc)")
common=(global_batch_size=64 arch.hidden_size=128 arch.num_heads=2 arch.expansion=4 arch.L_layers=2
        arch.H_cycles=2 arch.L_cycles=2 arch.puzzle_emb_len=4 arch.forward_dtype=float32 device=cpu compile=false)
declare -A variant=(
  [tiny_mlp]="arch.mlp_t=True arch.pos_encodings=none"
  [tiny_att]="arch.mlp_t=False arch.pos_encodings=rope"
)
# OpenBLAS's kernel choice is printed; where OPENBLAS_CORETYPE is unset and OpenBLAS falls
# back to its generic kernel, trm itself selects the AVX2/AVX-512 one (kernels/cpu/cpu_env.c).
echo "# OpenBLAS core: $(OPENBLAS_VERBOSE=2 "$TRM" version 2>&1 | sed -n 's/^Core: //p' | tail -1) (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
echo "# $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
for t in "${THREADS[@]}"; do
  for name in tiny_mlp tiny_att; do
    # shellcheck disable=SC2086
    out=$(OMP_NUM_THREADS=$t "$TRM" bench "${common[@]}" ${variant[$name]} --seq-len 81 --vocab 11 --num-ids 1 \
          --steps "${STEPS:-20}" --warmup 3 --json)
    echo "{\"config\": \"$name\", \"threads\": $t, ${out#\{}"
  done
done
