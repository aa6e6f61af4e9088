#!/usr/bin/env bash
# CLI test of distributed data-parallel training on cpu (the MPI build): 20 steps with 2 ranks
# through mpirun, the built-in launcher (--nproc-per-node) and a torchrun-style environment
# give the same per-step losses and weights as one process with the same global batch (within
# float32 reduction-order tolerance) and exactly the same as each other; a distributed run
# resumes exactly; bad launches fail fast with their messages. A binary built without MPI must
# refuse distributed cpu runs with the message that says so.
set -uo pipefail
TRM=$1 SRC=$2 SHARED=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
export OMP_NUM_THREADS=1
# OpenMPI's own allocations at exit are not trm's leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# 70 test puzzles: the last test batch of 32 is padded, and rank 1's half of it is all padding
"$TRM" data sudoku4 --out data --train 320 --test 70 --seed 5 > /dev/null || fail "data sudoku4"
# A shallow recursion (1 H cycle, 2 ACT steps) and lr 1e-4: deep recursions amplify
# reduction-order differences chaotically, and AdamATan2's early steps are nearly sign(g), so a
# flipped tiny gradient moves a weight by a whole lr. Measured here: 2 ranks vs 1 process differ
# by 6e-8 (losses) and 7e-7 (weights); without the gradient sum by 1.4e-3 and 0.4.
common=(cfg=tiny "data_paths=[data]" epochs=2 eval_interval=2 global_batch_size=32 arch.hidden_size=32
        arch.H_cycles=1 arch.L_cycles=2 arch.halt_max_steps=2 log_interval=1 lr=1e-4)
ck=step_20.safetensors

cpu_caps=$("$TRM" devices | awk '/^  cpu / { c = 1 } c && /capabilities:/ { print; exit }')
[ -n "$cpu_caps" ] || fail "trm devices lists no cpu capabilities"
if ! grep -q "distributed yes" <<<"$cpu_caps"; then
  "$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=nompi > out.txt 2>&1 && fail "distributed cpu ran without MPI"
  grep -q "needs the MPI build" out.txt || { cat out.txt; fail "no 'needs the MPI build' message"; }
  echo "binary without MPI: distributed cpu refused with the MPI-build message"
  exit 0
fi

# losses of metrics.jsonl, one per line
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
# largest relative difference of the weights (inner.*) between two checkpoints
weights_rel() { "$TRM" inspect --diff "$1" "$2" | awk '$1 ~ /^inner\./ { if ($3 > m) m = $3 } END { print m + 0 }'; }

"$TRM" pretrain "${common[@]}" checkpoint_path=one eval_save_outputs=true > one.txt 2>&1 || { cat one.txt; fail "one process"; }
[ -f one/$ck ] || fail "one process wrote no $ck"

# --- the built-in launcher --------------------------------------------------------------------
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=launch eval_save_outputs=true > launch.txt 2>&1 ||
  { cat launch.txt; fail "--nproc-per-node 2"; }
grep -q "distributed: 2 ranks" launch.txt || fail "the launcher's run does not say it is distributed"
[ "$(losses launch | wc -l)" = 20 ] || fail "expected 20 logged steps, got $(losses launch | wc -l)"
[ "$(grep -c 'checkpoint: ' launch.txt)" = 1 ] || fail "only rank 0 should report (and write) the checkpoint"
paste <(losses one) <(losses launch) | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r }
  END { printf "per-step lm_loss, 1 vs 2 ranks: largest relative difference %.3g\n", m; exit !(m <= 1e-5) }' ||
  fail "per-step losses of 2 ranks differ from one process beyond float tolerance"
