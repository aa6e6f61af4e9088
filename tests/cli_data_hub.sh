#!/usr/bin/env bash
# trm data sudoku|maze --download: the published CSVs fetched as the reference's
# hf_hub_download fetches them, from a Hub-shaped server on 127.0.0.1 (tests/hub_server.py, on
# Python's http.server: LFS files redirected to a "CDN" that honours Range, small ones direct)
# into huggingface_hub's cache layout (HF_HOME, HF_HUB_CACHE, ~/.cache/huggingface/hub):
#  1. a connection cut mid-file is resumed (Range) in the same run; HF_TOKEN goes to the Hub,
#     not to the CDN; blobs/, snapshots/COMMIT/ symlinks and refs/main are as huggingface_hub
#     writes them; the dataset equals the one built from the same CSVs with --csv-dir;
#  2. a second run downloads nothing;
#  3. a download killed mid-file (trm and its curl) resumes from where it stopped in the
#     next run (maze, the default cache under ~/.cache);
#  4. a cache filled beforehand is used with no server at all (nothing listening,
#     HF_HUB_OFFLINE=1, no curl on PATH);
#  5. the errors: offline with nothing cached names the file and the cache path, no curl says
#     so, an unknown repo, and the option mistakes.
# Skips (77) without curl or python3.
set -uo pipefail
TRM=$1 SRC=$2 SHARED=$3 TMP=$4
server_pid=
stop_server() {
  [ -n "$server_pid" ] && { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
  server_pid=
}
fail() { echo "FAIL: $*"; stop_server; exit 1; }
command -v curl >/dev/null || { echo "SKIP: curl not found (what trm data --download runs)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found (the test's Hub server)"; exit 77; }
rm -rf "$TMP" && mkdir -p "$TMP/home" && cd "$TMP" || exit 1
trap stop_server EXIT
unset HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME HF_TOKEN HF_HUB_OFFLINE HF_ENDPOINT XDG_CACHE_HOME
export HOME=$TMP/home # the default cache, ~/.cache/huggingface/hub, is the test's own

start_server() { # LOG [--cut-once N | --stall-once N]
  rm -f port
  python3 "$SRC/tests/hub_server.py" hub port "$@" &
  server_pid=$!
  for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
  [ -s port ] || fail "the Hub server did not start"
  export HF_ENDPOINT=http://127.0.0.1:$(cat port)
}
sha256() { sha256sum "$1" | cut -d' ' -f1; }
gitsha() { python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$1"; }
commit_of() { python3 -c 'import hashlib,sys; print(hashlib.sha1(sys.argv[1].encode()).hexdigest())' "$1"; }

S=hub/sapientinc/sudoku-extreme M=hub/sapientinc/maze-30x30-hard-1k
"$TRM" data sudoku-gen --count 60 --out $S/train.csv --seed 1 >/dev/null 2>&1 || fail "sudoku-gen"
"$TRM" data sudoku-gen --count 12 --out $S/test.csv --seed 2 >/dev/null 2>&1 || fail "sudoku-gen"
"$TRM" data maze-gen --count 6 --out $M/train.csv --min-path-len 20 --seed 1 >/dev/null 2>&1 || fail "maze-gen"
"$TRM" data maze-gen --count 2 --out $M/test.csv --min-path-len 20 --seed 2 >/dev/null 2>&1 || fail "maze-gen"
[ "$(wc -c < $S/train.csv)" -gt 4096 ] && [ "$(wc -c < $S/test.csv)" -le 4096 ] || fail "CSV sizes"
SARGS=(--subsample-size 40 --num-aug 2 --seed 3)
"$TRM" data sudoku --csv-dir $S --out ref_sudoku "${SARGS[@]}" >/dev/null 2>&1 || fail "sudoku from --csv-dir"
"$TRM" data maze --csv-dir $M --out ref_maze --aug >/dev/null 2>&1 || fail "maze from --csv-dir"
cs=$(commit_of sapientinc/sudoku-extreme) cm=$(commit_of sapientinc/maze-30x30-hard-1k)

# 1. a connection cut after 3000 bytes: resumed in the same run; HF_HOME's cache
start_server log1 --cut-once 3000
HF_HOME=$TMP/hfhome HF_TOKEN=hf_secret_token "$TRM" data sudoku --download --out ds "${SARGS[@]}" > o1.txt 2>&1 ||
  { cat o1.txt log1; fail "download with a cut connection"; }
grep -q "train.csv: the connection ended at 3000 of $(wc -c < $S/train.csv) bytes; resuming" o1.txt ||
  fail "no resume message: $(cat o1.txt)"
t=$(sha256 $S/train.csv) g=$(gitsha $S/test.csv)
grep -q "^GET /cdn/$t range=- " log1 && grep -q "^GET /cdn/$t range=bytes=3000- " log1 || fail "no Range resume: $(cat log1)"
grep -q "^HEAD /datasets/sapientinc/sudoku-extreme/resolve/main/train.csv .*auth=Bearer hf_secret_token" log1 ||
  fail "HF_TOKEN not sent to the Hub"
grep "/cdn/" log1 | grep -q "auth=-$" && ! grep "/cdn/" log1 | grep -q "hf_secret" || fail "the token went to the CDN"
grep -q "^HEAD /datasets/sapientinc/sudoku-extreme/resolve/$cs/test.csv " log1 || fail "test.csv not from train's commit"
C=hfhome/hub/datasets--sapientinc--sudoku-extreme
[ "$(cat $C/refs/main)" = "$cs" ] || fail "refs/main"
[ "$(readlink $C/snapshots/$cs/train.csv)" = "../../blobs/$t" ] || fail "train.csv is not a link to blobs/SHA256"
[ "$(readlink $C/snapshots/$cs/test.csv)" = "../../blobs/$g" ] || fail "test.csv is not a link to blobs/GITSHA"
cmp -s $C/blobs/$t $S/train.csv && cmp -s $C/blobs/$g $S/test.csv || fail "cached files differ from the Hub's"
ls $C/blobs | grep -q incomplete && fail "an .incomplete file is left"
[ -f hfhome/hub/.locks/datasets--sapientinc--sudoku-extreme/$t.lock ] || fail "no lock file where huggingface_hub has it"
diff -r ref_sudoku ds >/dev/null || fail "the downloaded dataset differs from the --csv-dir one"

# 2. the files are in the cache: nothing is downloaded again
HF_HOME=$TMP/hfhome "$TRM" data sudoku --download --out ds --force "${SARGS[@]}" > o2.txt 2>&1 || { cat o2.txt; fail "second run"; }
[ "$(grep -c /cdn/ log1)" = 2 ] || fail "a second download: $(cat log1)"
grep -q "sudoku-extreme/train.csv: in the Hugging Face cache" o2.txt || fail "no cache message: $(cat o2.txt)"
stop_server

# 3. killed mid-file (the server stalls after 2000 bytes): the next run resumes there
start_server log2 --stall-once 2000
"$TRM" data maze --download --out mz --aug > o3.txt 2>&1 &
pid=$!
B=home/.cache/huggingface/hub/datasets--sapientinc--maze-30x30-hard-1k/blobs
mt=$(sha256 $M/train.csv)
for _ in $(seq 100); do [ "$(stat -c %s $B/$mt.incomplete 2>/dev/null)" = 2000 ] && break; sleep 0.1; done
[ "$(stat -c %s $B/$mt.incomplete 2>/dev/null)" = 2000 ] || { kill $pid; fail "no partial download: $(cat o3.txt)"; }
kill $pid
wait $pid 2>/dev/null
stop_server
start_server log3
"$TRM" data maze --download --out mz --aug > o4.txt 2>&1 || { cat o4.txt log3; fail "resumed download"; }
grep -q "^GET /cdn/$mt range=bytes=2000- " log3 || fail "the next run did not resume at 2000: $(cat log3)"
diff -r ref_maze mz >/dev/null || fail "the downloaded maze dataset differs from the --csv-dir one"
stop_server

# 4. a cache filled beforehand, as huggingface_hub leaves it; no server at all
P=prefilled/datasets--sapientinc--sudoku-extreme c=0123456789abcdef0123456789abcdef01234567
mkdir -p $P/blobs $P/snapshots/$c $P/refs
cp $S/train.csv $P/blobs/$t && cp $S/test.csv $P/blobs/$g && printf %s $c > $P/refs/main
ln -s ../../blobs/$t $P/snapshots/$c/train.csv && ln -s ../../blobs/$g $P/snapshots/$c/test.csv
export HF_HUB_CACHE=$TMP/prefilled
HF_ENDPOINT=http://127.0.0.1:1 "$TRM" data sudoku --download --out pf1 "${SARGS[@]}" > o5.txt 2>&1 ||
  { cat o5.txt; fail "prefilled cache, nothing listening"; }
grep -q "sudoku-extreme/train.csv: from the Hugging Face cache, $TMP/prefilled/.*/snapshots/$c/train.csv; .*cannot be reached" o5.txt ||
  fail "no cache message: $(cat o5.txt)"
HF_HUB_OFFLINE=1 "$TRM" data sudoku --download --out pf2 "${SARGS[@]}" > o6.txt 2>&1 || { cat o6.txt; fail "HF_HUB_OFFLINE=1"; }
PATH=/nonexistent "$TRM" data sudoku --download --out pf3 "${SARGS[@]}" > o7.txt 2>&1 || { cat o7.txt; fail "no curl"; }
grep -q "curl, which is not installed" o7.txt || fail "no word on curl: $(cat o7.txt)"
for d in pf1 pf2 pf3; do diff -r ref_sudoku $d >/dev/null || fail "$d differs from the --csv-dir dataset"; done

# 5. errors
HF_HUB_CACHE=$TMP/empty HF_HUB_OFFLINE=1 "$TRM" data sudoku --download --out e1 > o8.txt 2>&1 && fail "offline, empty cache"
grep -q "train.csv of dataset sapientinc/sudoku-extreme is not in the Hugging Face cache (no $TMP/empty/datasets--sapientinc--sudoku-extreme/refs/main naming a snapshot) and cannot be downloaded: HF_HUB_OFFLINE is set" o8.txt ||
  fail "offline message: $(cat o8.txt)"
HF_HUB_CACHE=$TMP/empty PATH=/nonexistent "$TRM" data maze --download --out e2 > o9.txt 2>&1 && fail "no curl, empty cache"
grep -q "maze-30x30-hard-1k is not in the Hugging Face cache.*curl, which is not installed" o9.txt || fail "no-curl message: $(cat o9.txt)"
start_server log4
HF_HUB_CACHE=$TMP/empty "$TRM" data sudoku --download --repo sapientinc/nope --out e3 > o10.txt 2>&1 && fail "unknown repo"
grep -q "HTTP 401: dataset sapientinc/nope has no train.csv" o10.txt || fail "unknown repo message: $(cat o10.txt)"
stop_server
"$TRM" data sudoku --repo a/b --csv-dir $S --out e4 > o11.txt 2>&1 && fail "--repo without --download"
grep -q "add --download" o11.txt || fail "--repo message: $(cat o11.txt)"
"$TRM" data maze --download --csv-dir $M --out e5 > o12.txt 2>&1 && fail "--download with --csv-dir"
grep -q "not both" o12.txt || fail "both message: $(cat o12.txt)"
"$TRM" data sudoku --download --repo ../etc --out e6 > o13.txt 2>&1 && fail "a bad repo id"
grep -q "expected a dataset id OWNER/NAME" o13.txt || fail "bad repo message: $(cat o13.txt)"
[ -e e1 ] || [ -e e2 ] || [ -e e3 ] || [ -e e4 ] || [ -e e5 ] || [ -e e6 ] && fail "a failed build left its OUT"
echo "cli_data_hub: ok"
