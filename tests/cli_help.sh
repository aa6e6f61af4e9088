#!/usr/bin/env bash
# CLI test of the help and hints: every command and every `trm data` builder answers --help
# (anywhere on its line, without doing anything) with its own usage, in lines of at most
# 80 columns; unknown commands, builders and options name the nearest one.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

cmds=$("$TRM" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}')
[ "$(wc -w <<<"$cmds")" -ge 9 ] || fail "trm --help lists too few commands: $cmds"
for c in $cmds; do
  for form in "$c --help" "$c -h" "help $c"; do
    out=$("$TRM" $form) || fail "trm $form exits non-zero"
    grep -q "^usage: trm $c" <<<"$out" || fail "trm $form does not print its usage: $out"
  done
done
for b in sudoku4 sudoku sudoku-gen maze maze-gen arc; do
  out=$("$TRM" data "$b" --help) || fail "trm data $b --help exits non-zero"
  grep -q "^usage: trm data $b " <<<"$out" || fail "trm data $b --help: $out"
  [ "$(grep -c '^usage:' <<<"$out")" = 1 ] || fail "trm data $b --help prints more than its own usage"
  "$TRM" help data "$b" | grep -q "^usage: trm data $b " || fail "trm help data $b"
done
# every help line fits an 80-column terminal (columns = characters: UTF-8 continuation
# bytes are not counted)
check_width() { # the trm arguments that print a help
  local long
  long=$("$TRM" "$@" | LC_ALL=C tr -d '\200-\277' | LC_ALL=C awk 'length > 80 {print length ": " $0}')
  [ -z "$long" ] || fail "trm $*: lines over 80 columns:"$'\n'"$long"
}
check_width --help
for c in $cmds; do check_width help "$c"; done
for b in sudoku4 sudoku sudoku-gen maze maze-gen arc; do check_width data "$b" --help; done
# pretrain's help names trm's own keys
out=$("$TRM" help pretrain)
for k in device= resume= recompute= stop_after_steps= overwrite= compile= log_interval= logger=; do
  grep -qF -- "$k" <<<"$out" || fail "trm help pretrain does not mention $k"
done

# help wins over the other options, and nothing is built
"$TRM" data sudoku4 --out built --train 8 --help > /dev/null || fail "--help after options"
[ ! -e built ] || fail "trm data sudoku4 ... --help built a dataset"
"$TRM" config show --help | grep -q "^usage: trm config show" || fail "trm config show --help"
"$TRM" pretrain cfg=tiny --help | grep -q "^usage: trm pretrain" || fail "trm pretrain cfg=tiny --help"

expect_hint() { # expected-substring, then the command
  local want=$1; shift
  "$TRM" "$@" > out.txt 2> err.txt && fail "trm $* succeeded"
  grep -qF -- "$want" err.txt || fail "trm $*: expected \"$want\" in: $(cat err.txt)"
}
expect_hint "unknown command 'pretian'; did you mean 'pretrain'?" pretian cfg=tiny
expect_hint "did you mean 'plot'?" plto run
expect_hint "did you mean 'generate'?" gen --checkpoint x
expect_hint "unknown builder 'sudok'; did you mean 'sudoku'?" data sudok --out x
expect_hint "unknown builder 'maze_gen'; did you mean 'maze-gen'?" data maze_gen --help
expect_hint "unexpected argument '--ouput'; did you mean '--out'?" data sudoku4 --ouput x
expect_hint "unknown command 'zzzzzz' (see trm --help)" zzzzzz
grep -q "did you mean" err.txt && fail "a hint for a word near nothing"
echo "cli_help: ok"