rel=$(weights_rel one/$ck launch/$ck)
echo "weights after 20 steps, 1 vs 2 ranks: largest relative difference $rel"
awk -v r="$rel" 'BEGIN { exit !(r <= 1e-4) }' || fail "weights of 2 ranks differ from one process ($rel)"
awk -v r="$rel" 'BEGIN { exit !(r > 0) }' || echo "note: identical to one process"
# evaluation: each rank steps its share, rank 0 gathers the predictions and writes them
cmp -s one/step_20_preds.npy launch/step_20_preds.npy || fail "2-rank evaluation predictions differ from one process's"
# q_halt logits: a GEMM over 16 rows instead of 32 may round differently (OpenBLAS picks kernels
# by shape: seen with its SkylakeX kernel), so within float32 tolerance, not bit for bit
npy_f32() { od -An -v -tf4 -w4 -j $((10 + $(od -An -tu2 -j8 -N2 "$1"))) "$1"; }
paste <(npy_f32 one/step_20_preds_q_halt.npy) <(npy_f32 launch/step_20_preds_q_halt.npy) | awk '
  NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > m) m = d; if (a > mx) mx = a; n++ }
  END { exit !(!bad && n == 70 && m <= 1e-5 * (mx > 1 ? mx : 1)) }' || fail "2-rank q_halt outputs differ"
ev() { grep '"kind":"eval"' "$1/metrics.jsonl" | grep -o "\"all/$2\":[^,}]*" | cut -d: -f2; }
[ "$(ev launch count)" = 70 ] || fail "2-rank evaluation counted $(ev launch count) puzzles, not 70"
[ "$(ev launch accuracy)" = "$(ev one accuracy)" ] || fail "2-rank evaluation accuracy differs"

# torchrun's flags as the reference's README gives them run the same launch
"$TRM" pretrain --nproc-per-node 2 --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --nnodes=1 "${common[@]}" \
  checkpoint_path=trflags > trflags.txt 2>&1 || { cat trflags.txt; fail "--nproc-per-node 2 with torchrun's flags"; }
"$TRM" inspect --diff trflags/$ck launch/$ck --tol 0 > /dev/null || fail "the run with torchrun's flags differs"

# --- mpirun ------------------------------------------------------------------------------------
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpirun -np 2 --oversubscribe --bind-to none "$TRM" pretrain "${common[@]}" checkpoint_path=mpi > mpi.txt 2>&1 ||
    { cat mpi.txt; fail "mpirun -np 2"; }
  grep -q "launched by mpirun" mpi.txt || fail "mpirun's run does not say how it was launched"
  [ "$(losses mpi)" = "$(losses launch)" ] || fail "mpirun and --nproc-per-node losses differ"
  "$TRM" inspect --diff mpi/$ck launch/$ck --tol 0 > /dev/null || fail "mpirun and --nproc-per-node checkpoints differ"
else
  echo "mpirun not on PATH: the mpirun launch is not checked"
fi

# --- torchrun-style environment -----------------------------------------------------------------
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 300 "$TRM" pretrain "${common[@]}" checkpoint_path=env > env$r.txt 2>&1 &
  pids[$r]=$!
done
wait ${pids[0]} || { cat env0.txt env1.txt; fail "environment launch, rank 0"; }
wait ${pids[1]} || { cat env1.txt; fail "environment launch, rank 1"; }
[ ! -s env1.txt ] || { cat env1.txt; fail "rank 1 printed to its output"; }
[ "$(losses env)" = "$(losses launch)" ] || fail "environment-launched and --nproc-per-node losses differ"
"$TRM" inspect --diff env/$ck launch/$ck --tol 0 > /dev/null || fail "environment-launched checkpoint differs"

# --- exact resume of a distributed run -----------------------------------------------------------
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=res stop_after_steps=9 > res1.txt 2>&1 ||
  { cat res1.txt; fail "stop_after_steps"; }
[ -f res/step_9.safetensors ] || fail "no step_9 checkpoint"
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=res resume=auto > res2.txt 2>&1 ||
  { cat res2.txt; fail "distributed resume"; }
"$TRM" inspect --diff res/$ck launch/$ck --tol 0 > /dev/null || fail "the resumed 2-rank run differs from the uninterrupted one"
# and the 2-rank checkpoint continues in one process
mkdir one_from_two && cp res/step_9.safetensors res/config.yaml one_from_two/ || fail "copy"
"$TRM" pretrain "${common[@]}" checkpoint_path=one_from_two resume=auto > res3.txt 2>&1 || { cat res3.txt; fail "1-process resume of a 2-rank checkpoint"; }
rel=$(weights_rel one_from_two/$ck launch/$ck)
awk -v r="$rel" 'BEGIN { exit !(r <= 1e-4) }' || fail "1-process continuation of a 2-rank run drifted ($rel)"

