#!/usr/bin/env bash
# CLI test of the 9x9 Sudoku path: sudoku-gen writes a CSV of unique puzzles, `trm data
# sudoku` builds an augmented dataset from it, `trm pretrain` trains a few steps on it;
# refusals (existing outputs) and CSV errors that name the line.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP/csv" && cd "$TMP" || exit 1
: "$GOLDEN"

"$TRM" data sudoku-gen --count 40 --out csv/train.csv --seed 4 > gen.txt || fail "sudoku-gen"
grep -q "puzzles/s" gen.txt || fail "sudoku-gen printed no throughput"
[ "$(head -1 csv/train.csv)" = "source,question,answer,rating" ] || fail "CSV header"
[ "$(grep -c '^trm-gen,' csv/train.csv)" = 40 ] || fail "expected 40 generated rows"
awk -F, 'NR > 1 { n = gsub(/[1-9]/, "", $2); if (n < 17 || n > 30 || length($3) != 81) exit 1 }' csv/train.csv \
  || fail "clue counts outside 17..30"
"$TRM" data sudoku-gen --count 2 --out csv/train.csv 2>err.txt && fail "sudoku-gen overwrote a CSV"
grep -q "already exists" err.txt || fail "no 'already exists' message from sudoku-gen"
"$TRM" data sudoku-gen --count 5 --out csv/test.csv --seed 5 --min-clues 30 --max-clues 30 > /dev/null || fail "sudoku-gen --min-clues"
awk -F, 'NR > 1 { n = gsub(/[1-9]/, "", $2); if (n != 30) exit 1 }' csv/test.csv || fail "--min-clues 30 not honoured"
cp "$SRC/tests/data/sudoku_hard.csv" csv/test.csv
"$TRM" data sudoku-gen --count 5 --out again.csv --seed 4 > /dev/null || fail "sudoku-gen again"
cmp -s <(head -6 csv/train.csv) again.csv || fail "the same --seed gave different puzzles"

"$TRM" data sudoku --csv-dir csv --out data --num-aug 3 --seed 1 > build.txt || fail "data sudoku"
for f in train/all__inputs.npy train/all__labels.npy train/all__group_indices.npy test/dataset.json identifiers.json; do
  [ -f "data/$f" ] || fail "missing data/$f"
done
grep -q '"total_groups":40' data/train/dataset.json || fail "train total_groups: $(cat data/train/dataset.json)"
grep -q '"vocab_size":11' data/train/dataset.json || fail "vocab_size"
grep -q '"total_groups":5' data/test/dataset.json || fail "test total_groups"
"$TRM" data sudoku --csv-dir csv --out data 2>err.txt && fail "overwrote an existing dataset"
grep -q "already exists" err.txt || fail "no 'already exists' message"

"$TRM" pretrain cfg=sudoku "data_paths=[data]" global_batch_size=16 epochs=2 eval_interval=2 \
  arch.hidden_size=32 arch.num_heads=2 arch.H_cycles=1 arch.L_cycles=1 arch.halt_max_steps=2 \
  arch.forward_dtype=float32 checkpoint_path=run > train.txt 2>&1 || { cat train.txt; fail "pretrain on the dataset"; }
[ -f run/step_5.safetensors ] || { cat train.txt; fail "expected a checkpoint after 5 steps (40 groups x 2 epochs / 16)"; }
grep -q '"kind":"eval"' run/metrics.jsonl || fail "no eval metrics"

# a bad row: the error names the file and line, exit status 1, nothing written
mkdir -p bad && cp csv/test.csv bad/test.csv
{ head -3 csv/train.csv; echo "x,123,456,7"; } > bad/train.csv
"$TRM" data sudoku --csv-dir bad --out bad_out 2>err.txt
rc=$?
[ "$rc" = 1 ] || fail "bad CSV exit status $rc, expected 1"
grep -q "train.csv:4: question has 3 characters" err.txt || fail "bad CSV message: $(cat err.txt)"
[ ! -e bad_out ] || fail "bad CSV left an output"
echo OK
