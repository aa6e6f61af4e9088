#!/usr/bin/env bash
# CLI test of watching a run: at an 80-column terminal (script(1)'s pseudo-terminal) the
# status line is one line rewritten in place, never wider than 79 columns, with the bar, the
# rates and the evaluation's progress; piped, the output has plain lines only. report.html is
# valid HTML (tests/check_html.py), carries the evaluation's puzzles and is refreshed by the
# next evaluation after a resume. A default cpu run warns about nothing; compile=true on cpu
# warns once.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || { echo "python3 not found: skipped"; exit 77; }
script --version 2>/dev/null | grep -q util-linux || { echo "util-linux script(1) not found: skipped"; exit 77; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
CHECK="python3 $SRC/tests/check_html.py"

"$TRM" data sudoku4 --out data --train 256 --test 64 --seed 5 > /dev/null || fail "data sudoku4"
common=(cfg=tiny "data_paths=[data]" checkpoint_path=run +run_name=watch epochs=4 eval_interval=2
        global_batch_size=32 arch.hidden_size=32 arch.H_cycles=2 arch.L_cycles=2 arch.halt_max_steps=4
        log_interval=4 device=cpu)

# 1. at an 80-column terminal, stopped after the first evaluation (step 16)
TRM_PROGRESS_INTERVAL=0.05 script -qfec "stty cols 80 rows 24; '$TRM' pretrain ${common[*]} stop_after_steps=20" \
  /dev/null > tty.out 2>&1 || { cat tty.out; fail "pretrain under script(1)"; }
python3 - tty.out <<'PY' || fail "the status line at 80 columns"
import re, sys
out = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()  # keep the \r
lines = out.split("\n")
# the live lines (the evaluation's result lines "eval step 16 [all]  accuracy ..." are permanent)
status = [s.strip(" ") for l in lines for s in l.split("\r")
          if re.match(r"\s*(step \d+/\d+ |eval step \d+ (\[[^]]*\] )?\d+/\d+)", s)]
assert status, "no status line at all:\n" + out
for s in status:
    assert len(s) <= 79, "a status line of %d columns: %r" % (len(s), s)
# rewritten in place: one terminal line carries several updates separated by carriage returns
inplace = max(sum(1 for s in l.split("\r") if re.match(r"\s*step \d+/\d+ \[", s)) for l in lines)
assert inplace >= 3, "at most %d status updates on one line:\n%r" % (inplace, out)
assert any(re.search(r"\[[#.]{8,}\]", s) and "it/s" in s and "ex/s" in s and "ETA" in s for s in status), status
assert any(s.startswith("eval step 16") for s in status), "no evaluation progress: %r" % status
assert any("loss " in s for s in status), "no loss on the status line"
assert "not supported" not in out and "warning" not in out, "a default cpu run warned:\n" + out
# the closing line, wrapped to 80 columns: its continuation lines start with two spaces
closing = re.sub(r"\n+  ", " ", out.replace("\r", "\n"))
assert re.search(r"^stopped at step 20 .*report: run/report.html", closing, re.M), out
PY
$CHECK run/report.html speed metrics curves puzzles config || fail "report.html is not valid HTML"
grep -q "stopped at step 20 (stop_after_steps)" run/report.html || fail "report state after stop_after_steps"
grep -q "at the evaluation of step 16" run/report.html || fail "report puzzles are not the step-16 evaluation's"
[ "$(grep -o '<div class="puzzle' run/report.html | wc -l)" = 6 ] || fail "not 6 puzzles in the report"
[ "$(grep -o '<figure>' run/report.html | wc -l)" = 18 ] || fail "not input, prediction and label per puzzle"
grep -q 'http-equiv="refresh"' run/report.html && fail "a stopped run's page still reloads itself"
grep -q "data-key=\"all/lm_loss\" data-n=\"1\"" run/report.html || fail "report curves lack the evaluation"

# 2. piped: plain lines only; the resumed run's next evaluation refreshes the report
"$TRM" pretrain "${common[@]}" resume=auto > piped.out 2>&1 || { cat piped.out; fail "resume=auto piped"; }
grep -q $'\r' piped.out && fail "carriage returns in piped output"
grep -q "^step 24/" piped.out || fail "no log line per log_interval when piped"
grep -q "^finished: 12 steps in" piped.out || fail "no summary line: $(tail -2 piped.out)"
$CHECK run/report.html speed metrics curves puzzles config || fail "the final report.html is not valid HTML"
grep -q "<b>finished</b>" run/report.html || fail "report state after the run"
grep -q "at the evaluation of step 32" run/report.html || fail "the report was not refreshed by the evaluation"
grep -q "data-key=\"all/lm_loss\" data-n=\"2\"" run/report.html || fail "report curves lack the second evaluation"
"$TRM" plot run -o run.png > /dev/null || fail "trm plot of the finished run"

# 3. the checker itself refuses a page with an element left open
sed 's|</table>||' run/report.html > broken.html
$CHECK broken.html > check.txt && fail "check_html.py accepted a page with unclosed tables"
grep -q "closes" check.txt || fail "check_html.py message: $(cat check.txt)"

# 4. compile asked for on cpu: one warning, once
"$TRM" pretrain "${common[@]}" checkpoint_path=run_c compile=true stop_after_steps=1 > c.out 2>&1 ||
  { cat c.out; fail "compile=true on cpu"; }
[ "$(grep -c "compile=true is not supported on cpu" c.out)" = 1 ] || { cat c.out; fail "not exactly one compile warning"; }
echo "cli_watch: ok"
