#!/usr/bin/env bash
# CLI test of thread-count independence on cpu: the kernels hand their loops' work to threads
# dynamically (a thread that gets less of a core takes less of it), so which thread computes
# what changes from run to run; every output element must still be summed in one fixed order.
# Training with 1, 2 and 3 threads (3 oversubscribes CI's 2 cores, so threads are preempted
# mid-loop) gives the same per-step losses and the same weights bit for bit, for the token-
# mixing MLP and attention, in float32 and in bfloat16 (trm's own bf16 GEMM where the CPU has
# AVX512-BF16, AMX tiles where it has those, float32 with a warning elsewhere: whichever runs,
# the thread count changes no bit). The wait policy trm chooses (passive up to 2 threads, a short
# spin up to 4, a longer one above) is checked in the environment it runs with.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

"$TRM" data sudoku4 --out data --train 160 --test 32 --seed 7 > /dev/null || fail "data sudoku4"
# hidden 64, batch 32: every op is big enough to run threaded (kernels/cpu/cpu.h PAR_MIN)
common=(cfg=tiny "data_paths=[data]" epochs=1 eval_interval=1 global_batch_size=32 arch.hidden_size=64
        arch.H_cycles=2 arch.L_cycles=2 arch.halt_max_steps=2 log_interval=1 stop_after_steps=4 device=cpu)
att=(arch.mlp_t=False arch.pos_encodings=rope arch.num_heads=2)
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*'; }

check() { # name, then overrides
  local name=$1 t
  shift
  for t in 1 2 3; do
    OMP_NUM_THREADS=$t "$TRM" pretrain "${common[@]}" "$@" checkpoint_path="${name}_$t" > "${name}_$t.txt" 2>&1 ||
      { cat "${name}_$t.txt"; fail "$name with $t threads"; }
  done
  [ "$(losses "${name}_1" | wc -l)" = 4 ] || fail "$name: expected 4 logged steps"
  for t in 2 3; do
    diff <(losses "${name}_1") <(losses "${name}_$t") > /dev/null || fail "$name: losses differ with $t threads"
    "$TRM" inspect --diff "${name}_1/step_4.safetensors" "${name}_$t/step_4.safetensors" --tol 0 > "diff_${name}_$t.txt" ||
      { tail -3 "diff_${name}_$t.txt"; fail "$name: weights differ between 1 and $t threads"; }
    grep -q "largest relative difference: 0 " "diff_${name}_$t.txt" || fail "$name: inspect --diff compared nothing"
  done
  echo "$name: 1, 2 and 3 threads give the same losses and weights bit for bit (4 steps)"
}

check mlp_t
check attention "${att[@]}"
check mlp_t_bf16 arch.forward_dtype=bfloat16
check attention_bf16 "${att[@]}" arch.forward_dtype=bfloat16
# the AMX path's packing and blocking (kernels/cpu/gemm_amx.c), tile products emulated, where
# this CPU has AVX512-BF16 (the real tiles where it has AMX are the bf16 checks above)
TRM_CPU_GEMM=amx-emulate check mlp_t_amx_emulated arch.forward_dtype=bfloat16

# the wait policy trm sets for itself when the user set none (Linux: it re-executes once,
# TRM_CPU_ENV marking the second start)
if [ -r /proc/self/environ ]; then
  trm_exe=$(readlink -f "$TRM")
  env_of() { # THREADS [VAR=VALUE...]: the wait policy in the environment trm runs its work with
    local t=$1
    shift
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME OMP_NUM_THREADS=$t "$@" \
      "$TRM" pretrain "${common[@]}" stop_after_steps=1 checkpoint_path="env_$t$#" > "env_$t$#.txt" 2>&1 &
    local pid=$! i s seen="" ran=0
    # $pid is env's until env executes trm; trm's own environment is read only once
    # /proc/$pid/exe is trm. trm re-executes (marking TRM_CPU_ENV) when it sets a policy;
    # with the user's own policy it may re-execute for its BLAS choice, or not at all, so
    # that case reads on for a second after trm started and keeps the last environment seen
    for i in $(seq 200); do
      if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$trm_exe" ]; then
        s=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null) && [ -n "$s" ] && seen=$s
        grep -q '^TRM_CPU_ENV=' <<< "$seen" && break
        [ $# -gt 0 ] && [ $((++ran)) -ge 20 ] && break
      fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    grep -E '^(OMP_WAIT_POLICY|GOMP_SPINCOUNT)=' <<< "$seen"
    wait $pid || { cat "env_$t$#.txt"; fail "pretrain with $t threads"; }
  }
  e2=$(env_of 2) e4=$(env_of 4) e8=$(env_of 8) e_user=$(env_of 2 OMP_WAIT_POLICY=active)
  [ "$e2" = "OMP_WAIT_POLICY=passive" ] || fail "2 threads: expected a passive wait policy, got '$e2'"
  [ "$e4" = "GOMP_SPINCOUNT=10000" ] || fail "4 threads: expected a short spin, got '$e4'"
  [ "$e8" = "GOMP_SPINCOUNT=100000" ] || fail "8 threads: expected a bounded spin, got '$e8'"
  [ "$e_user" = "OMP_WAIT_POLICY=active" ] || fail "the user's OMP_WAIT_POLICY was replaced: '$e_user'"
  echo "wait policy: 2 threads '$e2', 4 threads '$e4', 8 threads '$e8', the user's own kept"
  # threads the user binds keep the CPUs libgomp gives them: a re-execution would have inherited
  # the initial thread's one CPU as the whole process's (every thread on it)
  if [ "$(nproc)" -ge 2 ]; then
    OMP_PROC_BIND=true OMP_NUM_THREADS=2 "$TRM" pretrain "${common[@]}" stop_after_steps=2 \
      checkpoint_path=bound > bound.txt 2>&1 &
    pid=$! cpus=""
    for i in $(seq 200); do
      if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$trm_exe" ] &&
        [ "$(ls /proc/$pid/task 2>/dev/null | wc -l)" -ge 2 ]; then
        cpus=$(cat /proc/$pid/task/*/status 2>/dev/null | grep '^Cpus_allowed_list' | sort -u | wc -l)
        [ "$cpus" -ge 2 ] && break
      fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    wait $pid || { cat bound.txt; fail "pretrain with OMP_PROC_BIND=true"; }
    [ "${cpus:-0}" -ge 2 ] || fail "OMP_PROC_BIND=true: trm's threads shared one CPU"
    echo "OMP_PROC_BIND=true: trm's threads on $cpus CPUs"
  fi
fi
