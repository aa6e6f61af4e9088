#!/usr/bin/env bash
# The README's first block, run twice as a user would (the package and build steps left out:
# this build's trm stands in for build/trm; the data and the run made small so that CI can
# afford two runs): both runs exit 0, the second continues or finds the run finished without
# writing a step twice, and generate evaluates the run's last checkpoint both times.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP/build" && cd "$TMP" || exit 1
ln -s "$TRM" build/trm
export OMP_NUM_THREADS=2

awk '/^## Two commands/ {on = 1} on && /^```sh/ {inb = 1; next} inb && /^```/ {exit} inb' "$SRC/README.md" > block.sh
grep -q "build/trm pretrain" block.sh || fail "no pretrain in the README's first block"
# from the first trm command on; smaller data and a shorter run
sed -n '/^build\/trm /,$p' block.sh |
  sed -e 's|data sudoku4 --out data/sudoku4|& --train 96 --test 32|' \
      -e 's|\(build/trm pretrain [^&]*\) &&|\1 epochs=8 eval_interval=4 \&\&|' > run.sh
grep -q -- "--train 96" run.sh && grep -q "epochs=8" run.sh || fail "could not shorten the block: $(cat run.sh)"

for round in 1 2; do
  bash run.sh > "round$round.txt" 2>&1 || { cat "round$round.txt"; fail "round $round of the README block"; }
  grep -q '"all/exact_accuracy"' "round$round.txt" || fail "round $round: generate printed no metrics"
done
last=$(ls -v checkpoints/tiny-demo/step_*.safetensors | tail -1)
grep -q "the run is finished" round2.txt || fail "round 2 did not find the run finished: $(head round2.txt)"
python3 - checkpoints/tiny-demo/metrics.jsonl <<'PY' || fail "metrics.jsonl repeats a (step, kind)"
import json, sys
r = [(d["step"], d["kind"]) for d in map(json.loads, open(sys.argv[1]))]
sys.exit(0 if r and len(r) == len(set(r)) else 1)
PY
a=$(grep -o '"all/exact_accuracy":[^,}]*' round1.txt) b=$(grep -o '"all/exact_accuracy":[^,}]*' round2.txt)
[ "$a" = "$b" ] || fail "the two rounds evaluated different checkpoints ($a vs $b; last is $last)"
[ "$(ls checkpoints)" = tiny-demo ] || fail "a second run directory appeared: $(ls checkpoints)"
echo "cli_readme_block: ok ($last both times)"
