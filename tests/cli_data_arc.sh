#!/usr/bin/env bash
# CLI test of `trm data arc`: build ARC-AGI-1 (training + evaluation, 2 augmentations)
# from the handful of tasks in tests/data/arc, check the layout and sizes, determinism, the refusals, and that a
# 2-step `trm pretrain` with a tiny model starts on it.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
PREFIX="$SRC/tests/data/arc/arc-agi"

"$TRM" data arc --input-file-prefix "$PREFIX" --subsets training evaluation --test-set-name evaluation \
  --num-aug 2 --seed 1 --out data 2>log.txt || { cat log.txt; fail "data arc"; }
for f in identifiers.json test_puzzles.json train/dataset.json test/dataset.json \
         train/all__inputs.npy train/all__labels.npy train/all__puzzle_identifiers.npy \
         train/all__puzzle_indices.npy train/all__group_indices.npy test/all__inputs.npy; do
  [ -f "data/$f" ] || fail "missing data/$f"
done
grep -q "Total puzzles: 40" log.txt || fail "expected 40 puzzles: $(cat log.txt)"
# 40 puzzles × 3 members in train, 16 × 3 in test (no duplicate augmentations at this seed)
grep -q '"total_groups":40' data/train/dataset.json || fail "train groups: $(cat data/train/dataset.json)"
grep -q '"total_puzzles":120' data/train/dataset.json || fail "train puzzles"
grep -q '"total_groups":16' data/test/dataset.json || fail "test groups: $(cat data/test/dataset.json)"
grep -q '"num_puzzle_identifiers":121' data/test/dataset.json || fail "identifier count"
grep -q '"seq_len":900' data/test/dataset.json && grep -q '"vocab_size":12' data/test/dataset.json \
  || fail "seq_len/vocab"
head -c 64 data/train/all__inputs.npy | grep -q "'|u1'" || fail "inputs are not uint8"
grep -q '^\["<blank>",' data/identifiers.json || fail "identifiers start"
grep -q '|||t[0-7]|||0[1-9]\{9\}"' data/identifiers.json || fail "no augmented names"
# test_puzzles.json: the 16 evaluation puzzles, with solutions
n=$(grep -o '"test":' data/test_puzzles.json | wc -l)
[ "$n" = 16 ] || fail "test_puzzles.json holds $n puzzles"
grep -q '"output"' data/test_puzzles.json || fail "no outputs in test_puzzles.json"

# deterministic for a seed
"$TRM" data arc --input-file-prefix "$PREFIX" --subsets training evaluation --test-set-name arc-agi_evaluation \
  --num-aug 2 --seed 1 --out data2 2>/dev/null || fail "data arc (basename test set name)"
cmp -s data/train/all__inputs.npy data2/train/all__inputs.npy || fail "not deterministic"
cmp -s data/identifiers.json data2/identifiers.json || fail "identifiers not deterministic"

# refusals
"$TRM" data arc --input-file-prefix "$PREFIX" --subsets training --test-set-name evaluation --num-aug 0 \
  --out data 2>err.txt && fail "overwrote an existing dataset"
grep -q "already exists" err.txt || fail "no 'already exists' message"
"$TRM" data arc --input-file-prefix "$PREFIX" --subsets nosuch --test-set-name evaluation --out data3 2>err.txt \
  && fail "accepted a missing subset"
grep -q "arc-agi_nosuch_challenges.json" err.txt || fail "missing-file message: $(cat err.txt)"
[ ! -e data3 ] || fail "left a dataset behind after an error"
"$TRM" data arc --subsets training --test-set-name evaluation --out data3 2>err.txt && fail "no prefix accepted"
grep -q "input-file-prefix" err.txt || fail "missing-prefix message"

# a tiny model trains 2 steps on it
"$TRM" pretrain cfg=arc "data_paths=[data]" checkpoint_path=run global_batch_size=8 epochs=1 eval_interval=1 \
  arch.hidden_size=32 arch.num_heads=2 arch.H_cycles=1 arch.L_cycles=1 arch.L_layers=1 arch.halt_max_steps=1 \
  arch.forward_dtype=float32 arch.puzzle_emb_len=1 "evaluators=[]" +stop_after_steps=2 > train.txt 2>&1 \
  || { tail -20 train.txt; fail "pretrain on the ARC dataset"; }
grep -q "stop_after_steps=2" train.txt || { tail -20 train.txt; fail "did not stop after 2 steps"; }
echo OK
