#!/usr/bin/env bash
# CLI test of distributed data-parallel training on cpu (the MPI build): 20 steps with 2 ranks
# through mpirun, the built-in launcher (--nproc-per-node) and a torchrun-style environment
# give the same per-step losses and weights as one process with the same global batch (within
# float32 reduction-order tolerance) and exactly the same as each other; a distributed run
# resumes exactly; bad launches fail fast with their messages. A binary built without MPI must
# refuse distributed cpu runs with the message that says so.
set -uo pipefail
TRM=$1 SRC=$2 TMP=$4
# shellcheck source=tests/dist_common.sh
source "$SRC/tests/dist_common.sh"
dist_setup

if ! have_distributed_cpu; then
  "$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=nompi > out.txt 2>&1 && fail "distributed cpu ran without MPI"
  grep -q "needs the MPI build" out.txt || { cat out.txt; fail "no 'needs the MPI build' message"; }
  echo "binary without MPI: distributed cpu refused with the MPI-build message"
  exit 0
fi

"$TRM" pretrain "${common[@]}" checkpoint_path=one eval_save_outputs=true > one.txt 2>&1 || { cat one.txt; fail "one process"; }
[ -f one/$ck ] || fail "one process wrote no $ck"

# --- the built-in launcher --------------------------------------------------------------------
"$TRM" pretrain --nproc-per-node 2 "${common[@]}" checkpoint_path=launch eval_save_outputs=true > launch.txt 2>&1 ||
  { cat launch.txt; fail "--nproc-per-node 2"; }
grep -q "distributed: 2 ranks" launch.txt || fail "the launcher's run does not say it is distributed"
[ "$(grep -c 'checkpoint: ' launch.txt)" = 1 ] || fail "only rank 0 should report (and write) the checkpoint"
losses_close one launch "1 vs 2 ranks"
weights_close one launch "1 vs 2 ranks"
rel=$(weights_rel one/$ck launch/$ck) || fail "1 vs 2 ranks: weights not compared"
[ "$rel" != 0 ] || echo "note: identical to one process"
# evaluation: each rank steps its share, rank 0 gathers the predictions and writes them
same_eval one launch "2-rank evaluation"

# torchrun's flags as the reference's README gives them run the same launch
"$TRM" pretrain --nproc-per-node 2 --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --nnodes=1 "${common[@]}" \
  checkpoint_path=trflags > trflags.txt 2>&1 || { cat trflags.txt; fail "--nproc-per-node 2 with torchrun's flags"; }
"$TRM" inspect --diff trflags/$ck launch/$ck --tol 0 > /dev/null || fail "the run with torchrun's flags differs"

# --- mpirun ------------------------------------------------------------------------------------
if command -v mpirun > /dev/null; then
  mpirun -np 2 --oversubscribe --bind-to none "$TRM" pretrain "${common[@]}" checkpoint_path=mpi > mpi.txt 2>&1 ||
    { cat mpi.txt; fail "mpirun -np 2"; }
  grep -q "launched by mpirun" mpi.txt || fail "mpirun's run does not say how it was launched"
  same_run mpi launch "mpirun vs --nproc-per-node"
else
  echo "mpirun not on PATH: the mpirun launch is not checked"
fi

# --- torchrun-style environment -----------------------------------------------------------------
port=$(free_port) || fail "no free port"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 300 "$TRM" pretrain "${common[@]}" checkpoint_path=env > env$r.txt 2>&1 &
  pids[$r]=$!
done
wait ${pids[0]} || { cat env0.txt env1.txt; fail "environment launch, rank 0"; }
wait ${pids[1]} || { cat env1.txt; fail "environment launch, rank 1"; }
[ ! -s env1.txt ] || { cat env1.txt; fail "rank 1 printed to its output"; }
same_run env launch "environment-launched vs --nproc-per-node"

# --- exact resume of a distributed run -----------------------------------------------------------
stop_and_resume res --nproc-per-node 2
same_run res launch "the resumed 2-rank run vs the uninterrupted one"
# and the 2-rank checkpoint continues in one process
continue_on_one res one_from_two
weights_close one_from_two launch "1-process continuation of a 2-rank run"

# ranks that would resume from different states are stopped before training: rank 0 from the
# 2-rank step_9, rank 1 from a one-process step_9 of the same command (weights differ in the
# last bits), each in its own directory with the same relative paths
names=(+project_name=p +run_name=r) # the same run names, or the configurations differ already
mkdir -p st0 st1 && ln -s ../data st0/data && ln -s ../data st1/data || fail "mkdir"
(cd st0 && "$TRM" pretrain --nproc-per-node 2 "${common[@]}" "${names[@]}" checkpoint_path=run stop_after_steps=9 > /dev/null 2>&1) || fail "st0 run"
(cd st1 && "$TRM" pretrain "${common[@]}" "${names[@]}" checkpoint_path=run stop_after_steps=9 > /dev/null 2>&1) || fail "st1 run"
port=$(free_port) || fail "no free port"
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
port=$(free_port) || fail "no free port"
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