# ranks that would resume from different states are stopped before training: rank 0 from the
# 2-rank step_9, rank 1 from a one-process step_9 of the same command (weights differ in the
# last bits), each in its own directory with the same relative paths
names=(+project_name=p +run_name=r) # the same run names, or the configurations differ already
mkdir -p st0 st1 && ln -s ../data st0/data && ln -s ../data st1/data || fail "mkdir"
(cd st0 && "$TRM" pretrain --nproc-per-node 2 "${common[@]}" "${names[@]}" checkpoint_path=run stop_after_steps=9 > /dev/null 2>&1) || fail "st0 run"
(cd st1 && "$TRM" pretrain "${common[@]}" "${names[@]}" checkpoint_path=run stop_after_steps=9 > /dev/null 2>&1) || fail "st1 run"
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  (cd st$r && RANK=$r WORLD_SIZE=2 MASTER_PORT=$port timeout 120 "$TRM" pretrain "${common[@]}" "${names[@]}" \
     checkpoint_path=run stop_after_steps=9 resume=auto > ../st$r.txt 2>&1) &
  pids[$r]=$!
done
wait ${pids[0]} && fail "rank 0 trained with a rank of another state"
wait ${pids[1]} && fail "rank 1 trained from another state"
grep -q "rank 1's weights do not match rank 0's" st1.txt || { cat st0.txt st1.txt; fail "no state-mismatch message"; }
grep -q "the state check failed on another rank" st0.txt || { cat st0.txt; fail "rank 0 does not say why it stops"; }
[ ! -e st0/run/step_10.safetensors ] || fail "a mismatched run wrote a checkpoint"

# rank 0 alone failing to write its checkpoint stops every rank (none is left waiting in a
# collective): a directory sits where the final checkpoint file should go
mkdir -p ckfail/$ck
timeout 120 "$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=ckfail > ckfail.txt 2>&1 && fail "wrote over a directory"
grep -q "trm pretrain (rank 0): .*$ck" ckfail.txt || { cat ckfail.txt; fail "no rank 0 message naming the checkpoint"; }
grep -q "trm pretrain (rank 1): writing the checkpoint failed on another rank" ckfail.txt ||
  { cat ckfail.txt; fail "rank 1 does not say why it stops"; }
[ -d ckfail/$ck ] || fail "the directory in the way was removed"

# --- refusals -----------------------------------------------------------------------------------
timeout 120 "$TRM" pretrain --nproc-per-node 3 "${common[@]}" checkpoint_path=three > three.txt 2>&1 && fail "accepted 32 rows over 3 ranks"
grep -q "multiple of the number of ranks 3" three.txt || { cat three.txt; fail "no batch-split message"; }
[ ! -e three ] || fail "a refused run created its run directory"
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  extra=(); [ $r = 1 ] && extra=(lr=0.5)
  RANK=$r WORLD_SIZE=2 MASTER_PORT=$port timeout 120 "$TRM" pretrain "${common[@]}" "${extra[@]}" checkpoint_path=mismatch > mm$r.txt 2>&1 &
  pids[$r]=$!
done
wait ${pids[0]} && fail "rank 0 of a mismatched run succeeded"
wait ${pids[1]}
grep -q "configuration differs from rank 0's" mm1.txt || { cat mm0.txt mm1.txt; fail "no config-mismatch message"; }
WORLD_SIZE=2 RANK=0 "$TRM" pretrain "${common[@]}" checkpoint_path=noport > noport.txt 2>&1 && fail "ran without MASTER_PORT"
grep -q "MASTER_PORT is not set" noport.txt || { cat noport.txt; fail "no MASTER_PORT message"; }
# mps cannot all-reduce: refused once, before any worker starts, whether or not it is compiled in
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" device=mps checkpoint_path=mps > mps.txt 2>&1 && fail "device=mps ran"
grep -q "distributed training is not supported on the mps backend" mps.txt || { cat mps.txt; fail "no mps message"; }
[ "$(grep -c "not supported on the mps backend" mps.txt)" = 1 ] || { cat mps.txt; fail "mps refused more than once"; }
[ ! -e mps ] || fail "a refused run left a checkpoint directory"
echo "distributed cpu: all checks passed"
