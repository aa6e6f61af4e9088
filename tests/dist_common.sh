# shellcheck shell=bash
# dist_common.sh — what the distributed cpu tests (cli_distributed.sh, cli_multihost.sh) share:
# the dataset and the shallow fp32 config they train, and the comparisons of runs. Sourced, not
# run (ctest registers only cli_*.sh); expects TRM and TMP to be set.

fail() { echo "FAIL: $*"; exit 1; }

# Enters a fresh $TMP; one thread per rank, so that W ranks use W cores as one process would.
dist_setup() {
  rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
  export OMP_NUM_THREADS=1
  # OpenMPI's own allocations at exit are not trm's leaks
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # 70 test puzzles: the last test batch of 32 is padded, and some ranks' share of it is all padding
  "$TRM" data sudoku4 --out data --train 320 --test 70 --seed 5 > /dev/null || fail "data sudoku4"
}

# A shallow recursion (1 H cycle, 2 ACT steps) and lr 1e-4: deep recursions amplify
# reduction-order differences chaotically, and AdamATan2's early steps are nearly sign(g), so a
# flipped tiny gradient moves a weight by a whole lr. Measured: 2 ranks vs 1 process differ by
# 6e-8 (losses) and 7e-7 (weights); without the gradient sum by 1.4e-3 and 0.4. 20 steps.
common=(cfg=tiny "data_paths=[data]" epochs=2 eval_interval=2 global_batch_size=32 arch.hidden_size=32
        arch.H_cycles=1 arch.L_cycles=2 arch.halt_max_steps=2 log_interval=1 lr=1e-4)
ck=step_20.safetensors

# Whether this binary trains distributed on cpu (the MPI build).
have_distributed_cpu() {
  local caps
  caps=$("$TRM" devices | awk '/^  cpu / { c = 1 } c && /capabilities:/ { print; exit }')
  [ -n "$caps" ] || fail "trm devices lists no cpu capabilities"
  grep -q "distributed yes" <<<"$caps"
}

# losses of metrics.jsonl, one per line
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
# an eval metric of metrics.jsonl (all/NAME)
ev() { grep '"kind":"eval"' "$1/metrics.jsonl" | grep -o "\"all/$2\":[^,}]*" | cut -d: -f2; }
# largest relative difference of the weights (inner.*) between two checkpoints; non-zero with a
# message on stderr when there is nothing to compare (a missing or unreadable file, inspect
# failing, no inner.* tensor, a value that is not a number), so that no caller passes on nothing.
# Callers run it in $(...), where `fail` would only leave the subshell: they check its status.
weights_rel() {
  local f out
  for f in "$1" "$2"; do [ -f "$f" ] || { echo "weights_rel: no checkpoint $f" >&2; return 1; }; done
  out=$("$TRM" inspect --diff "$1" "$2") || { echo "weights_rel: trm inspect --diff $1 $2 failed (status $?): $out" >&2; return 1; }
  awk '$1 ~ /^inner\./ { n++; if ($3 !~ /^[0-9.eE+-]+$/) bad = $1 " " $3; else if ($3 + 0 > m) m = $3 + 0 }
       END { if (bad != "") { print "weights_rel: not a number: " bad > "/dev/stderr"; exit 1 }
             if (!n) { print "weights_rel: no inner.* tensor in trm inspect --diff" > "/dev/stderr"; exit 1 }
             print m + 0 }' <<< "$out"
}

# A TCP port free on this machine now: a random one below the kernels' ephemeral ranges that
# binds, then released (as trm's launcher picks one); a port bind(0) hands out can be taken by
# another test's outgoing connections before the ranks listen on it. Non-zero with a message
# on stderr when no port can be had; callers check: port=$(free_port) || fail
free_port() {
  if command -v perl > /dev/null; then
    perl -MIO::Socket::INET -e 'for (1 .. 64) { my $p = 20000 + int(rand(12000));
      if (IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => $p, Listen => 1, ReuseAddr => 1)) { print $p; exit 0 } }
      print STDERR "free_port: no free TCP port in 64 tries of 20000-31999\n"; exit 1'
  elif command -v python3 > /dev/null; then
    python3 -c 'import random, socket, sys
for _ in range(64):
    p, s = random.randrange(20000, 32000), socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", p)); print(p); sys.exit(0)
    except OSError:
        s.close()
