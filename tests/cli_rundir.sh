#!/usr/bin/env bash
# A run directory belongs to one run: a second `trm pretrain` into a directory in use is
# refused at once, naming the holder's pid; a dead holder's lock is taken over; a new run
# into a directory that holds one is refused with the choices, and overwrite=true moves the
# old run aside (never deletes it); after kill -9 and resume=auto, metrics.jsonl holds each
# (step, kind) once and the killed run's temporary files are gone.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
export OMP_NUM_THREADS=1
"$TRM" data sudoku4 --out d4 --train 256 --test 32 >/dev/null 2>&1 || fail "data sudoku4"
A=(cfg=tiny "data_paths=[d4]" device=cpu log_interval=1)

unique_records() { # file: every (step, kind) once
  python3 - "$1" <<'PY'
import json, sys
r = [(d["step"], d["kind"]) for d in map(json.loads, open(sys.argv[1]))]
sys.exit(0 if len(r) == len(set(r)) and r else 1)
PY
}
wait_for_step() { # dir step: until metrics.jsonl has a record past step (60 s at most)
  for _ in $(seq 600); do
    if [ -f "$1/metrics.jsonl" ] && python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
s = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.endswith("\n")]
sys.exit(0 if s and max(s) > int(sys.argv[2]) else 1)
PY
    then return 0; fi
    sleep 0.1
  done
  return 1
}

# 1. a new run into a directory that holds one is refused, with the choices
"$TRM" pretrain "${A[@]}" checkpoint_path=run +stop_after_steps=5 > o1.txt 2>&1 || { cat o1.txt; fail "first run"; }
"$TRM" pretrain "${A[@]}" checkpoint_path=run +stop_after_steps=5 > o2.txt 2>&1 && fail "second new run into run/ accepted"
grep -q "run already holds a run" o2.txt || fail "no 'already holds a run': $(cat o2.txt)"
for w in "resume=auto" "+run_name=NAME" "overwrite=true"; do grep -qF "$w" o2.txt || fail "refusal does not offer $w"; done
[ -f run/step_5.safetensors ] && [ "$(wc -l < run/metrics.jsonl)" = 5 ] || fail "the refused run touched run/"

# 2. overwrite=true moves the old run aside, and the new run's config does not carry it
"$TRM" pretrain "${A[@]}" checkpoint_path=run +stop_after_steps=3 overwrite=true > o3.txt 2>&1 || { cat o3.txt; fail "overwrite"; }
[ -f run.prev-1/step_5.safetensors ] && [ -f run.prev-1/metrics.jsonl ] || fail "old run not kept in run.prev-1"
[ -f run/step_3.safetensors ] && [ ! -e run/step_5.safetensors ] || fail "new run not alone in run/"
grep -q "overwrite" run/config.yaml && fail "overwrite stored in config.yaml"
"$TRM" pretrain "${A[@]}" checkpoint_path=run resume=auto +stop_after_steps=6 > o4.txt 2>&1 || { cat o4.txt; fail "resume after overwrite"; }
[ -d run.prev-2 ] && fail "a resume moved the run aside again"
"$TRM" pretrain "${A[@]}" checkpoint_path=run resume=auto overwrite=true > o4b.txt 2>&1 && fail "resume and overwrite together accepted"

# 3. two processes into one directory: the second is refused at once, naming the first's pid
"$TRM" pretrain "${A[@]}" checkpoint_path=busy +stop_after_steps=10 > b0.txt 2>&1 || { cat b0.txt; fail "busy run"; }
"$TRM" pretrain "${A[@]}" checkpoint_path=busy resume=auto > b1.txt 2>&1 &
first=$!
wait_for_step busy 12 || { kill $first; fail "the resumed run did not get past step 12: $(tail -3 b1.txt)"; }
start=$(date +%s)
"$TRM" pretrain "${A[@]}" checkpoint_path=busy resume=auto > b2.txt 2>&1 && { kill $first; fail "second process accepted"; }
grep -q "busy is in use by another trm pretrain (pid $first)" b2.txt || { kill $first; fail "holder not named: $(cat b2.txt)"; }
[ $(( $(date +%s) - start )) -le 20 ] || { kill $first; fail "refusal took too long"; }

# 4. kill -9, then resume=auto: each (step, kind) once in metrics.jsonl, temporary files gone
kill -9 $first; wait $first 2>/dev/null
: > busy/step_999.safetensors.tmp.12345
"$TRM" pretrain "${A[@]}" checkpoint_path=busy resume=auto +stop_after_steps=30 > b3.txt 2>&1 ||
  { cat b3.txt; fail "resume after kill -9 (a dead holder's lock must be taken over)"; }
grep -q "resumed from busy/step_10.safetensors at step 10" b3.txt || fail "did not resume at step 10: $(head b3.txt)"
unique_records busy/metrics.jsonl || fail "metrics.jsonl repeats a (step, kind) after the resume"
[ "$(grep -c '"kind":"train"' busy/metrics.jsonl)" = 30 ] || fail "train records 1..30 expected: $(cut -c1-30 busy/metrics.jsonl)"
ls busy | grep -q '\.tmp\.' && fail "temporary files left: $(ls busy)"
echo OK
