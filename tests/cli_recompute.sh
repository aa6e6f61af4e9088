#!/usr/bin/env bash
# CLI test of recompute (gate_up: the saved blocks' gate/up products are computed again in the
# backward from their kept inputs; true = all: each saved recursion pass keeps only its input
# and output and the backward runs the pass's blocks again): on cpu the same ops on the same
# inputs give the same bits, so per-step losses and the weights after training equal
# recompute=none exactly, for the token-mixing MLP and attention, TRM and HRM (two levels of
# saved calls); the activation arena it reports is smaller; any other value is refused.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
export OMP_NUM_THREADS=1

"$TRM" data sudoku4 --out data --train 160 --test 32 --seed 5 > /dev/null || fail "data sudoku4"
common=(cfg=tiny "data_paths=[data]" epochs=1 eval_interval=1 global_batch_size=32 arch.hidden_size=32
        arch.H_cycles=2 arch.L_cycles=2 arch.halt_max_steps=2 log_interval=1 stop_after_steps=5 device=cpu)
att=(arch.mlp_t=False arch.pos_encodings=rope arch.num_heads=2)
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*'; }
# the compile report, wrapped to 80 columns, read as one line
report() { tr '\n' ' ' < "$1" | sed 's/  */ /g'; }
arena() { report "$1" | sed -n 's/.*compile: .*activations \([0-9.e+-]*\) GiB.*/\1/p'; }

check() { # name, then overrides
  local name=$1
  shift
  for r in none gate_up all; do
    "$TRM" pretrain "${common[@]}" "$@" recompute=$r checkpoint_path="${name}_$r" > "${name}_$r.txt" 2>&1 ||
      { cat "${name}_$r.txt"; fail "$name recompute=$r"; }
  done
  [ "$(losses "${name}_none" | wc -l)" = 5 ] || fail "$name: expected 5 logged steps"
  local off on r
  off=$(arena "${name}_none.txt")
  [ -n "$off" ] || fail "$name: no activation arena reported"
  for r in gate_up all; do
    diff <(losses "${name}_none") <(losses "${name}_$r") > /dev/null || fail "$name: losses differ with recompute=$r"
    "$TRM" inspect --diff "${name}_none/step_5.safetensors" "${name}_$r/step_5.safetensors" --tol 0 > "diff_${name}_$r.txt" ||
      { tail -3 "diff_${name}_$r.txt"; fail "$name: weights differ with recompute=$r"; }
    grep -q "largest relative difference: 0 " "diff_${name}_$r.txt" || fail "$name: inspect --diff compared nothing"
    on=$(arena "${name}_$r.txt")
    [ -n "$on" ] || fail "$name: no activation arena reported with recompute=$r"
    awk -v a="$on" -v b="$off" 'BEGIN { exit !(a < b) }' || fail "$name: arena $on GiB with recompute=$r, $off without"
    echo "$name: recompute=$r equals none bit for bit (5 steps, losses and weights); arena $on GiB vs $off GiB"
  done
  report "${name}_gate_up.txt" | grep -q "recompute=gate_up: gate/up products made again" || fail "$name: the compile report does not name recompute=gate_up"
}

check mlp_t
check attention "${att[@]}"
check hrm arch=hrm "${att[@]}"
grep -q "^model: hrm, " hrm_all.txt || fail "arch=hrm: the run does not say it trains hrm"

# the key's first, boolean form: true is all, False is none (as the compile report says)
"$TRM" pretrain "${common[@]}" recompute=true stop_after_steps=1 checkpoint_path=t > t.txt 2>&1 || { cat t.txt; fail "recompute=true"; }
report t.txt | grep -q "compile: .*recompute=all" || fail "recompute=true is not all"
"$TRM" pretrain "${common[@]}" recompute=False stop_after_steps=1 checkpoint_path=f > f.txt 2>&1 || { cat f.txt; fail "recompute=False"; }
report f.txt | grep -q "compile: .*recompute=" && fail "recompute=False recomputes"
"$TRM" pretrain "${common[@]}" recompute=sometimes checkpoint_path=bad > bad.txt 2>&1 && fail "recompute=sometimes accepted"
grep -q "recompute" bad.txt || { cat bad.txt; fail "no message naming recompute"; }
echo "recompute=sometimes refused: $(grep -m1 recompute bad.txt)"