sys.exit("free_port: no free TCP port in 64 tries of 20000-31999")'
  else
    echo "free_port: neither perl nor python3 to try TCP ports with" >&2
    return 1
  fi
}

# losses_close ONE MANY WHAT: run MANY logged 20 steps, each lm_loss within 1e-5 (relative) of ONE's
losses_close() {
  [ "$(losses "$2" | wc -l)" = 20 ] || fail "$3: expected 20 logged steps, got $(losses "$2" | wc -l)"
  paste <(losses "$1") <(losses "$2") | awk -v what="$3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r }
    END { printf "per-step lm_loss, %s: largest relative difference %.3g\n", what, m; exit !(NR == 20 && m <= 1e-5) }' ||
    fail "per-step losses, $3: beyond float tolerance"
}

# weights_close A B WHAT: the final weights within 1e-4 (relative)
weights_close() {
  local rel
  rel=$(weights_rel "$1/$ck" "$2/$ck") || fail "weights, $3: nothing compared"
  echo "weights after 20 steps, $3: largest relative difference $rel"
  awk -v r="$rel" 'BEGIN { exit !(r <= 1e-4) }' || fail "weights, $3: differ by $rel"
}

# same_run A B WHAT: the same per-step losses and bit-identical checkpoints
same_run() {
  [ "$(losses "$1" | wc -l)" = 20 ] || fail "$3: $1 logged $(losses "$1" | wc -l) steps, not 20"
  [ "$(losses "$1")" = "$(losses "$2")" ] || fail "$3: per-step losses differ"
  "$TRM" inspect --diff "$1/$ck" "$2/$ck" --tol 0 > /dev/null || fail "$3: checkpoints differ"
}

# same_eval ONE MANY WHAT: evaluation of eval_save_outputs=true runs: predictions identical, q_halt
# logits within float32 tolerance (a GEMM over fewer rows may round differently: OpenBLAS picks
# kernels by shape), the 70 puzzles counted and the accuracy equal
npy_f32() { od -An -v -tf4 -w4 -j $((10 + $(od -An -tu2 -j8 -N2 "$1"))) "$1"; }
same_eval() {
  cmp -s "$1/step_20_preds.npy" "$2/step_20_preds.npy" || fail "$3: evaluation predictions differ"
  paste <(npy_f32 "$1/step_20_preds_q_halt.npy") <(npy_f32 "$2/step_20_preds_q_halt.npy") | awk '
    NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > m) m = d; if (a > mx) mx = a; n++ }
    END { exit !(!bad && n == 70 && m <= 1e-5 * (mx > 1 ? mx : 1)) }' || fail "$3: q_halt outputs differ"
  [ "$(ev "$2" count)" = 70 ] || fail "$3: evaluation counted $(ev "$2" count) puzzles, not 70"
  [ "$(ev "$2" accuracy)" = "$(ev "$1" accuracy)" ] || fail "$3: evaluation accuracy differs"
}

# stop_and_resume DIR LAUNCH...: trains in DIR to step 9 under LAUNCH (e.g. --nproc-per-node 4),
# then resumes there to step 20; the caller compares DIR with its uninterrupted run
stop_and_resume() {
  local dir=$1
  shift
  "$TRM" pretrain "$@" "${common[@]}" checkpoint_path="$dir" stop_after_steps=9 > "$dir.1.txt" 2>&1 ||
    { cat "$dir.1.txt"; fail "stop_after_steps=9 ($*)"; }
  [ -f "$dir/step_9.safetensors" ] || fail "no step_9 checkpoint in $dir"
  "$TRM" pretrain "$@" "${common[@]}" checkpoint_path="$dir" resume=auto > "$dir.2.txt" 2>&1 ||
    { cat "$dir.2.txt"; fail "resume=auto ($*)"; }
}

# continue_on_one FROM DIR: FROM's step_9 checkpoint resumed by one process in DIR
continue_on_one() {
  mkdir "$2" || fail "mkdir $2"
  cp "$1/step_9.safetensors" "$1/config.yaml" "$2/" || fail "copy"
  "$TRM" pretrain "${common[@]}" checkpoint_path="$2" resume=auto > "$2.txt" 2>&1 ||
    { cat "$2.txt"; fail "one process resuming $1's step_9"; }
}
