#!/usr/bin/env bash
# CLI test of 4-rank data-parallel training on cpu (the MPI build) and of runs over several hosts,
# simulated on this one: 20 steps (fp32, the shallow config of cli_distributed.sh) on 4 ranks of
# one launcher give the per-step losses and weights of one process within float32 tolerance; a
# 4-rank run stopped at step 9 and resumed equals the uninterrupted one bit for bit, its
# checkpoint continues on one process and `trm generate` evaluates it on cpu; mpirun with a
# hostfile runs the same 4 ranks bit for bit. Then two "hosts"
# as two launchers (--nnodes 2 --node-rank R --nproc-per-node 2) meeting at MASTER_ADDR
# 127.0.0.2, so the rendezvous crosses an address other than 127.0.0.1, equal the one-launcher
# run bit for bit; launchers that disagree on the ranks stop with messages naming the address.
# As root where `ip netns` works, the two hosts also run in two network namespaces joined by a
# veth pair (each sees the other only through its 10.213.x address).
set -uo pipefail
TRM=$1 SRC=$2 TMP=$4
# shellcheck source=tests/dist_common.sh
source "$SRC/tests/dist_common.sh"
dist_setup
if ! have_distributed_cpu; then
  echo "SKIP: this trm is built without MPI (cli_distributed.sh checks that it refuses distributed cpu runs)"
  exit 77
fi
# every multi-process launch below runs under timeout(1), so that a rank left waiting fails the
# test in minutes instead of holding it until ctest's limit
if ! command -v timeout > /dev/null; then
  echo "SKIP: no timeout command (coreutils) to bound the multi-process runs: 4 ranks and several hosts not checked"
  exit 77
fi

"$TRM" pretrain "${common[@]}" checkpoint_path=one eval_save_outputs=true > one.txt 2>&1 || { cat one.txt; fail "one process"; }

# --- 4 ranks, one launcher ------------------------------------------------------------------------
"$TRM" pretrain --nproc-per-node 4 "${common[@]}" checkpoint_path=four eval_save_outputs=true > four.txt 2>&1 ||
  { cat four.txt; fail "--nproc-per-node 4"; }
grep -q "distributed: 4 ranks (launched by a torchrun-style environment), 4 per host; global batch 32 = 4 x 8 per rank" four.txt ||
  { cat four.txt; fail "the 4-rank run does not say how it is split"; }
losses_close one four "1 vs 4 ranks"
weights_close one four "1 vs 4 ranks"
same_eval one four "4-rank evaluation"

# mpirun as a run over hosts is started, from a hostfile and with -x for the environment (one
# host here: `localhost slots=4`)
if command -v mpirun > /dev/null; then
  echo "localhost slots=4" > hostfile
  timeout 120 mpirun --hostfile hostfile -np 4 --bind-to none -x OMP_NUM_THREADS "$TRM" pretrain "${common[@]}" \
    checkpoint_path=mpi4 > mpi4.txt 2>&1 || { cat mpi4.txt; fail "mpirun --hostfile -np 4"; }
  grep -q "distributed: 4 ranks (launched by mpirun)" mpi4.txt || { cat mpi4.txt; fail "mpirun's 4 ranks do not say so"; }
  same_run mpi4 four "mpirun -np 4 vs --nproc-per-node 4"
else
  echo "mpirun not on PATH: the 4-rank mpirun launch is not checked"
fi

stop_and_resume res4 --nproc-per-node 4
same_run res4 four "the 4-rank run stopped at step 9 and resumed vs the uninterrupted one"
continue_on_one res4 one_from_four
weights_close one_from_four four "1-process continuation of a 4-rank run"
"$TRM" generate --checkpoint four/$ck --data data --json device=cpu > gen.json 2> gen.txt || { cat gen.txt; fail "generate"; }
gen() { grep -o "\"all/$1\":[^,}]*" gen.json | cut -d: -f2; }
[ "$(gen count)" = 70 ] || fail "generate on the 4-rank checkpoint counted $(gen count) puzzles, not 70"
[ "$(gen accuracy)" = "$(ev four accuracy)" ] ||
  fail "generate's accuracy $(gen accuracy) is not the 4-rank run's last evaluation's $(ev four accuracy)"
echo "generate on cpu, 4-rank checkpoint: accuracy $(gen accuracy), as the run's own evaluation"

# --- two hosts on this one ------------------------------------------------------------------------
# two_hosts NAME ADDR WRAP0 WRAP1 FLAGS1...: host 0 (ranks 0, 1) with --master-addr/--master-port,
# host 1 (ranks 2, 3) with FLAGS1 (PORT in them is replaced by the port); WRAP0/WRAP1 prefix their
# commands (a network namespace); outputs NAME.0.txt and NAME.1.txt, status of each in rc0, rc1
two_hosts() {
  local name=$1 addr=$2 wrap0=$3 wrap1=$4 port
  port=$(free_port) || fail "no free port"
  shift 4
  local flags1=("${@//PORT/$port}")
  # shellcheck disable=SC2086 # the wrappers are words
  $wrap0 timeout 120 "$TRM" pretrain --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr "$addr" \
    --master-port "$port" "${common[@]}" checkpoint_path="$name" > "$name.0.txt" 2>&1 &
  local pid0=$!
  # shellcheck disable=SC2086
  $wrap1 timeout 120 "$TRM" pretrain "${flags1[@]}" "${common[@]}" checkpoint_path="$name" > "$name.1.txt" 2>&1
  rc1=$?
  wait $pid0
  rc0=$?
}

