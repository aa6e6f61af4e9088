#!/usr/bin/env bash
# Data-parallel scaling on GPUs (issues 6 and 17): one recipe trained for STEPS steps on each GPU
# count (`--nproc-per-node N`, NCCL), the global batch split over the GPUs as the reference does.
#   CONFIG=sudoku  the published Sudoku recipe (cfg=sudoku: mlp_t, hidden 512, L_cycles 6,
#                  H_cycles 3, global batch 768, bf16) on a generated Sudoku dataset
#   CONFIG=maze    the Maze/ARC-sized attention recipe (cfg=maze: attention + RoPE, 30x30 = 900
#                  tokens, L_cycles 4, global batch 768) on generated 30x30 mazes; on one GPU it
#                  needs about 4x the 192-row memory of bench/gpu.sh's maze_att (an H200; on H100s
#                  start the counts at 2, or set GLOBAL_BATCH)
# For each count: examples/s (median of the logged intervals after the first, which holds the
# graph capture), the speed-up and scaling efficiency against the first count (normally 1 GPU),
# the largest relative difference of the logged train losses against that run, and, with
# PROFILE=1, the all-reduce time per step from a TRM_PROFILE=1 run (every op synchronised, no
# graphs: it includes waiting for the slowest rank) of PROFILE_STEPS steps.
# usage: bench/dist_gpu.sh [TRM_BINARY] [COUNT...]   COUNT: GPU counts (default 1 2 4 8, those
#        this machine has: nvidia-smi -L)   env: CONFIG (sudoku), STEPS (60), LOG (10),
#        GLOBAL_BATCH (the config's), PROFILE (1), PROFILE_STEPS (20), WORK (temp dir),
#        NPROC (the old form: COUNTS "1 NPROC")
set -euo pipefail
TRM=${1:-build/trm}
shift || true
CONFIG=${CONFIG:-sudoku} STEPS=${STEPS:-60} LOG=${LOG:-10} PROFILE=${PROFILE:-1} PROFILE_STEPS=${PROFILE_STEPS:-20}
for v in STEPS LOG PROFILE_STEPS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "dist_gpu.sh: $v=${!v}: expected a positive number" >&2; exit 2; }
done
# examples/s is the median of the logged intervals after the first (graph capture): at least two
# of them, or there is no rate to compare
[ "$STEPS" -ge $((3 * LOG)) ] ||
  { echo "dist_gpu.sh: STEPS=$STEPS logs fewer than 3 intervals of LOG=$LOG steps; give STEPS >= $((3 * LOG))" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work/csv_$CONFIG"
command -v nvidia-smi > /dev/null || { echo "dist_gpu.sh: nvidia-smi not found: no NVIDIA driver to count GPUs with" >&2; exit 2; }
gpu_list=$(nvidia-smi -L 2>&1) || { echo "dist_gpu.sh: nvidia-smi -L failed: $gpu_list" >&2; exit 2; }
have=$(grep -c '^GPU' <<< "$gpu_list" || true)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/# /' ||
  echo "dist_gpu.sh: nvidia-smi --query-gpu failed; GPU names and memory not shown" >&2

counts=("$@")
if [ ${#counts[@]} = 0 ]; then
  if [ -n "${NPROC:-}" ]; then counts=(1 "$NPROC"); else counts=(1 2 4 8); fi
  for i in "${!counts[@]}"; do [ "${counts[$i]}" -le "$have" ] || unset "counts[$i]"; done
  counts=("${counts[@]}")
fi
for n in "${counts[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "dist_gpu.sh: GPU count '$n' is not a positive number" >&2; exit 2; }
  [ "$n" -le "$have" ] || { echo "dist_gpu.sh: $n GPUs asked for, this machine has $have" >&2; exit 2; }
done
[ ${#counts[@]} -gt 0 ] || { echo "dist_gpu.sh: no GPU counts to run (this machine has $have GPUs)" >&2; exit 2; }

csv=$work/csv_$CONFIG data=$work/data_$CONFIG
case $CONFIG in
sudoku)
  [ -f "$csv/train.csv" ] || "$TRM" data sudoku-gen --count 1000 --out "$csv/train.csv" --seed 1 > /dev/null
  [ -f "$csv/test.csv" ] || "$TRM" data sudoku-gen --count 100 --out "$csv/test.csv" --seed 2 > /dev/null
  [ -d "$data" ] || "$TRM" data sudoku --csv-dir "$csv" --out "$data" --num-aug 100 --seed 0 > /dev/null
  ;;
maze)
  [ -f "$csv/train.csv" ] || "$TRM" data maze-gen --count 1000 --out "$csv/train.csv" --seed 1 > /dev/null
  [ -f "$csv/test.csv" ] || "$TRM" data maze-gen --count 100 --out "$csv/test.csv" --seed 2 > /dev/null
  [ -d "$data" ] || "$TRM" data maze --csv-dir "$csv" --out "$data" --aug --seed 0 > /dev/null
  ;;
*) echo "dist_gpu.sh: CONFIG=$CONFIG: expected sudoku or maze" >&2; exit 2 ;;
esac

common=(cfg="$CONFIG" "data_paths=[$data]" epochs=1000 eval_interval=1000 device=cuda log_interval="$LOG" +run_name=bench)
[ -z "${GLOBAL_BATCH:-}" ] || common+=(global_batch_size="$GLOBAL_BATCH")
# run NAME STEPS [LAUNCHER FLAGS...]: 0 when it trained, else its log is kept and shown by the caller
run() {
  local name=$1 steps=$2
  shift 2
  rm -rf "${work:?}/$name"
  "$TRM" pretrain "$@" "${common[@]}" stop_after_steps="$steps" checkpoint_path="$work/$name" > "$work/$name.txt" 2>&1
}
launch() { [ "$1" = 1 ] || echo --nproc-per-node "$1"; }
# median ex/s of the logged intervals, the first one left out; non-zero with a message on stderr
# when the log has fewer than two intervals or a rate that is not above 0 (nothing to divide by)
rate() {
  local all
  all=$(grep -o '[0-9.]* ex/s' "$work/$1.txt" || true)
  if [ "$(grep -c . <<< "$all")" -lt 2 ]; then
    echo "dist_gpu.sh: $work/$1.txt logs $(grep -c . <<< "$all") ex/s intervals; the rate needs 2 or more" >&2
    return 1
  fi
  awk 'NR > 1 { print $1 }' <<< "$all" | sort -g | awk '{ v[NR] = $1 }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; if (!(m > 0)) exit 1; print m }' ||
    { echo "dist_gpu.sh: $work/$1.txt: the median rate is not above 0 ex/s" >&2; return 1; }
}
losses() { grep '"kind":"train"' "$work/$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
gpus() { [ "$1" = 1 ] && echo "1 GPU" || echo "$1 GPUs"; }
# all-reduce of the profiled run: mean over ranks of ms per step, calls per step, share of op time
allreduce() {
  awk -v steps="$2" '$1 == "allreduce_sum" { s += $2; c += $5; p += $4; n++ }
    END { if (n) printf "%.2f ms in %.1f calls (%.1f%% of op time)", 1000 * s / n / steps, c / n / steps, p / n; else printf "none logged" }' "$work/$1.txt"
}

base='' rbase='' table=()
for n in "${counts[@]}"; do
  name=${CONFIG}_$n
  # shellcheck disable=SC2046 # launch prints words
  if ! run "$name" "$STEPS" $(launch "$n"); then
    tail -5 "$work/$name.txt"
    echo "$(gpus "$n"): the run failed (log $work/$name.txt)"
    table+=("| $n | failed | | | | |")
    continue
  fi
  if ! r=$(rate "$name"); then
    echo "$(gpus "$n"): no rate (log $work/$name.txt)"
    table+=("| $n | no rate | | | | |")
    continue
  fi
  if [ -z "$base" ]; then
    base=$n rbase=$r
    echo "$(gpus "$n"): $r ex/s"
    table+=("| $n | $r | 1 | 100% | | |")
    continue
  fi
  grep -m1 "^distributed" "$work/$name.txt" || true
  sp=$(awk -v a="$rbase" -v b="$r" 'BEGIN { printf "%.3f", b / a }')
  eff=$(awk -v s="$sp" -v n="$n" -v b="$base" 'BEGIN { printf "%.1f", 100 * s / (n / b) }')
  echo "$(gpus "$base"): $rbase ex/s; $(gpus "$n"): $r ex/s; speed-up ${sp}x; scaling efficiency $eff%"
  ld=$(paste <(losses "${CONFIG}_$base") <(losses "$name") | awk '{ d = $1 - $2; if (d < 0) d = -d; r = $1 ? d / $1 : d; if (r > m) m = r; k++ }
    END { printf "%d %.3g", k, m }')
  echo "train lm_loss at ${ld% *} log points: largest relative difference ${ld#* } ($(gpus "$base") vs $n)"
  ar=''
  if [ "$PROFILE" = 1 ]; then
    # shellcheck disable=SC2046
    if TRM_PROFILE=1 run "${name}_profile" "$PROFILE_STEPS" $(launch "$n"); then
      ar=$(allreduce "${name}_profile" "$PROFILE_STEPS")
      echo "all-reduce per step on $(gpus "$n") (TRM_PROFILE=1, $PROFILE_STEPS steps, ops synchronised): $ar"
    else
      echo "the profiled run on $(gpus "$n") failed (log $work/${name}_profile.txt)"
    fi
  fi
  table+=("| $n | $r | ${sp}x | $eff% | ${ld#* } | ${ar%% ms*} |")
done
echo
echo "CONFIG=$CONFIG, $STEPS steps, global batch ${GLOBAL_BATCH:-of cfg=$CONFIG}:"
echo "| GPUs | examples/s | speed-up | efficiency | lm_loss rel. diff vs $(gpus "${base:-1}") | all-reduce ms/step |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${table[@]}"
echo "logs: $work/${CONFIG}_*.txt"
