#!/usr/bin/env bash
# The mps backend's per-step command-stream counters (dispatches, barriers, submits, host
# waits, recording and waiting time) on whatever Vulkan device this machine has (lavapipe in
# CI): `trm bench` must report them for a cfg=tiny step, with the counts a step of that model
# needs. Writes the JSON line to WORKDIR/counters.json and prints it (CI shows lavapipe's).
# Exits 77 (skipped) where no mps device is usable.
# usage: mps_counters.sh TRM WORKDIR
set -uo pipefail
TRM=$1 W=$2
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
"$TRM" devices 2>&1 | grep -q "^  mps .*[1-9][0-9]* device" || { echo "no mps device: skipped"; exit 77; }
"$TRM" bench cfg=tiny --seq-len 16 --vocab 6 device=mps compile=false --num-ids 1 \
  --steps 1 --warmup 1 --json > "$W/counters.json" 2> "$W/stderr.txt" || fail "trm bench on mps: $(tail -3 "$W/stderr.txt")"
j=$(cat "$W/counters.json")
num() { echo "$j" | sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
for k in dispatches_per_step barriers_per_step submits_per_step host_waits_per_step record_ms_per_step host_wait_ms_per_step; do
  [ -n "$(num $k)" ] || fail "no $k in: $j"
done
# a cfg=tiny training step is hundreds of kernels (forward, backward, optimisers), a few batches
awk -v d="$(num dispatches_per_step)" -v s="$(num submits_per_step)" -v b="$(num barriers_per_step)" \
  'BEGIN { exit !(d >= 200 && d <= 5000 && s >= 1 && s <= d && b >= 1 && b <= 2 * d) }' ||
  fail "counters out of range: $j"
echo "mps counters per step (cfg=tiny): dispatches $(num dispatches_per_step), barriers $(num barriers_per_step)," \
  "submits $(num submits_per_step), host waits $(num host_waits_per_step), recording $(num record_ms_per_step) ms," \
  "waiting $(num host_wait_ms_per_step) ms" | tee "$W/counters.txt"