# Linux routes all of 127/8 to the loopback; macOS has only 127.0.0.1 unless an alias is added
can_bind() {
  if command -v perl > /dev/null; then
    perl -MIO::Socket::INET -e 'exit !IO::Socket::INET->new(LocalAddr => $ARGV[0], Listen => 1)' "$1"
  elif command -v python3 > /dev/null; then
    python3 -c 'import socket, sys; socket.socket().bind((sys.argv[1], 0))' "$1" 2> /dev/null
  else
    return 2
  fi
}

can_bind 127.0.0.2
case $? in
0)
  # host 1 names rank 0 as torchrun's c10d rendezvous does, host 0 as its static one
  two_hosts hosts 127.0.0.2 "" "" --nnodes=2 --node_rank=1 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.2:PORT
  [ "$rc0$rc1" = 00 ] || { cat hosts.0.txt hosts.1.txt; fail "two hosts at 127.0.0.2 (status $rc0, $rc1)"; }
  grep -q "distributed: 4 ranks (launched by a torchrun-style environment), 2 per host" hosts.0.txt ||
    { cat hosts.0.txt; fail "host 0 does not report 4 ranks, 2 per host"; }
  [ ! -s hosts.1.txt ] || { cat hosts.1.txt; fail "host 1 (ranks 2 and 3) printed something"; }
  same_run hosts four "two hosts of 2 ranks vs one launcher of 4"
  losses_close one hosts "1 process vs two hosts of 2 ranks"
  echo "two hosts at 127.0.0.2: the same run as 4 ranks of one launcher"

  # host 1 starting 4 workers where host 0 counts 2 a host: the ranks disagree on WORLD_SIZE (8 vs
  # 4; both divide the batch, so they meet), and both sides stop at once, naming where they met
  two_hosts bad 127.0.0.2 "" "" --nnodes 2 --node-rank 1 --nproc-per-node 4 --master-addr 127.0.0.2 --master-port PORT
  if [ $rc0 = 0 ] || [ $rc1 = 0 ]; then cat bad.0.txt bad.1.txt; fail "hosts with different worker counts trained"; fi
  grep -q "rendezvous on 127.0.0.2:[0-9]*: rank 0 at 127.0.0.2:[0-9]* has WORLD_SIZE 4 but rank [4-7] has WORLD_SIZE 8" bad.1.txt ||
    { cat bad.1.txt; fail "host 1's workers do not name rank 0's address and the mismatch"; }
  grep -q "(rank [4-7]) has WORLD_SIZE 8 but rank 0 has WORLD_SIZE 4" bad.0.txt || { cat bad.0.txt; fail "rank 0 does not name the mismatch"; }
  [ ! -e bad/$ck ] || fail "a mismatched run wrote a checkpoint"
  ;;
2) echo "SKIP: neither perl nor python3 to test for 127.0.0.2: two hosts at 127.0.0.2 not checked" ;;
*) echo "SKIP: 127.0.0.2 cannot be bound on this machine (not Linux?): two hosts at 127.0.0.2 not checked" ;;
esac

# --- two hosts in two network namespaces ------------------------------------------------------------
ns0=trm_ns0_$$ ns1=trm_ns1_$$ netns_why=""
# netns_step CMD...: runs CMD; on failure netns_why says which command failed and its message
netns_step() {
  local out
  out=$("$@" 2>&1) || { netns_why="'$*' failed: $(head -c 200 <<< "$out")"; return 1; }
}
netns_up() {
  [ "$(id -u)" = 0 ] || { netns_why="not root"; return 1; }
  command -v ip > /dev/null || { netns_why="no ip command"; return 1; }
  netns_step ip netns add $ns0 || return 1
  trap 'ip netns del $ns0 2> /dev/null; ip netns del $ns1 2> /dev/null' EXIT
  netns_step ip netns add $ns1 && netns_step ip link add v0 netns $ns0 type veth peer name v1 netns $ns1 &&
    netns_step ip -n $ns0 addr add 10.213.0.1/24 dev v0 && netns_step ip -n $ns1 addr add 10.213.0.2/24 dev v1 &&
    netns_step ip -n $ns0 link set v0 up && netns_step ip -n $ns1 link set v1 up &&
    netns_step ip -n $ns0 link set lo up && netns_step ip -n $ns1 link set lo up
}
if netns_up; then
  two_hosts ns 10.213.0.1 "ip netns exec $ns0" "ip netns exec $ns1" \
    --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.213.0.1 --master-port PORT
  [ "$rc0$rc1" = 00 ] || { cat ns.0.txt ns.1.txt; fail "two hosts in network namespaces (status $rc0, $rc1)"; }
  same_run ns four "two hosts in network namespaces vs one launcher of 4"
  echo "two hosts in network namespaces (10.213.0.1, 10.213.0.2): the same run as 4 ranks of one launcher"
else
  echo "SKIP: no network namespaces here ($netns_why): the namespace variant not checked"
fi
echo "4 ranks and two hosts on cpu: all checks passed"
