#!/usr/bin/env bash
# cli_config.sh — `trm config show|list` end to end: composition, overrides, errors and exit
# codes, --config-dir and TRM_CONFIG_PATH. Usage: cli_config.sh TRM SOURCE_DIR SHARED_DIR TMPDIR
set -u
TRM=$1
TMP=$4
rm -rf "$TMP"
mkdir -p "$TMP"
failures=0
checks=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run NAME ARGS...: runs trm, keeping stdout, stderr and the exit status
run() {
    "$TRM" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}

expect_rc() {
    checks=$((checks + 1))
    if [ "$rc" -ne "$1" ]; then
        fail "$2: exit status $rc, expected $1; stderr: $(cat "$TMP/err")"
    fi
}

# expect_line FILE LINE WHAT: FILE has exactly this line
expect_line() {
    checks=$((checks + 1))
    if ! grep -qxF -- "$2" "$TMP/$1"; then
        fail "$3: no line '$2' in $1:"$'\n'"$(cat "$TMP/$1")"
    fi
}

expect_text() {
    checks=$((checks + 1))
    if ! grep -qF -- "$2" "$TMP/$1"; then
        fail "$3: '$2' not in $1:"$'\n'"$(cat "$TMP/$1")"
    fi
}

run config show arch.L_layers=3 +run_name=x
expect_rc 0 "show with overrides"
expect_line out "arch:" "show with overrides"
expect_line out "  L_layers: 3" "show with overrides"
expect_line out "run_name: x" "show with overrides"
expect_line out "data_paths: [data/arc-aug-1000]" "show with overrides"
expect_line out "lr: 0.0001" "show with overrides"
if [ "$(head -n 1 "$TMP/out")" != "arch:" ]; then fail "arch is not the first block"; fi
if [ -s "$TMP/err" ]; then fail "show printed on stderr: $(cat "$TMP/err")"; fi

run config show arch.no_such_key=1
expect_rc 2 "unknown key"
expect_text err "trm config: arch.no_such_key: no such key in configs/arch/trm.yaml" "unknown key"
expect_text err "+arch.no_such_key=" "unknown key"
if [ -s "$TMP/out" ]; then fail "a failed show printed a config"; fi

run config show arch.hidden_size=256
expect_rc 0 "interpolation"
expect_line out "  puzzle_emb_ndim: 256" "interpolation follows hidden_size"
expect_line out "  hidden_size: 256" "interpolation"

run config show arch.hidden_size=abc
expect_rc 2 "type check"
expect_text err "arch.hidden_size: expected an int, got string 'abc'" "type check"

run config show cfg=sudoku
expect_rc 0 "cfg=sudoku"
expect_line out "  mlp_t: true" "cfg=sudoku"
expect_line out "  pos_encodings: none" "cfg=sudoku"

run config show cfg=nope
expect_rc 2 "unknown cfg"
expect_text err "cfg=nope: no such config" "unknown cfg"

run config show arch=nope
expect_rc 2 "unknown group option"
expect_text err "available: hrm, transformers_baseline, trm, trm_hier6, trm_singlez" "unknown group option"

run config show stray
expect_rc 2 "stray word"

run config
expect_rc 2 "no subcommand"
expect_text err "usage: trm config show" "no subcommand"

run config frobnicate
expect_rc 2 "unknown subcommand"
expect_text err "unknown subcommand 'frobnicate'" "unknown subcommand"

run config list
expect_rc 0 "list"
expect_text out "  sudoku" "list"
expect_text out "  cfg_pretrain" "list"
expect_line out "  arch:" "list shows the arch group"

# a user config dir comes before the built-in configs
mkdir -p "$TMP/user/arch" "$TMP/env/arch"
printf 'defaults:\n  - arch: trm\n  - _self_\nmine: from_dir\nlr: 0.5\n' >"$TMP/user/cfg_pretrain.yaml"
printf 'hidden_size: 64\nL_cycles: 1\n' >"$TMP/user/arch/small.yaml"
printf 'defaults:\n  - cfg_pretrain\nenv_only: 7\n' >"$TMP/env/envcfg.yaml"
printf 'hidden_size: 32\n' >"$TMP/env/arch/trm.yaml"

run --config-dir "$TMP/user" config show arch=small arch.L_cycles=2
expect_rc 0 "--config-dir"
expect_line out "mine: from_dir" "--config-dir"
expect_line out "lr: 0.5" "--config-dir"
expect_line out "  hidden_size: 64" "--config-dir group option"
expect_line out "  L_cycles: 2" "--config-dir group option then override"

run --config-dir "$TMP/user" config list
expect_text out "small" "list with --config-dir"
expect_text out "$TMP/user" "list names the user dir"

TRM_CONFIG_PATH="$TMP/env" run config show cfg=envcfg
expect_rc 0 "TRM_CONFIG_PATH"
expect_line out "env_only: 7" "TRM_CONFIG_PATH"
expect_line out "  hidden_size: 32" "TRM_CONFIG_PATH overrides arch/trm"

TRM_CONFIG_PATH="$TMP/env" run --config-dir "$TMP/user" config show
expect_rc 0 "both"
expect_line out "mine: from_dir" "--config-dir with TRM_CONFIG_PATH"
expect_line out "  hidden_size: 32" "the env dir is searched too"

# a config given as a file path; its own directory is searched for its defaults
printf 'defaults:\n  - cfg_pretrain\n  - _self_\nfrom_path: true\n' >"$TMP/env/bypath.yaml"
run config show "cfg=$TMP/env/bypath.yaml"
expect_rc 0 "cfg=PATH"
expect_line out "from_path: true" "cfg=PATH"
expect_line out "  hidden_size: 32" "cfg=PATH searches its directory"

# YAML errors carry file:line:column
printf 'a: [1\n' >"$TMP/user/broken.yaml"
run --config-dir "$TMP/user" config show cfg=broken
expect_rc 2 "broken yaml"
expect_text err "$TMP/user/broken.yaml:2:1:" "broken yaml location"

# the output reads back as the same config
run config show cfg=tiny '+odd=["yes", "1", "a: b", ""]' '+f=1e-30'
expect_rc 0 "round trip"
cp "$TMP/out" "$TMP/user/roundtrip.yaml"
run --config-dir "$TMP/user" config show cfg=roundtrip
expect_rc 0 "round trip re-read"
if ! cmp -s "$TMP/out" "$TMP/user/roundtrip.yaml"; then
    fail "the printed config does not read back the same"
fi
expect_line out "odd: ['yes', '1', 'a: b', '']" "quoting"
expect_line out "f: 1.0e-30" "float output"

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
