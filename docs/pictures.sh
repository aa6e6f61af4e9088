#!/usr/bin/env bash
# docs/pictures.sh TRM [WORKDIR] — the pictures in the README, from real runs: the README's
# cfg=tiny run on the 4x4 Sudoku and the same with attention + RoPE instead of the MLP mixer,
# their curves drawn by `trm plot` (docs/img/curves.png) and the first run's report.html
# screenshotted in headless Chromium (docs/img/report.png).
set -euo pipefail
TRM=$(realpath "$1")
W=${2:-$PWD/pictures-work}
DOCS=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W" "$DOCS/img" && cd "$W"
[ -d data/sudoku4 ] || "$TRM" data sudoku4 --out data/sudoku4 --force
[ -f runs/tiny-demo/report.html ] ||
  "$TRM" pretrain cfg=tiny +run_name=tiny-demo checkpoint_path=runs/tiny-demo > tiny-demo.log
[ -f runs/tiny-attention/report.html ] ||
  "$TRM" pretrain cfg=tiny +run_name=tiny-attention checkpoint_path=runs/tiny-attention \
    arch.mlp_t=False arch.pos_encodings=rope > tiny-attention.log
"$TRM" plot runs/tiny-demo runs/tiny-attention -o "$DOCS/img/curves.png" --width 1200 \
  --title "cfg=tiny on the 4x4 Sudoku: MLP mixer (the preset) vs attention + RoPE"
"$DOCS/screenshot_report.sh" runs/tiny-demo "$DOCS/img/report.png" 1280 2300
