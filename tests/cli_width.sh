#!/usr/bin/env bash
# Every line trm prints fits 80 columns: a whole default cpu run (cfg=tiny) piped and under
# script(1) at an 80-column terminal (the status line included: it is split at '\r'), and
# help, inspect, devices and bench (with the op profiler's tables too). Full detail stays in
# metrics.jsonl and report.html.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
export OMP_NUM_THREADS=2

# lines (split at \n and \r, escape sequences left out) wider than 80 columns in file $1
too_wide() {
  tr '\r' '\n' < "$1" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | awk -v f="$2" 'length($0) > 80 { printf "%s: %d columns: %s\n", f, length($0), $0; bad = 1 } END { exit bad }'
}
check() { too_wide "$1" "$2" || fail "$2 prints lines wider than 80 columns"; }

"$TRM" data sudoku4 --out data/sudoku4 --train 128 --test 32 > data.txt 2>&1 || fail "data sudoku4"
check data.txt "trm data sudoku4"
# the README's run, shortened: the default cpu run of cfg=tiny with every kind of line
"$TRM" pretrain cfg=tiny +run_name=w checkpoint_path=piped > piped.txt 2>&1 || { cat piped.txt; fail "piped run"; }
grep -q "^eval step" piped.txt && grep -q "^step " piped.txt && grep -q "^compile" piped.txt || fail "piped run lines: $(cat piped.txt)"
check piped.txt "a piped pretrain"
if script --version 2>/dev/null | grep -q util-linux; then
  TRM_PROGRESS_INTERVAL=0.05 script -qfec "stty cols 80 rows 24; '$TRM' pretrain cfg=tiny +run_name=w checkpoint_path=tty" \
    /dev/null > tty.txt 2>&1 || { cat tty.txt; fail "pretrain under script(1)"; }
  grep -q "finished" tty.txt || fail "the terminal run did not finish"
  check tty.txt "pretrain on an 80-column terminal"
else
  echo "util-linux script(1) not found: the terminal run is not checked"
fi
ckpt=$(ls -v piped/step_*.safetensors | tail -1)
"$TRM" generate --checkpoint "$ckpt" --data data/sudoku4 > gen.txt 2>&1 || fail "generate"
check gen.txt "generate"
"$TRM" generate --checkpoint "$ckpt" --input "1.3. .4.2 .1.3 .3.1" > input.txt 2>&1 || fail "generate --input"
check input.txt "generate --input"
"$TRM" inspect "$ckpt" > inspect.txt 2>&1 || fail "inspect"
check inspect.txt "inspect"
"$TRM" devices > devices.txt 2>&1 || fail "devices"
check devices.txt "devices"
"$TRM" --help > help.txt 2>&1
check help.txt "trm --help"
for c in $(sed -n 's/^  \([a-z]*\) .*/\1/p' help.txt); do
  "$TRM" help "$c" > "help_$c.txt" 2>&1
  check "help_$c.txt" "trm help $c"
done
"$TRM" bench cfg=tiny --steps 2 --warmup 1 > bench.txt 2>&1 || fail "bench"
grep -q "64 x 16 tokens" bench.txt || fail "bench cfg=tiny does not time the 4x4 Sudoku's 16 tokens: $(cat bench.txt)"
check bench.txt "bench"
# the op profiler's table and its GEMMs by shape (TRM_PROFILE=2) fit too, and list the shapes
TRM_PROFILE=2 "$TRM" bench cfg=tiny --steps 2 --warmup 1 > profile.txt 2>&1 || fail "bench under TRM_PROFILE=2"
grep -q "^trm profile (cpu backend)" profile.txt || fail "no profile table: $(cat profile.txt)"
grep -Eq "^    [NT][NT] fp32 +[0-9]+ x +[0-9]+ x +[0-9]+ x[0-9]+ .* GFLOP/s$" profile.txt ||
  fail "TRM_PROFILE=2 lists no GEMM shape: $(cat profile.txt)"
check profile.txt "bench under TRM_PROFILE=2"
echo OK
