#!/usr/bin/env bash
# The ARC evaluator end to end: build ARC-AGI-1's evaluation subset (its test pairs are
# the test split), train a tiny model for one chunk with the default evaluator arc@ARC,
# and check that ARC/pass@K reach metrics.jsonl and a submission.json is written; then the
# same from `trm generate`.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

"$TRM" data arc --input-file-prefix "$SRC/tests/data/arc/arc-agi" --subsets evaluation --test-set-name evaluation \
  --num-aug 1 --out data 2>/dev/null || fail "data arc"
[ -f data/test_puzzles.json ] || fail "no test_puzzles.json"
"$TRM" pretrain cfg=arc "data_paths=[data]" checkpoint_path=run global_batch_size=16 epochs=1 eval_interval=1 \
  arch.hidden_size=32 arch.num_heads=2 arch.H_cycles=1 arch.L_cycles=1 arch.L_layers=1 arch.halt_max_steps=1 \
  arch.forward_dtype=float32 arch.puzzle_emb_len=1 log_interval=5 > train.txt 2>&1 || { tail -20 train.txt; fail "pretrain"; }
ckpt=$(ls run/step_*.safetensors | head -1)
step=${ckpt##*step_}; step=${step%.safetensors}
for k in 1 2 5 10 100 1000; do
  grep -q "\"ARC/pass@$k\":" run/metrics.jsonl || fail "ARC/pass@$k missing from metrics.jsonl"
done
[ -s "run/evaluator_ARC_step_$step/submission.json" ] || fail "no submission.json for step $step"
grep -q '"attempt_1"' "run/evaluator_ARC_step_$step/submission.json" || fail "submission has no attempts"

"$TRM" generate --checkpoint "$ckpt" --data data --json > gen.json 2>gen.err || { cat gen.err; fail "generate"; }
want=$(grep -o '"ARC/pass@1":[^,}]*' run/metrics.jsonl | tail -1)
got=$(grep -o '"ARC/pass@1":[^,}]*' gen.json)
[ -n "$got" ] && [ "$want" = "$got" ] || fail "generate's ARC/pass@1 '$got' differs from training's '$want'"
[ -s run/evaluator_ARC_generate_test/submission.json ] || fail "generate wrote no submission.json"

# an evaluator that cannot work on the data is refused before training starts
"$TRM" data sudoku4 --out s4 --train 64 --test 16 > /dev/null || fail "data sudoku4"
"$TRM" pretrain cfg=tiny "data_paths=[s4]" "evaluators=[{name: arc@ARC}]" checkpoint_path=run2 2>err.txt \
  && fail "arc@ARC accepted on a Sudoku dataset"
grep -q "evaluator arc@ARC needs an ARC dataset" err.txt || fail "evaluator message: $(cat err.txt)"
echo "cli_train_arc: ok"
