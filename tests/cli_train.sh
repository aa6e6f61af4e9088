#!/usr/bin/env bash
# CLI test of the training path: build a 4x4 Sudoku dataset, train briefly, check the run
# directory, that `trm generate --json` reproduces the run's last evaluation, --input, and
# the refusals (existing dataset, bad device, missing checkpoint).
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

"$TRM" data sudoku4 --out data --train 256 --test 64 --seed 3 || fail "data sudoku4"
[ -f data/train/all__inputs.npy ] && [ -f data/test/dataset.json ] && [ -f data/identifiers.json ] || fail "dataset layout"
"$TRM" data sudoku4 --out data 2>err.txt && fail "overwrote an existing dataset"
grep -q "already exists" err.txt || fail "no 'already exists' message"

common=(cfg=tiny "data_paths=[data]" checkpoint_path=run epochs=2 eval_interval=2 global_batch_size=32
        arch.hidden_size=32 arch.H_cycles=2 arch.L_cycles=2 arch.halt_max_steps=4 log_interval=4)
"$TRM" pretrain "${common[@]}" eval_save_outputs=true > train.txt 2>&1 || { cat train.txt; fail "pretrain"; }
ckpt=run/step_16.safetensors
[ -f run/step_16_preds.npy ] && [ -f run/step_16_preds_q_halt.npy ] || fail "eval_save_outputs wrote no predictions"
[ -f "$ckpt" ] && [ -f run/config.yaml ] && [ -f run/metrics.jsonl ] || fail "run directory contents"
grep -q '"kind":"train"' run/metrics.jsonl || fail "no train metrics"
grep -q "hidden_size: 32" run/config.yaml || fail "config.yaml is not the resolved config"
"$TRM" inspect "$ckpt" > inspect.txt || fail "inspect checkpoint"
grep -q "inner.lm_head.weight" inspect.txt || fail "inspect lists no lm_head"

"$TRM" generate --checkpoint "$ckpt" --data data --json > gen.json || fail "generate --json"
last_eval=$(grep '"kind":"eval"' run/metrics.jsonl | tail -1)
for key in all/accuracy all/exact_accuracy all/lm_loss all/q_halt_loss all/steps all/q_halt_accuracy; do
  a=$(grep -o "\"$key\":[^,}]*" <<<"$last_eval")
  b=$(grep -o "\"$key\":[^,}]*" gen.json)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "generate does not reproduce $key: train '$a' vs generate '$b'"
done

"$TRM" generate --checkpoint "$ckpt" --data data --output preds.npy > /dev/null || fail "generate --output"
[ -f preds.npy ] && [ -f preds_q_halt.npy ] || fail "no prediction files"
"$TRM" generate --checkpoint "$ckpt" --input "1.3. .... .... 4..2" > solve.txt || fail "generate --input"
grep -q "prediction" solve.txt || fail "no prediction printed"
"$TRM" generate --checkpoint "$ckpt" --input "1.3" 2>err.txt && fail "accepted a partial puzzle"
grep -q "seq_len 16" err.txt || fail "partial puzzle message"
# --json with --input: one JSON object; with --data too, the metrics and the puzzles together
"$TRM" generate --checkpoint "$ckpt" --input "1.3. .... .... 4..2" --input "..2. 3... ...1 .4.." --json > solve.json ||
  fail "generate --input --json"
"$TRM" generate --checkpoint "$ckpt" --data data --input "1.3. .... .... 4..2" --json > both.json ||
  fail "generate --data --input --json"
if command -v python3 > /dev/null; then
  python3 - solve.json both.json <<'PY' || fail "generate --input --json is not the expected JSON"
import json, sys
a = json.load(open(sys.argv[1]))
assert [p["puzzle"] for p in a["puzzles"]] == [1, 2], a
p = a["puzzles"][0]
assert p["input"] == "1.3.........4..2" and len(p["prediction"]) == 16, p
assert p["input_tokens"][:4] == [2, 1, 4, 1] and len(p["prediction_tokens"]) == 16, p
assert p["act_steps"] == 4 and 0 < p["halting_confidence"] < 1, p
assert all(c in ".1234" for c in p["prediction"]), p
assert p["verdict"] in ("solved", "contradicts_given", "invalid") and p["why"], p
b = json.load(open(sys.argv[2]))
assert "all/exact_accuracy" in b and len(b["puzzles"]) == 1, sorted(b)
PY
fi
# a puzzle without a solution is reported as such, in text and in JSON
"$TRM" generate --checkpoint "$ckpt" --input "11.. .... .... ...." > nosol.txt || fail "generate --input (no solution)"
grep -q "^NOT solved: the puzzle has no solution: its row 1 holds 1 twice" nosol.txt || fail "no-solution text: $(cat nosol.txt)"
"$TRM" generate --checkpoint "$ckpt" --input "11.. .... .... ...." --json > nosol.json || fail "no-solution --json"
grep -q '"verdict":"no_solution"' nosol.json || fail "no-solution JSON: $(cat nosol.json)"
"$TRM" generate --checkpoint "$ckpt" --input "1.3x .... .... 4..2" 2>err.txt && fail "accepted an 'x' in a Sudoku"
grep -q "'x' at offset 3 is not a token of this model: this model takes the digits 1-4 for cells and '.' or '0' for blanks" \
  err.txt || fail "wrong-token message: $(cat err.txt)"
"$TRM" generate --checkpoint "$ckpt" --input "1.39 .... .... 4..2" 2>err.txt && fail "accepted a 9 in a 4x4 Sudoku"
grep -q "'9' at offset 3.*digits 1-4" err.txt || fail "out-of-range digit message: $(cat err.txt)"

"$TRM" pretrain "${common[@]}" device=mps:99 2>err.txt && fail "device=mps:99 accepted"
grep -Eq "no 'mps' backend|mps device\(s\) present" err.txt || fail "device=mps:99 message: $(cat err.txt)"
"$TRM" generate --checkpoint missing.safetensors --data data 2>err.txt && fail "missing checkpoint accepted"
grep -q "missing.safetensors" err.txt || fail "missing checkpoint message"
"$TRM" pretrain "${common[@]}" arch.no_such_key=1 2>err.txt && fail "unknown key accepted"
grep -q "no_such_key" err.txt || fail "unknown key message"
# SIGINT: finish the step, write a checkpoint, exit 130; resume=auto continues from it
"$TRM" pretrain "${common[@]}" checkpoint_path=run_sig epochs=200 eval_interval=100 log_interval=1 > sig.txt 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "^step 3/" sig.txt && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || { cat sig.txt; fail "SIGINT exit status $rc, expected 130"; }
saved=$(ls run_sig/step_*.safetensors 2>/dev/null | sed 's/.*step_\([0-9]*\).*/\1/' | sort -n | tail -1)
[ -n "$saved" ] || fail "no checkpoint after SIGINT"
grep -q "stopped by signal 2 at step $saved" run_sig/report.html || fail "report.html does not say the run was stopped"
"$TRM" pretrain "${common[@]}" checkpoint_path=run_sig epochs=200 eval_interval=100 resume=auto \
  stop_after_steps=$((saved + 2)) > resume.txt 2>&1 || { cat resume.txt; fail "resume=auto after SIGINT"; }
grep -q "resumed from run_sig/step_$saved.safetensors at step $saved" resume.txt || fail "did not resume from step $saved"
[ -f "run_sig/step_$((saved + 2)).safetensors" ] || fail "resumed run wrote no checkpoint at step $((saved + 2))"
echo "cli_train: ok"
