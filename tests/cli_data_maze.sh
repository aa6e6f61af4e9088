#!/usr/bin/env bash
# CLI test of `trm data maze-gen` and `trm data maze`: generate small mazes, build an
# augmented dataset, train a few steps on it, and the refusals (existing outputs, a bad CSV
# named by file and line).
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP/csv" && cd "$TMP" || exit 1

"$TRM" data maze-gen --count 24 --size 12 --seed 1 --out csv/train.csv > gen.txt || fail "maze-gen train"
"$TRM" data maze-gen --count 8 --size 12 --seed 2 --out csv/test.csv || fail "maze-gen test"
grep -q "24 mazes 12x12" gen.txt || fail "maze-gen summary: $(cat gen.txt)"
[ "$(head -1 csv/train.csv)" = "source,question,answer,rating" ] || fail "CSV header"
[ "$(wc -l < csv/train.csv)" = 25 ] || fail "CSV rows"
"$TRM" data maze-gen --count 2 --size 12 --out csv/train.csv 2>err.txt && fail "maze-gen overwrote a CSV"
grep -q "already exists" err.txt || fail "maze-gen overwrite message"
"$TRM" data maze-gen --count 2 --size 12 --min-path-len 60 --out big.csv 2>err.txt && fail "impossible path length accepted"
grep -q "60" err.txt || fail "path length message: $(cat err.txt)"

"$TRM" data maze --csv-dir csv --out data --aug || fail "data maze"
grep -q '"total_groups":24' data/train/dataset.json || fail "train total_groups: $(cat data/train/dataset.json)"
grep -q '"seq_len":144' data/train/dataset.json || fail "seq_len"
grep -q '"total_groups":8' data/test/dataset.json || fail "test total_groups"
[ "$(cat data/identifiers.json)" = '["<blank>"]' ] || fail "identifiers.json"
"$TRM" data maze --csv-dir csv --out data 2>err.txt && fail "overwrote an existing dataset"
grep -q "already exists" err.txt || fail "no 'already exists' message"

"$TRM" pretrain cfg=maze "data_paths=[data]" checkpoint_path=run global_batch_size=16 epochs=2 eval_interval=1 \
  arch.hidden_size=32 arch.num_heads=2 arch.H_cycles=1 arch.L_cycles=1 arch.halt_max_steps=2 \
  arch.forward_dtype=float32 > train.txt 2>&1 || { cat train.txt; fail "pretrain on the maze dataset"; }
grep -q '"kind":"eval"' run/metrics.jsonl || fail "no eval metrics"
ls run/step_*.safetensors > /dev/null 2>&1 || fail "no checkpoint"

mkdir -p bad && head -3 csv/train.csv > bad/train.csv && cp csv/test.csv bad/
sed -n 4p csv/train.csv | sed 's/S/X/' >> bad/train.csv
"$TRM" data maze --csv-dir bad --out bad_data 2>err.txt
rc=$?
[ "$rc" = 1 ] || fail "bad CSV exit status $rc, expected 1"
grep -q "train.csv:4: question: character 'X'" err.txt || fail "bad CSV message: $(cat err.txt)"
[ ! -e bad_data ] || fail "bad CSV left an output"
echo "ok"
