#!/usr/bin/env bash
# docs/screenshot_report.sh RUN_DIR OUT.png [WIDTH [HEIGHT]] — opens RUN_DIR/report.html in
# headless Chromium (Debian: apt-get install chromium; as root it needs --no-sandbox), saves a
# screenshot of the window (the page is about 2500 pixels tall at 1280 wide) and checks that
# the picture shows a page rather than a blank or an error screen.
set -euo pipefail
run=$1 out=$2 width=${3:-1280} height=${4:-2560}
[ -f "$run/report.html" ] || { echo "no $run/report.html" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "headless Chromium not found (Debian: apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size="$width,$height" --screenshot="$tmp/shot.png" "file://$(cd "$run" && pwd)/report.html" \
  > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
python3 - "$tmp/shot.png" "$width" "$height" <<'PY'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h, depth, ctype = struct.unpack(">IIBB", d[16:26])
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), (w, h)
pos, idat = 8, b""
while pos < len(d):
    n, = struct.unpack(">I", d[pos:pos + 4])
    if d[pos + 4:pos + 8] == b"IDAT":
        idat += d[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
# a rendered report has text, curves in several colours and puzzle grids: many distinct bytes
assert len(set(raw[: len(raw) // 2])) > 100, "the screenshot looks blank"
print("screenshot %dx%d, %d KiB" % (w, h, len(d) // 1024))
PY
cp "$tmp/shot.png" "$out"
echo "wrote $out"
