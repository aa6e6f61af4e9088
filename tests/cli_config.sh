#!/usr/bin/env bash
# cli_config.sh — `trm config show|list` end to end: composition, overrides, errors and exit
# codes, --config-dir and TRM_CONFIG_PATH; the overrides the reference's hydra configs accept
# (shown, and trained with in a few steps) and torchrun's flags.
# Usage: cli_config.sh TRM SOURCE_DIR GOLDEN_DIR TMPDIR
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

# a typo: "did you mean" first; following the +key way adds a key the architecture does not
# read, which is said once
run config show cfg=tiny arch.hiden_size=32
expect_rc 2 "typo"
expect_text err "no such key in configs/arch/trm.yaml; did you mean arch.hidden_size? (+arch.hiden_size=... adds it as a new key)" "typo hint"
run config show cfg=tiny +arch.hiden_size=32 ++arch.hiden_size=33
expect_rc 0 "added key"
expect_text err "trm: warning: +arch.hiden_size changes nothing:" "unread key warning"
expect_text err "  architecture trm does not read it" "unread key warning names the architecture"
expect_text err "  did you mean arch.hidden_size?" "unread key warning's hint"
[ "$(grep -c "changes nothing" "$TMP/err")" = 1 ] || fail "the unread key warned more than once: $(cat "$TMP/err")"
run config show cfg=tiny arch=transformers_baseline +arch.L_cycles=3
expect_text err "architecture transformers_baseline does not read it" "baseline has no L level"
run config show cfg=tiny +arch.no_such=1 arch=hrm
expect_text err "architecture hrm does not read it" "hrm"
run config show cfg=tiny resume=auto run_name=x
expect_rc 0 "optional keys without + as pretrain takes them"
expect_line out "resume: auto" "resume in config show"

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

# --- overrides the reference's hydra configs accept ---------------------------------------------
run config show arch.puzzle_emb_ndim=0
expect_rc 0 "a plain value replacing an interpolated default"
expect_line out "  puzzle_emb_ndim: 0" "puzzle_emb_ndim=0 is an int"
run config show '+eval_save_outputs=[inputs,labels,preds]'
expect_rc 0 "eval_save_outputs in the reference's list form"
expect_line out "eval_save_outputs: [inputs, labels, preds]" "eval_save_outputs list"
run config show arch.expansion=2.5
expect_rc 0 "a float expansion"
expect_line out "  expansion: 2.5" "expansion=2.5"
run config show
expect_line out "  expansion: 4.0" "expansion is a float, as the reference's pydantic model makes it"
run config show eval_interval=null
expect_rc 0 "eval_interval=null"
expect_line out "eval_interval: null" "eval_interval=null"
run config show arch.hidden_size=2.5
expect_rc 2 "an int key still refuses a fraction"
expect_text err "arch.hidden_size: expected an int, got float 2.5" "int keys stay ints"

# the same overrides train, and do what they say: no puzzle table, the expansion's SwiGLU width
# (ceil256(round(2.5 * 256 * 2/3)) = 512, not 768), one evaluation at the end, the listed outputs
"$TRM" data sudoku4 --out "$TMP/data" --train 64 --test 16 --seed 2 > /dev/null || fail "data sudoku4"
tiny=(cfg=tiny "data_paths=[$TMP/data]" global_batch_size=16 epochs=2 eval_interval=2 arch.hidden_size=32
      arch.H_cycles=1 arch.L_cycles=1 arch.halt_max_steps=2 device=cpu)
run pretrain "${tiny[@]}" checkpoint_path="$TMP/parity" arch.hidden_size=256 arch.puzzle_emb_ndim=0 arch.expansion=2.5 \
  eval_interval=null '+eval_save_outputs=[inputs,labels,preds]' arch.loss.name=losses@ACTLossHead
expect_rc 0 "pretrain with the reference's overrides"
ck=$TMP/parity/step_8.safetensors
"$TRM" inspect "$ck" > "$TMP/parity_inspect" 2>&1
checks=$((checks + 1))
# a name too long for its column stands on its own line, its row below it: one line each here
sed -e ':a' -e '/^    [^ ]*$/{N;s/\n */  /;ba' -e '}' "$TMP/parity_inspect" |
  grep -Eq '^    inner\.L_level\.layers\.0\.mlp\.gate_up_proj\.weight +F32 +\[1024, 256\]' ||
  fail "expansion=2.5 did not size the SwiGLU: $(grep gate_up "$TMP/parity_inspect" | head -2)"
checks=$((checks + 1))
grep -q '^    inner\.puzzle_emb' "$TMP/parity_inspect" && fail "puzzle_emb_ndim=0 still has a puzzle table"
checks=$((checks + 1))
[ "$(grep -c '"kind":"eval"' "$TMP/parity/metrics.jsonl")" = 1 ] || fail "eval_interval=null should evaluate once, after all epochs"
"$TRM" inspect "$TMP/parity/step_8_all_preds.0" > "$TMP/out" 2>&1
expect_text out "total: 3 tensors" "eval_save_outputs saved the listed outputs"
expect_text out "preds   I64    [16, 16]" "preds as the reference's int64 argmax"
expect_text out "inputs  I32    [16, 16]" "inputs as the reference's int32 batch"

