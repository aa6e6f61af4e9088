#!/usr/bin/env bash
# CLI test of the architectures: each of hrm, trm_singlez, trm_hier6 and transformers_baseline
# trains briefly from its preset, says so, writes its own carry fields and name into the
# checkpoint, and `trm generate` reproduces the run's last evaluation; generate, resume and
# load_checkpoint refuse a checkpoint of another architecture, and an unknown arch.name or a
# missing key is one message and exit status 1.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

"$TRM" data sudoku4 --out data --train 128 --test 32 --seed 5 > /dev/null || fail "data sudoku4"
common=(cfg=tiny "data_paths=[data]" epochs=2 eval_interval=2 global_batch_size=32 log_interval=4
        arch.hidden_size=32 arch.H_cycles=2 arch.halt_max_steps=3)

declare -A extra=(
  [hrm]="arch.L_cycles=2 arch.H_layers=1 arch.L_layers=1"
  [trm_singlez]="arch.L_cycles=2 arch.L_layers=1"
  [trm_hier6]="arch.L_cycles=3 arch.L_layers=1"
  [transformers_baseline]="arch.H_layers=2 arch.mlp_t=false arch.pos_encodings=rope"
)
declare -A states=(
  [hrm]="z_H z_L" [trm_singlez]="z_L" [trm_hier6]="z_H z_L1 z_L2 z_L3 z_L4 z_L5 z_L6" [transformers_baseline]="z_H"
)
declare -A absent=([hrm]="z_L1" [trm_singlez]="z_H" [trm_hier6]="z_L" [transformers_baseline]="z_L")
for a in hrm trm_singlez trm_hier6 transformers_baseline; do
  # shellcheck disable=SC2086
  "$TRM" pretrain arch=$a "${common[@]}" ${extra[$a]} checkpoint_path=run_$a > train_$a.txt 2>&1 \
    || { cat train_$a.txt; fail "pretrain arch=$a"; }
  grep -q "^model: $a, " train_$a.txt || fail "arch=$a: the run does not say it trains $a"
  ckpt=run_$a/step_8.safetensors
  [ -f "$ckpt" ] || fail "arch=$a: no checkpoint"
  "$TRM" inspect "$ckpt" > inspect_$a.txt || fail "inspect $a"
  name=$(sed -n 's/^name: //p' "$SRC/configs/arch/$a.yaml")
  grep -q "arch: $name" inspect_$a.txt || fail "arch=$a: the checkpoint does not name $name"
  for z in ${states[$a]}; do grep -q " carry\.$z " inspect_$a.txt || fail "arch=$a: no carry.$z"; done
  grep -q " carry\.${absent[$a]} " inspect_$a.txt && fail "arch=$a: carry.${absent[$a]} belongs to another architecture"
  "$TRM" generate --checkpoint "$ckpt" --data data --json > gen_$a.json 2> gen_$a.err || { cat gen_$a.err; fail "generate $a"; }
  last_eval=$(grep '"kind":"eval"' run_$a/metrics.jsonl | tail -1)
  for key in all/accuracy all/exact_accuracy all/lm_loss all/q_halt_loss all/steps; do
    x=$(grep -o "\"$key\":[^,}]*" <<<"$last_eval")
    y=$(grep -o "\"$key\":[^,}]*" gen_$a.json)
    [ -n "$x" ] && [ "$x" = "$y" ] || fail "arch=$a: generate does not reproduce $key: train '$x' vs generate '$y'"
  done
done
# HRM learns q_continue from its bootstrapped target; the baseline never does
grep -q '"train/q_continue_loss"' run_hrm/metrics.jsonl || fail "hrm logs no q_continue_loss"
grep -q '"train/q_continue_loss"' run_transformers_baseline/metrics.jsonl && fail "the baseline logs a q_continue_loss"

# another architecture's checkpoint: one message naming both, exit status 1
"$TRM" generate --checkpoint run_hrm/step_8.safetensors --data data arch=trm 2>err.txt >/dev/null; rc=$?
[ "$rc" = 1 ] || fail "generate arch=trm of an hrm checkpoint: exit $rc"
grep -q "is a checkpoint of recursive_reasoning.hrm@HierarchicalReasoningModel_ACTV1 (arch=hrm); this run builds recursive_reasoning.trm@" err.txt \
  || fail "generate refusal message: $(cat err.txt)"
"$TRM" pretrain resume=run_trm_hier6/step_8.safetensors arch=trm_singlez 2>err.txt >/dev/null && fail "resume into another architecture"
grep -q "(arch=trm_hier6); this run builds recursive_reasoning.trm_singlez@" err.txt || fail "resume refusal: $(cat err.txt)"
# shellcheck disable=SC2086
"$TRM" pretrain arch=trm_singlez "${common[@]}" ${extra[trm_singlez]} checkpoint_path=run_ft \
  load_checkpoint=run_trm_hier6/step_8.safetensors 2>err.txt >/dev/null && fail "load_checkpoint of another architecture"
grep -q "(arch=trm_hier6)" err.txt || fail "load_checkpoint refusal: $(cat err.txt)"

# an unknown name or a missing key: one line, exit status 1
"$TRM" pretrain "${common[@]}" arch.name=recursive_reasoning.trm@Nope 2>err.txt >/dev/null; rc=$?
[ "$rc" = 1 ] || fail "unknown arch.name: exit $rc"
[ "$(wc -l < err.txt)" = 1 ] || fail "unknown arch.name: more than one line: $(cat err.txt)"
grep -q "unknown architecture 'recursive_reasoning.trm@Nope'; trm builds .*transformers_baseline@Model_ACTV2" err.txt \
  || fail "unknown arch.name message: $(cat err.txt)"
"$TRM" pretrain arch=hrm "${common[@]}" "~arch.L_layers" 2>err.txt >/dev/null; rc=$?
[ "$rc" = 1 ] || fail "missing key: exit $rc"
grep -q "^trm pretrain: arch.L_layers: missing config key (arch.name recursive_reasoning.hrm@HierarchicalReasoningModel_ACTV1 needs it" err.txt \
  || fail "missing key message: $(cat err.txt)"
echo "cli_arch: ok"
