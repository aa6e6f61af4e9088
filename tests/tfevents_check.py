"""tfevents_check.py RUN_DIR PROTO_MODULE_DIR [--files N] [--first-steps S1,S2,...] [--live]

Reads every events.out.tfevents.* of a trm run directory as TensorBoard does, with Google's
protobuf library over the messages TensorBoard reads (tfevents.proto, compiled by protoc into
PROTO_MODULE_DIR), and checks:
  - the TFRecord framing: each length and its masked CRC32C, each record's masked CRC32C,
    nothing after the last record;
  - each Event re-encodes to the same bytes (trm writes what protobuf writes);
  - each file begins with file_version "brain.Event:2", a SessionLog START at the first step
    of its session (--first-steps, in file order) and the resolved config as a text summary
    (the last session's equal to config.yaml);
  - every scalar equals metrics.jsonl's value at its step (as float32), every value of
    metrics.jsonl is there, each (tag, step) once over all the files, and
    train/examples_per_s (TensorBoard only) is positive at each train record.
--live: the files are what a TensorBoard that was running saw (an earlier session's file
    before the resume cut it back): instead of each (tag, step) once, the points are read as
    TensorBoard's loaders keep them — the Python loader drops every point at or after a
    SessionLog START's step, RustBoard a tag's points at or after a new point's step — and
    both views must equal metrics.jsonl.
"""
import glob
import json
import math
import os
import struct
import sys

run, proto_dir = sys.argv[1], sys.argv[2]
want_files = None
first_steps = None
live = False
args = sys.argv[3:]
while args:
    if args[0] == "--files":
        want_files = int(args[1])
    elif args[0] == "--first-steps":
        first_steps = [int(x) for x in args[1].split(",")]
    elif args[0] == "--live":
        live = True
        args = args[1:]
        continue
    args = args[2:]
sys.path.insert(0, proto_dir)
import tfevents_pb2 as pb  # noqa: E402


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC32C self-test"


def fail(msg):
    print("tfevents_check: FAIL: " + msg)
    sys.exit(1)


def records(path):
    data = open(path, "rb").read()
    off = 0
    while off < len(data):
        if len(data) - off < 12:
            fail(f"{path}: {len(data) - off} bytes after the last record")
        (n,) = struct.unpack_from("<Q", data, off)
        (lcrc,) = struct.unpack_from("<I", data, off + 8)
        if lcrc != masked(crc32c(data[off:off + 8])):
            fail(f"{path}@{off}: bad length CRC")
        if off + 16 + n > len(data):
            fail(f"{path}@{off}: record runs past the end")
        body = data[off + 12:off + 12 + n]
        (dcrc,) = struct.unpack_from("<I", data, off + 12 + n)
        if dcrc != masked(crc32c(body)):
            fail(f"{path}@{off}: bad data CRC")
        yield body
        off += 16 + n


config_yaml = open(os.path.join(run, "config.yaml")).read()
files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")))
if want_files is not None and len(files) != want_files:
    fail(f"{len(files)} events files, expected {want_files}: {files}")
if not files:
    fail("no events file")
scalars = {}  # (tag, step) -> value
rust = {}     # tag -> {step: value}, as RustBoard's reservoirs keep them
nrec = 0
for fi, path in enumerate(files):
    events = []
    for body in records(path):
        ev = pb.Event()
        ev.ParseFromString(body)
        if ev.SerializeToString() != body:
            fail(f"{path}: an event does not re-encode to its bytes")
        events.append(ev)
    if len(events) < 3:
        fail(f"{path}: {len(events)} events")
    if events[0].WhichOneof("what") != "file_version" or events[0].file_version != "brain.Event:2":
        fail(f"{path}: first event is not file_version brain.Event:2")
    start = events[1]
    if start.WhichOneof("what") != "session_log" or start.session_log.status != pb.SessionLog.START:
        fail(f"{path}: second event is not a SessionLog START")
    if first_steps is not None and start.step != first_steps[fi]:
        fail(f"{path}: START at step {start.step}, expected {first_steps[fi]}")
    cfg = events[2]
    v = cfg.summary.value[0] if cfg.WhichOneof("what") == "summary" and cfg.summary.value else None
    if (v is None or v.tag != "config" or v.metadata.plugin_data.plugin_name != "text" or
            v.tensor.dtype != 7 or len(v.tensor.string_val) != 1):
        fail(f"{path}: third event is not the config as a text summary")
    text = "".join(l[4:] for l in v.tensor.string_val[0].decode().splitlines(True))
    # config.yaml is the last session's (a resume adds its resume= to it)
    if fi == len(files) - 1 and text != config_yaml:
        fail(f"{path}: the config text differs from config.yaml")
    if "global_batch_size:" not in text:
        fail(f"{path}: the config text is not a config")
    if live:  # the Python loader's purge (file_version >= 2: on SessionLog START)
        scalars = {k: x for k, x in scalars.items() if k[1] < start.step}
    for ev in events[3:]:
        if ev.WhichOneof("what") != "summary":
            fail(f"{path}: event at step {ev.step} holds {ev.WhichOneof('what')}")
        if ev.wall_time < 1e9:
            fail(f"{path}: wall_time {ev.wall_time}")
        for v in ev.summary.value:
            if v.WhichOneof("value") != "simple_value":
                fail(f"{path}: {v.tag} at {ev.step} is not a simple_value")
            key = (v.tag, ev.step)
            if key in scalars:
                fail(f"{v.tag} at step {ev.step} twice")
            scalars[key] = v.simple_value
            pts = rust.setdefault(v.tag, {})
            for s in [s for s in pts if s >= ev.step]:
                del pts[s]
            pts[ev.step] = v.simple_value
            nrec += 1
rusty = {(t, s): x for t, pts in rust.items() for s, x in pts.items()}
if rusty.keys() != scalars.keys() or any(
        not (rusty[k] == scalars[k] or math.isnan(rusty[k]) and math.isnan(scalars[k])) for k in rusty):
    fail("RustBoard's view differs from the Python loader's")

f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
seen = set()
ntrain = 0
for line in open(os.path.join(run, "metrics.jsonl")):
    rec = json.loads(line)
    step = rec["step"]
    for k, x in rec.items():
        if k in ("step", "kind"):
            continue
        if (k, step) not in scalars:
            fail(f"{k} at step {step} is in metrics.jsonl, not in the events")
        got = scalars[(k, step)]
        if x is None:
            ok = math.isnan(got)
        else:
            ok = got == f32(x) or (math.isnan(got) and math.isnan(x))
        if not ok:
            fail(f"{k} at step {step}: events {got!r}, metrics.jsonl {x!r}")
        seen.add((k, step))
    if rec["kind"] == "train":
        ntrain += 1
        r = scalars.get(("train/examples_per_s", step))
        if r is None or not r > 0:
            fail(f"train/examples_per_s at step {step}: {r}")
        seen.add(("train/examples_per_s", step))
extra = set(scalars) - seen
if extra:
    fail(f"in the events, not in metrics.jsonl: {sorted(extra)[:5]}")
print(f"tfevents_check: {len(files)} file(s), {nrec} scalars, {ntrain} train records: ok")