run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" arch.loss.name=losses@Other
expect_rc 1 "another loss head"
expect_text err "arch.loss.name: trm implements the loss head losses@ACTLossHead, not 'losses@Other'" "loss head refused"
run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" +arch.loss.weight=2
expect_rc 1 "a loss-head argument ACTLossHead lacks"
expect_text err "arch.loss.weight: not an argument of losses@ACTLossHead" "loss argument refused"
run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" arch.name=recursive_reasoning.nope@Nope_ACTV1
expect_rc 1 "an architecture trm does not build"
expect_text err "arch.name: unknown architecture 'recursive_reasoning.nope@Nope_ACTV1'; trm builds" "unknown arch refused"
run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" "data_paths_test=[$TMP/nope]"
expect_rc 1 "a data_paths_test that does not exist"
expect_text err "data_paths_test: $TMP/nope does not exist" "data_paths_test typo"
run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" '+eval_save_outputs=[pred]'
expect_rc 1 "an output name the reference would silently skip"
expect_text err "eval_save_outputs[0]: 'pred' is not an output" "eval_save_outputs typo"
run pretrain "${tiny[@]}" checkpoint_path="$TMP/bad" arch.puzzle_emb_ndim=null
expect_rc 1 "null where the reference's model needs an int"
expect_text err "arch.puzzle_emb_ndim: expected an int, got null" "puzzle_emb_ndim=null"
checks=$((checks + 1))
[ ! -e "$TMP/bad" ] || fail "a refused run created its run directory"

# torchrun's flags: those trm's launcher can follow are taken (one host, or one of several with
# --nnodes N --node-rank R and rank 0's address and port), the rest refused once, before any
# worker starts
refuse() { # refuse WHAT MESSAGE FLAGS...: exit status 2 and MESSAGE on stderr
    local what=$1 msg=$2
    shift 2
    run pretrain "$@" "${tiny[@]}" checkpoint_path="$TMP/bad"
    expect_rc 2 "$what"
    expect_text err "$msg" "$what: message"
}
refuse "an elastic host count" "--nnodes=1:4: elastic host counts are not supported; trm runs a fixed number of hosts" --nnodes=1:4
refuse "restarts" "--max-restarts=3: trm's launcher does not restart workers" --nproc-per-node 2 --max-restarts=3
refuse "several hosts without --node-rank" "--nnodes 2: give this host's --node-rank (0..1" \
  --nnodes=2 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 29500
refuse "a node rank beyond --nnodes" "--node-rank 2 is outside 0..1 (--nnodes 2)" \
  --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 --master-port 29500
refuse "several hosts without rank 0's host" "--nnodes 2: give the host of rank 0 (node rank 0)" \
  --nnodes 2 --node-rank 1 --master-port 29500
refuse "several hosts without a port" "--nnodes 2: give rank 0's port with --master-port P or --rdzv-endpoint HOST:P" \
  --nnodes 2 --node-rank 1 --master-addr 127.0.0.2
refuse "several hosts with port 0" "--nnodes 2: give rank 0's port" --nnodes 2 --node-rank 1 --rdzv-endpoint 127.0.0.2:0
refuse "two hosts for rank 0" "--master-addr=10.0.0.1 and --rdzv-endpoint=10.0.0.2:29400 name different hosts" \
  --nnodes 2 --node-rank 1 --master-addr=10.0.0.1 --rdzv-endpoint=10.0.0.2:29400
refuse "two ports for rank 0" "--rdzv-endpoint=10.0.0.1:29400 and --master-port=29500 give different ports" \
  --nnodes 2 --node-rank 1 --rdzv-endpoint=10.0.0.1:29400 --master-port=29500
refuse "--standalone over several hosts" "--standalone runs on one host; it cannot be combined with --nnodes 2" \
  --standalone --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port 29500
refuse "--node-rank on one host" "--node-rank 1 with --nnodes 1: the only host is 0" --nproc-per-node 2 --node-rank 1
# host 0 runs rank 0, which listens on this machine: another machine's address (TEST-NET-1) is refused
refuse "host 0 given another host's address" \
  "--master-addr=192.0.2.1 is not an address of this machine, but --node-rank 0 is the host of rank 0" \
  --nnodes 2 --node-rank 0 --master-addr 192.0.2.1 --master-port 29500
refuse "a world beyond trm's limit" "--nnodes 1024 x --nproc-per-node 1024 is 1048576 ranks, more than trm supports" \
  --nnodes 1024 --node-rank 1 --nproc-per-node 1024 --master-addr 192.0.2.1 --master-port 29500
# messages quote the flag as given, not only the part that failed
refuse "an empty MAX of --nnodes MIN:MAX" "--nnodes=1:: expected a host count N or torchrun's N:N, N in 1..1024" --nnodes=1:
refuse "a port beyond 65535" "--rdzv-endpoint=localhost:99999: expected a port in 0..65535" \
  --nproc-per-node 2 --rdzv-endpoint=localhost:99999
# inside a launched run the message names the launcher flag that was given
WORLD_SIZE=2 RANK=0 MASTER_PORT=29500 run pretrain --nnodes 1 "${tiny[@]}" checkpoint_path="$TMP/bad"
expect_rc 2 "a launcher flag inside a launched run"
expect_text err "--nnodes inside an already launched run (WORLD_SIZE and RANK are set)" "launched run: message"
# one host: rank 0 is here, so an endpoint of another host (TEST-NET-1: no machine's own) is a mistake
refuse "another host's endpoint with one host" \
  "--rdzv-endpoint=192.0.2.1:29400 names another host, but with --nnodes 1 every worker runs on this one" \
  --nproc-per-node 2 --rdzv_backend=c10d --rdzv_endpoint=192.0.2.1:29400
checks=$((checks + 1))
[ ! -e "$TMP/bad" ] || fail "a refused launch created its run directory"
run pretrain --nproc-per-node 2 --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --nnodes=1 "${tiny[@]}" stray
expect_rc 2 "a stray word with torchrun's flags"
checks=$((checks + 1))
[ "$(grep -c "unexpected argument 'stray'" "$TMP/err")" = 1 ] || fail "the stray word should be reported once: $(cat "$TMP/err")"

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
