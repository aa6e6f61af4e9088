#!/usr/bin/env bash
# issue 13: bench/cpu.sh's shapes beside the reference PyTorch harness on the same CPU, in
# alternating rounds (reference, trm, reference, trm, ...) so that a noisy machine (the device
# host is a VM whose speed drifts by 20-40% between minutes) weighs on both alike; prints each
# round and the median of the rounds' medians.
# usage: bench/cpu_vs_ref.sh TRM_BINARY REF_DIR [ROUNDS] [THREADS]   env: DTYPE (float32), STEPS (10),
#   CPUS (a taskset list such as 0-3: both programs pinned to those cores, the laptop case),
#   TRM_BEFORE (another trm binary, say an older commit's, run after trm in every round)
#   REF_DIR: the reference's models/ and utils/ with ../shared/anchors/ref_bench.py beside them
set -euo pipefail
TRM=$1 REF=$2 ROUNDS=${3:-3} T=${4:-16}
. "$(dirname "$0")/common.sh"
DTYPE=${DTYPE:-float32}
pin=()
[ -n "${CPUS:-}" ] && pin=(taskset -c "$CPUS")
common=(global_batch_size=64 arch.hidden_size=128 arch.num_heads=2 arch.expansion=4 arch.L_layers=2
        arch.H_cycles=2 arch.L_cycles=2 arch.puzzle_emb_len=4 "arch.forward_dtype=$DTYPE" device=cpu compile=false)
declare -A variant=(
  [tiny_mlp]="arch.mlp_t=True arch.pos_encodings=none"
  [tiny_att]="arch.mlp_t=False arch.pos_encodings=rope"
)
# one trm's median ms/step on config $2
trm_ms() {
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$T "${pin[@]}" "$1" bench "${common[@]}" ${variant[$2]} --seq-len 81 --vocab 11 --num-ids 1 \
    --steps "${STEPS:-10}" --warmup 3 --json | field ms_per_step_median
}
for name in tiny_mlp tiny_att; do
  ref=() ours=() before=()
  for r in $(seq "$ROUNDS"); do
    a=$(OMP_NUM_THREADS=$T "${pin[@]}" python3 "$REF/ref_bench.py" "$REF" "$name" --device cpu --dtype "$DTYPE" \
        --steps "${STEPS:-10}" 2>/dev/null | tail -1 | field step_ms_median)
    b=$(trm_ms "$TRM" "$name") c=""
    if [ -n "${TRM_BEFORE:-}" ]; then
      c=$(trm_ms "$TRM_BEFORE" "$name")
      before+=("$c")
    fi
    echo "# $name round $r: reference $a ms, trm $b ms${c:+, trm before $c ms}"
    ref+=("$a") ours+=("$b")
  done
  rm=$(printf '%s\n' "${ref[@]}" | median) om=$(printf '%s\n' "${ours[@]}" | median)
  bm=""
  [ -n "${TRM_BEFORE:-}" ] && bm=", \"before_ms\": $(printf '%s\n' "${before[@]}" | median)"
  echo "{\"config\": \"$name\", \"dtype\": \"$DTYPE\", \"threads\": $T, \"rounds\": $ROUNDS, \"reference_ms\": $rm, \"trm_ms\": $om$bm, \"speedup\": $(awk -v a="$rm" -v b="$om" 'BEGIN { printf "%.2f", a / b }')}"
done
