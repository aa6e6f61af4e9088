#!/usr/bin/env bash
# cli_inspect.sh — `trm inspect`: lists the golden files (written by Python's safetensors),
# shows trm metadata with verified checksums, refuses truncated or corrupted files with a
# message and exit 1 while still listing the good ones, and wants a file argument (exit 2).
# usage: bash cli_inspect.sh TRM_BINARY SOURCE_DIR GOLDEN_DIR TMPDIR
set -u
export LC_ALL=C
TRM=$1
GOLDEN=$3
TMP=$4
mkdir -p "$TMP"
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run ARGS...: sets rc, out, err
run() {
    "$TRM" inspect "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}

expect_out() { grep -qF -- "$1" <<<"$out" || fail "$2: stdout lacks '$1'"; }
expect_err() { grep -qF -- "$1" <<<"$err" || fail "$2: stderr lacks '$1'"; }

for v in att_rope att_learned mlp_t noemb_rope; do
    f="$GOLDEN/$v.safetensors"
    run "$f"
    [ "$rc" -eq 0 ] || fail "$v: exit $rc ($err)"
    line=$(grep -F "init/inner.lm_head.weight " <<<"$out")
    [ -n "$line" ] || fail "$v: init/inner.lm_head.weight not listed"
    grep -qE "init/inner\.lm_head\.weight +F32 +\[6, 16\] +384$" <<<"$line" || fail "$v: bad row '$line'"
    expect_out "metadata: (none)" "$v"
    expect_out "total: " "$v"
    [ -z "$err" ] || fail "$v: unexpected stderr '$err'"
done
run "$GOLDEN/att_rope.safetensors"
expect_out "total: 227 tensors, 1021848 bytes" "att_rope"

# A trm-style file built by hand: metadata with a multi-line config and a CRC32
# (2e3fa576 = zlib crc32 of the little-endian floats 1.0, 2.0).
make_st() { # make_st PATH HEADER DATA(printf format)
    local hdr=$2
    while [ $(( ${#hdr} % 8 )) -ne 0 ]; do hdr="$hdr "; done
    local n=${#hdr} len="" i
    for i in 0 1 2 3 4 5 6 7; do len="$len$(printf '\\x%02x' $(( (n >> (8 * i)) & 255 )))"; done
    { printf '%b' "$len"; printf '%s' "$hdr"; printf '%b' "$3"; } >"$1"
}
hdr='{"__metadata__":{"format":"trm-safetensors-1","step":"42","config":"arch:\n  name: trm\n  note: \"quoted\"\n","crc32.w":"2e3fa576"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
make_st "$TMP/trm.safetensors" "$hdr" '\x00\x00\x80\x3f\x00\x00\x00\x40'
run "$TMP/trm.safetensors"
[ "$rc" -eq 0 ] || fail "trm file: exit $rc ($err)"
expect_out "crc32: verified for 1 tensors" "trm file"
expect_out "step: 42" "trm file"
expect_out "format: trm-safetensors-1" "trm file"
expect_out "config: |" "trm file"
expect_out '  note: "quoted"' "trm file"
grep -qE "^ +w +F32 +\[2\] +8$" <<<"$out" || fail "trm file: tensor row missing"
# keys are sorted: config before format before step
order=$(grep -oE "^    (config|format|step):" <<<"$out" | tr -d ' \n')
[ "$order" = "config:format:step:" ] || fail "metadata not sorted: '$order'"

# A long config is shown cut, with a count of the lines left out.
long=""
for i in $(seq 1 50); do long="${long}key_$i: $i\\n"; done
make_st "$TMP/long.safetensors" "{\"__metadata__\":{\"config\":\"$long\"}}" ''
run "$TMP/long.safetensors"
[ "$rc" -eq 0 ] || fail "long config: exit $rc ($err)"
expect_out "key_40: 40" "long config"
expect_out "... (10 more lines)" "long config"
grep -qF "key_41: 41" <<<"$out" && fail "long config: not cut"
expect_out "crc32: none" "long config"
expect_out "total: 0 tensors, 0 bytes" "long config"

# One flipped data byte: checksum error.
make_st "$TMP/flipped.safetensors" "$hdr" '\x00\x00\x80\x3f\x00\x00\x01\x40'
run "$TMP/flipped.safetensors"
[ "$rc" -eq 1 ] || fail "flipped: exit $rc, expected 1"
expect_err "trm inspect: " "flipped"
expect_err "checksum mismatch for tensor 'w'" "flipped"

# Truncated golden file: refused with a message; the good file after it is still listed.
head -c 5000 "$GOLDEN/att_rope.safetensors" >"$TMP/truncated.safetensors"
run "$TMP/truncated.safetensors" "$GOLDEN/mlp_t.safetensors"
[ "$rc" -eq 1 ] || fail "truncated: exit $rc, expected 1"
expect_err "trm inspect: $TMP/truncated.safetensors: header length" "truncated"
expect_out "mlp_t.safetensors" "truncated + good"
expect_out "init/inner.lm_head.weight" "truncated + good"

run "$TMP/does-not-exist.safetensors"
[ "$rc" -eq 1 ] || fail "missing file: exit $rc, expected 1"
expect_err "cannot open" "missing file"

run
[ "$rc" -eq 2 ] || fail "no arguments: exit $rc, expected 2"
expect_err "usage: trm inspect" "no arguments"
[ -z "$out" ] || fail "no arguments: unexpected stdout"

if [ "$failures" -ne 0 ]; then
    echo "cli_inspect: $failures failure(s)" >&2
    exit 1
fi
echo "cli_inspect: all checks passed"
