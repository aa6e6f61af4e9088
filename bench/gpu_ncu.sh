#!/usr/bin/env bash
# Nsight Compute on the kernels of one bench/gpu.sh config: one warm-up step and one timed step,
# compile off (each op its own launch), the clocks left alone (the device library's METHOD.md).
# Takes the first COUNT launches whose name matches REGEX (the warm-up step's, the same kernels
# on the same shapes), and prints for each its duration, DRAM, L2 and SM throughput and what its
# warps wait on most.
# SOURCE=1 also profiles the first such launch with every section and prints the stall reasons
# and the SASS lines with the most stall samples: where in the kernel the time goes.
# usage: bench/gpu_ncu.sh TRM_BINARY CONFIG REGEX [COUNT (2)]   env: OUT (/tmp/gpu_ncu), SOURCE
#   e.g. bench/gpu_ncu.sh /tmp/trm-bin/trm sudoku_att linear_norm 2
set -uo pipefail
TRM=$1 CONFIG=$2 RE=$3 N=${4:-2}
OUT=${OUT:-/tmp/gpu_ncu}
mkdir -p "$OUT"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
GPU=$(cd "$(dirname "$0")" && pwd)/gpu.sh
prof() { # ncu arguments...: the config's bench under ncu, which follows it into trm
  STEPS=1 WARMUP=1 COMPILE=false "$NCU" --target-processes all --clock-control none -k "regex:$RE" "$@" \
    bash "$GPU" "$TRM" "$CONFIG"
}
prof -c "$N" --section SpeedOfLight --section SchedulerStats --section WarpStateStats >"$OUT/ncu.txt" 2>&1 ||
  { tail -5 "$OUT/ncu.txt"; exit 1; }
grep -E "Context [0-9]+, Stream|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Th" \
  "$OUT/ncu.txt" | sed -E 's/^ +//; s/\(CUtensorMap.*\) \(/(...) (/' | cut -c1-110
grep -A1 "cycles being stalled" "$OUT/ncu.txt" | tr -s ' ' | grep -v '^--' | paste -d' ' - - | cut -c1-160
[ -n "${SOURCE:-}" ] || exit 0
prof -c 1 --set full --import-source no -f -o "$OUT/rep" >"$OUT/full.txt" 2>&1 || { tail -5 "$OUT/full.txt"; exit 1; }
"$NCU" -i "$OUT/rep.ncu-rep" --page source --print-source sass --csv >"$OUT/sass.csv" 2>&1
python3 - "$OUT/sass.csv" <<'PY'
# the SASS lines with the most warp stall samples, each with its share of all samples and its two
# main stall reasons; first the reasons over the whole kernel
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
try:
    h = next(i for i, r in enumerate(rows) if "Source" in r)
    head = rows[h]
    col = next(j for j, c in enumerate(head) if c.startswith("Warp Stall Sampling (All"))
    why = [j for j, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
    src, body = head.index("Source"), [r for r in rows[h + 1:] if len(r) == len(head)]
    num = lambda x: float(x.replace(",", "") or 0)
    total = sum(num(r[col]) for r in body) or 1
    sums = sorted(((sum(num(r[j]) for r in body), head[j][6:]) for j in why), reverse=True)
    print("stall reasons: " + ", ".join("%s %.1f%%" % (n, 100 * v / total) for v, n in sums[:6]))
    print("stall samples by SASS line (top 25 of %d lines):" % len(body))
    for r in sorted(body, key=lambda r: num(r[col]), reverse=True)[:25]:
        main = sorted(((num(r[j]), head[j][6:]) for j in why), reverse=True)[:2]
        print("%5.1f%%  %-70s %s" % (100 * num(r[col]) / total, r[src].strip()[:70],
                                     " ".join("%s:%d" % (n, v) for v, n in main if v)))
except (StopIteration, ValueError) as e:
    print("sass.csv not in the expected form (%s); its first lines:" % e)
    for r in rows[:5]: print(",".join(r)[:200])
PY
