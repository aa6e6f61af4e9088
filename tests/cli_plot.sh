#!/usr/bin/env bash
# CLI test of `trm plot`: two runs' known metrics.jsonl (one resumed from an earlier step, one
# with ARC pass@K and a last line still being written) give an SVG whose series, points and
# legend are the expected ones (parsed as XML) and a PNG that decodes (Python's zlib and
# struct: chunk CRCs, every row filter) to the figure's size with each run's colour drawn;
# bad input is refused with the file and line named.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || { echo "python3 not found: skipped"; exit 77; }
rm -rf "$TMP" && mkdir -p "$TMP/a" "$TMP/b" && cd "$TMP" || exit 1

printf 'run_name: demo-a\n' > a/config.yaml
for s in 10 20 30 40 50 60; do # a loss falling 10x: the lm_loss axis goes log
  awk -v s=$s 'BEGIN { printf "{\"step\":%d,\"kind\":\"train\",\"train/accuracy\":%.3f,\"train/exact_accuracy\":%.3f,\"train/q_halt_accuracy\":0.9,\"train/steps\":%d,\"train/lm_loss\":%.4f,\"train/q_halt_loss\":0.01,\"train/lr\":%g}\n", s, s/70, s/100, 16 - s/5, 2/(s/10), s*1e-5 }'
done > a/metrics.jsonl
echo '{"step":30,"kind":"eval","all/accuracy":0.5,"all/exact_accuracy":0.2,"all/q_halt_accuracy":0.9,"all/steps":16,"all/lm_loss":0.8,"all/q_halt_loss":0.1,"all/count":64}' >> a/metrics.jsonl
echo '{"step":60,"kind":"eval","all/accuracy":0.8,"all/exact_accuracy":0.5,"all/q_halt_accuracy":0.9,"all/steps":16,"all/lm_loss":0.4,"all/q_halt_loss":0.1,"all/count":64}' >> a/metrics.jsonl
# resumed from step 40: steps 50 and 60 are logged again; the second ones count
echo '{"step":50,"kind":"train","train/accuracy":0.6,"train/exact_accuracy":0.4,"train/q_halt_accuracy":0.9,"train/steps":4,"train/lm_loss":0.3,"train/q_halt_loss":0.01,"train/lr":0.0005}' >> a/metrics.jsonl
echo '{"step":60,"kind":"train","train/accuracy":0.7,"train/exact_accuracy":0.5,"train/q_halt_accuracy":0.9,"train/steps":4,"train/lm_loss":0.25,"train/q_halt_loss":0.01,"train/lr":0.0006}' >> a/metrics.jsonl
cat > b/metrics.jsonl <<'JSONL'
{"step":25,"kind":"train","train/accuracy":0.3,"train/exact_accuracy":0,"train/q_halt_accuracy":1,"train/steps":8,"train/lm_loss":1.5,"train/q_halt_loss":0.02,"train/lr":0.001}
{"step":50,"kind":"train","train/accuracy":0.4,"train/exact_accuracy":0.1,"train/q_halt_accuracy":1,"train/steps":8,"train/lm_loss":1.2,"train/q_halt_loss":0.02,"train/lr":0.001}
{"step":50,"kind":"eval","all/accuracy":0.4,"all/exact_accuracy":0.1,"all/lm_loss":1.3,"ARC/pass@1":0.05,"ARC/pass@2":0.0625}
JSONL
printf '{"step":75,"kind":"train","train/accu' >> b/metrics.jsonl # a live run mid-write

"$TRM" plot a b -o curves.svg > plot.txt || fail "trm plot (svg): $(cat plot.txt)"
grep -q "wrote curves.svg: 2 runs" plot.txt || fail "plot summary: $(cat plot.txt)"
python3 - curves.svg <<'PY' || fail "the SVG does not hold the expected series"
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
series = {(p.get("data-run"), p.get("data-key")): p for p in root.iter("{http://www.w3.org/2000/svg}polyline") if p.get("data-key")}
want = {("demo-a", "train/lm_loss"): 6, ("demo-a", "train/accuracy"): 6, ("demo-a", "train/exact_accuracy"): 6,
        ("demo-a", "train/q_halt_accuracy"): 6, ("demo-a", "train/steps"): 6, ("demo-a", "train/lr"): 6,
        ("demo-a", "all/lm_loss"): 2, ("demo-a", "all/exact_accuracy"): 2, ("demo-a", "all/steps"): 2,
        ("b", "train/lm_loss"): 2, ("b", "all/accuracy"): 1, ("b", "ARC/pass@1"): 1, ("b", "ARC/pass@2"): 1}
