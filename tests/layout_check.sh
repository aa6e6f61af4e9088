#!/usr/bin/env bash
# layout_check.sh SRC — the tree keeps its architecture (docs/ARCHITECTURE.md):
#  - no source file directly in trm/; every product file in a known folder;
#  - a file includes its own folder's headers by name, and of another folder only the face
#    "F/F.h" of a folder its own folder may stand on (the layering below);
#  - no product file over 1200 lines.
set -euo pipefail
src=${1:?usage: layout_check.sh SOURCE_DIR}
cd "$src"

# folder -> the folders it may include (by their faces)
declare -A may=(
  [trm/util]=""
  [trm/config]="util"
  [trm/dist]="util"
  [trm/backend]="util"
  [kernels/cpu]="util backend dist"
  [kernels/cuda]="util backend dist"
  [kernels/vulkan]="util backend"
  [trm/model]="util config backend"
  [trm/data]="util config"
  [trm/io]="util config data model"
  [trm/view]="util config"
  [trm/train]="util config dist backend model data io view"
  [trm/cli]="util config dist backend model data io view train"
)
fail=0
complain() { echo "layout: $*"; fail=1; }

for f in trm/*; do
  [ -d "$f" ] || complain "$f: a file directly in trm/ (each file belongs to a folder)"
done
while IFS= read -r f; do
  dir=$(dirname "$f")
  [ -n "${may[$dir]+x}" ] || { complain "$f: folder $dir is not in the layering"; continue; }
  lines=$(wc -l < "$f")
  [ "$lines" -le 1200 ] || complain "$f: $lines lines (at most 1200)"
  while IFS= read -r inc; do
    case "$inc" in
      */*)
        other=${inc%%/*}
        face="$other/$other.h"
        [ "$inc" = "$face" ] || complain "$f includes \"$inc\": another folder is included by its face \"$face\""
        ok=0
        for m in ${may[$dir]}; do [ "$m" = "$other" ] && ok=1; done
        [ $ok = 1 ] || complain "$f includes \"$inc\": $dir may not stand on $other"
        ;;
      *)
        [ -e "$dir/$inc" ] || [ "$dir" = kernels/vulkan ] ||
          complain "$f includes \"$inc\", which is not in $dir (include another folder by its face)"
        ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find trm kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)

[ $fail = 0 ] && echo "layout: ok"
exit $fail
