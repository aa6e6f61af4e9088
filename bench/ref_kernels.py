"""The reference's GPU kernels, one table per config (issue 28): runs the anchors' ref_bench.py
(which times the reference TRM with torch.compile and prints its JSON line), then two more of its
training steps under torch.profiler, and prints each kernel's CUDA time over those two steps, the
longest first. Beside `TRM_PROFILE=1 bench/gpu.sh` (trm's per-op table, also over two steps) it
says which of the reference's kernels (cuDNN's attention, cuBLAS's GEMMs, Inductor's fused passes)
each of trm's ops stands against. trm's profile synchronises after every op, so its short ops
carry a few microseconds of launch and wait each; these are kernel times alone.

usage: python3 bench/ref_kernels.py REF_DIR CONFIG [ref_bench.py's options]
       (REF_DIR holds the reference's models/ and utils/ and ref_bench.py: ../shared/anchors/README.md;
       torch.compile is always on; one process, not under torchrun)
"""
import os
import runpy
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
ref_dir = sys.argv[1]
bench = os.path.join(ref_dir, "ref_bench.py")
if not os.path.exists(bench):
    sys.exit(f"ref_kernels: {bench} is missing (copy ../shared/anchors/ref_bench.py there)")
sys.argv = [bench] + sys.argv[1:] + ([] if "--compile" in sys.argv else ["--compile"])
g = runpy.run_path(bench, run_name="__main__")  # its timing and JSON line first

from torch.profiler import ProfilerActivity, profile  # noqa: E402 (torch comes with ref_bench)

with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for i in range(2):
        g["step"](i)
    g["sync"]()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=-1, max_name_column_width=100), flush=True)