for key, n in want.items():
    p = series.get(key)
    assert p is not None, "no series %s" % (key,)
    assert int(p.get("data-n")) == n, "%s: %s points, expected %d" % (key, p.get("data-n"), n)
    pts = p.get("points").split()
    assert len(pts) == n, "%s: %d drawn points" % (key, len(pts))
    assert (p.get("class") == "eval") == (not key[1].startswith("train/")), key
# x grows with step and the resumed values are used: lm_loss of run a ends lowest (0.25)
pts = [tuple(map(float, q.split(","))) for q in series[("demo-a", "train/lm_loss")].get("points").split()]
assert all(pts[i][0] < pts[i + 1][0] for i in range(len(pts) - 1)), pts
assert pts[-1][1] == max(y for _, y in pts), "the last point is not the lowest loss"
texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
for label in ("lm_loss (log scale)", "accuracy", "exact_accuracy", "q_halt_accuracy", "mean ACT steps",
              "learning rate", "ARC pass@K", "demo-a (step 60)", "b (step 50)", "step"):
    assert label in texts, "no text %r" % label
colours = {p.get("stroke") for (run, _), p in series.items() if run == "demo-a"} | {"#1f77b4"}
assert colours == {"#1f77b4"}, colours
PY

"$TRM" plot a b -o curves.png --width 900 > plot.txt || fail "trm plot (png): $(cat plot.txt)"
python3 - curves.png <<'PY' || fail "the PNG does not decode to the figure"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "signature"
pos, chunks = 8, []
while pos < len(data):
    n, = struct.unpack(">I", data[pos:pos + 4])
    typ, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(typ + body) == crc, "bad CRC in %s" % typ
    chunks.append((typ, body))
    pos += 12 + n
assert [t for t, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND"
w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
assert (w, depth, ctype, inter) == (900, 8, 2, 0) and 400 < h < 2000, (w, h, depth, ctype)
raw = zlib.decompress(b"".join(b for t, b in chunks if t == b"IDAT"))
stride = w * 3
assert len(raw) == h * (stride + 1)
prev, px = bytearray(stride), []
for y in range(h):
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = row[i - 3] if i >= 3 else 0
        b, c = prev[i], prev[i - 3] if i >= 3 else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + b) & 255
        elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        else: assert f == 0, "filter %d" % f
    px.append(bytes(row)); prev = row
count = {}
for row in px:
    for i in range(0, stride, 3):
        count[row[i:i + 3]] = count.get(row[i:i + 3], 0) + 1
white = count.get(b"\xff\xff\xff", 0)
assert white > w * h // 2, "background is not mostly white"
blue, orange = count.get(bytes((31, 119, 180)), 0), count.get(bytes((255, 127, 14)), 0)
assert blue > 500 and orange > 100, "run colours drawn: blue %d, orange %d" % (blue, orange)
dark = sum(n for k, n in count.items() if max(k) < 80)
assert dark > 2000, "too little text: %d dark pixels" % dark
PY

# bad input: each refused with a message naming what is wrong
"$TRM" plot a missing-run 2> err.txt && fail "a missing run directory was accepted"
grep -q "missing-run" err.txt || fail "missing run message: $(cat err.txt)"
mkdir -p bad && printf '{"step":1,"kind":"train","train/lm_loss":1}\n{"step":2,"kind":"train",\n' > bad/metrics.jsonl
"$TRM" plot bad 2> err.txt && fail "a malformed metrics.jsonl was accepted"
grep -q "bad/metrics.jsonl:2" err.txt || fail "malformed line message: $(cat err.txt)"
mkdir -p empty && : > empty/metrics.jsonl
"$TRM" plot empty 2> err.txt && fail "an empty log was plotted"
grep -q "no metrics yet" err.txt || fail "empty log message: $(cat err.txt)"
"$TRM" plot a -o curves.jpg 2> err.txt && fail "a .jpg output was accepted"
grep -q "must end in .svg or .png" err.txt || fail "extension message: $(cat err.txt)"
"$TRM" plot 2> err.txt && fail "no run given was accepted"
grep -q "give one or more run directories" err.txt || fail "no-run message: $(cat err.txt)"
echo "cli_plot: ok"
