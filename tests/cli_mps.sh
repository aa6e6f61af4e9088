#!/usr/bin/env bash
# CLI test of the mps backend on whatever Vulkan device is here (lavapipe in CI; exit 77, ctest's
# "skipped", where the binary has no mps or no device): 20 training steps of a shallow cfg=tiny
# on mps follow the cpu's per-step losses within float tolerance; the mps checkpoint evaluated by
# `trm generate` on mps and on cpu gives the same predictions; a run stopped on mps, continued
# on cpu and finished on mps ends where the uninterrupted mps run ends; and the policy: bf16 and
# compile fall back with one warning each.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1
"$TRM" devices > devices.txt 2>&1
grep -Eq "^  mps +[1-9]" devices.txt || { echo "no mps device in this binary or on this machine: skipped"; exit 77; }
export OMP_NUM_THREADS=2

"$TRM" data sudoku4 --out data --train 320 --test 70 --seed 5 > /dev/null || fail "data sudoku4"
# the shallow recursion of tests/cli_distributed.sh: deep ones amplify rounding differences
common=(cfg=tiny "data_paths=[data]" epochs=2 eval_interval=2 global_batch_size=32 arch.hidden_size=32
        arch.H_cycles=1 arch.L_cycles=2 arch.halt_max_steps=2 log_interval=1 lr=1e-4)
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
close() { # two loss columns agree within rel
  paste <(losses "$1") <(losses "$2") | awk -v rel="$3" 'NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) m = r; n++ }
    END { printf "max relative lm_loss difference %.3g over %d steps\n", m, n; exit !(!bad && n == 20 && m <= rel) }'
}

"$TRM" pretrain "${common[@]}" device=mps arch.forward_dtype=bfloat16 compile=true checkpoint_path=mps > mps.txt 2>&1 ||
  { cat mps.txt; fail "training on mps"; }
[ "$(grep -c "forward_dtype=bfloat16 is not supported on mps" mps.txt)" = 1 ] || { cat mps.txt; fail "no single bf16 warning"; }
[ "$(grep -c "compile=true is not supported on mps" mps.txt)" = 1 ] || { cat mps.txt; fail "no single compile warning"; }
grep -q "^device=mps" mps.txt || { cat mps.txt; fail "the run does not say it chose mps"; }
"$TRM" pretrain "${common[@]}" device=cpu checkpoint_path=cpu > cpu.txt 2>&1 || { cat cpu.txt; fail "training on cpu"; }
echo -n "mps vs cpu: "; close mps cpu 1e-4 || fail "mps losses differ from cpu's"

ck=mps/step_20.safetensors
for dev in mps cpu; do
  # the checkpoint's config says bfloat16, which mps computed in float32; cpu has bf16 on some CPUs
  "$TRM" generate --checkpoint $ck --data data --output preds_$dev.npy device=$dev arch.forward_dtype=float32 \
    > gen_$dev.txt 2>&1 ||
    { cat gen_$dev.txt; fail "generate on $dev"; }
done
cmp -s preds_mps.npy preds_cpu.npy || fail "the mps checkpoint predicts differently on mps and cpu"

"$TRM" pretrain "${common[@]}" device=mps stop_after_steps=10 checkpoint_path=r > r1.txt 2>&1 || { cat r1.txt; fail "resume part 1"; }
"$TRM" pretrain "${common[@]}" device=cpu stop_after_steps=15 resume=r/step_10.safetensors > r2.txt 2>&1 || { cat r2.txt; fail "resume part 2"; }
"$TRM" pretrain "${common[@]}" device=mps resume=r/step_15.safetensors > r3.txt 2>&1 || { cat r3.txt; fail "resume part 3"; }
echo -n "mps -> cpu -> mps vs uninterrupted mps: "; close r mps 1e-4 || fail "the resumed run diverged"
echo "mps: all checks passed"
