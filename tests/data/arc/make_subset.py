#!/usr/bin/env python3
"""Makes the handful of ARC tasks the tests read (tests/cli_data_arc.sh, cli_train_arc.sh)
from the full Kaggle-format files: the first N tasks (by id) of each subset, challenges and
solutions alike, written compactly. The full data: https://github.com/arcprize/ARC-AGI-2
and https://github.com/fchollet/ARC-AGI (Apache-2.0; see NOTICE here).

  python3 tests/data/arc/make_subset.py FULL_DIR tests/data/arc
"""
import json
import os
import sys

COUNTS = {"training": 24, "evaluation": 16, "concept": 8}


def main(src, dst):
    for subset, n in COUNTS.items():
        ch = json.load(open(os.path.join(src, f"arc-agi_{subset}_challenges.json")))
        so = json.load(open(os.path.join(src, f"arc-agi_{subset}_solutions.json")))
        keep = sorted(ch)[:n]
        for kind, data in (("challenges", ch), ("solutions", so)):
            out = {k: data[k] for k in keep}
            with open(os.path.join(dst, f"arc-agi_{subset}_{kind}.json"), "w") as f:
                json.dump(out, f, separators=(",", ":"))
                f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
