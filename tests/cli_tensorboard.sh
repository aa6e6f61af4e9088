#!/usr/bin/env bash
# TensorBoard event files: a run writes events.out.tfevents.* beside metrics.jsonl, and
# tests/tfevents_check.py reads them with Google's protobuf library (Debian's
# python3-protobuf, the messages compiled by protoc from the .proto below: Event, SessionLog,
# Summary, Summary.Value, SummaryMetadata, TensorProto with TensorFlow's field numbers):
# TFRecord lengths and masked CRC32Cs, every scalar against metrics.jsonl, the config as text.
# A run resumed from an earlier checkpoint (after a half-written record, as kill -9 leaves)
# has each step once over its two files; logger=none writes none. Skips (77) without protoc
# or python3's google.protobuf.
set -uo pipefail
TRM=$1 SRC=$2 SHARED=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
command -v protoc >/dev/null || { echo "SKIP: protoc not found (Debian: protobuf-compiler)"; exit 77; }
PY=
for p in python3 /usr/bin/python3; do
  command -v "$p" >/dev/null && "$p" -c 'import google.protobuf' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "SKIP: no python3 with google.protobuf (Debian: python3-protobuf)"; exit 77; }
rm -rf "$TMP" && mkdir -p "$TMP/pb" && cd "$TMP" || exit 1
export OMP_NUM_THREADS=1

# The messages TensorBoard reads, as tensorflow/core/util/event.proto and
# tensorflow/core/framework/{summary,tensor,tensor_shape}.proto publish them (fields trm
# does not write are left out; DataType is carried as its int32).
cat > pb/tfevents.proto <<'PROTO'
syntax = "proto3";
package trmtest;
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    bytes graph_def = 4;
    Summary summary = 5;
    SessionLog session_log = 7;
  }
}
message SessionLog {
  enum SessionStatus { STATUS_UNSPECIFIED = 0; START = 1; STOP = 2; CHECKPOINT = 3; }
  SessionStatus status = 1;
  string checkpoint_path = 2;
  string msg = 3;
}
enum DataClass {
  DATA_CLASS_UNKNOWN = 0; DATA_CLASS_SCALAR = 1; DATA_CLASS_TENSOR = 2; DATA_CLASS_BLOB_SEQUENCE = 3;
}
message SummaryMetadata {
  message PluginData { string plugin_name = 1; bytes content = 2; }
  PluginData plugin_data = 1;
  string display_name = 2;
  string summary_description = 3;
  DataClass data_class = 4;
}
message TensorShapeProto {
  message Dim { int64 size = 1; string name = 2; }
  repeated Dim dim = 2;
  bool unknown_rank = 3;
}
message TensorProto {
  int32 dtype = 1;
  TensorShapeProto tensor_shape = 2;
  int32 version_number = 3;
  bytes tensor_content = 4;
  repeated bytes string_val = 8;
}
message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    SummaryMetadata metadata = 9;
    oneof value {
      float simple_value = 2;
      bytes obsolete_old_style_histogram = 3;
      TensorProto tensor = 8;
    }
  }
  repeated Value value = 1;
}
PROTO
protoc -Ipb --python_out=pb pb/tfevents.proto || fail "protoc"
check() { "$PY" "$SRC/tests/tfevents_check.py" "$1" pb "${@:2}"; }

"$TRM" data sudoku4 --out d4 --train 128 --test 32 >/dev/null 2>&1 || fail "data sudoku4"
A=(cfg=tiny "data_paths=[d4]" device=cpu global_batch_size=32 epochs=4 eval_interval=2 log_interval=2
   arch.hidden_size=32 arch.H_cycles=1 arch.L_cycles=2 arch.halt_max_steps=2)

# 1. a whole run: 16 steps, train records every 2, evaluations at 8 and 16
"$TRM" pretrain "${A[@]}" checkpoint_path=run > o1.txt 2>&1 || { cat o1.txt; fail "pretrain"; }
[ -f run/step_8.safetensors ] && [ -f run/step_16.safetensors ] || fail "checkpoints 8 and 16 missing"
grep -q '"kind":"eval"' run/metrics.jsonl || fail "no evaluation in metrics.jsonl"
check run --files 1 --first-steps 1 || fail "the run's events"

# 2. resumed from step 8 after a record cut short: the old file keeps steps <= 8, the new one
#    starts with START at 9; each step once over both, equal to the cut metrics.jsonl
old=$(ls run/events.out.tfevents.*)
mkdir live && cp "$old" live/ # what a TensorBoard that is running has read of it
head -c 20 "$old" >> "$old"   # the start of a record, as a kill mid-write leaves it
"$TRM" pretrain "${A[@]}" checkpoint_path=run resume=run/step_8.safetensors > o2.txt 2>&1 ||
  { cat o2.txt; fail "resume"; }
check run --files 2 --first-steps 1,9 || fail "the resumed run's events"
# that TensorBoard then reads the new file: its START (in RustBoard, the repeated steps)
# drops the old file's steps 9..16
cp "$(ls run/events.out.tfevents.* | tail -1)" run/config.yaml run/metrics.jsonl live/
check live --files 2 --first-steps 1,9 --live || fail "the events as a running TensorBoard sees them"
"$PY" - run <<'PY' || fail "metrics.jsonl after the resume"
import json, sys
r = [(d["step"], d["kind"]) for d in map(json.loads, open(sys.argv[1] + "/metrics.jsonl"))]
sys.exit(0 if len(r) == len(set(r)) and max(s for s, _ in r) == 16 else 1)
PY

# 3. logger=none: no events file; a bad value is refused by name
"$TRM" pretrain "${A[@]}" checkpoint_path=quiet logger=none epochs=2 > o3.txt 2>&1 || { cat o3.txt; fail "logger=none"; }
ls quiet/events.out.tfevents.* >/dev/null 2>&1 && fail "logger=none wrote an events file"
"$TRM" pretrain "${A[@]}" checkpoint_path=bad logger=wandb > o4.txt 2>&1 && fail "logger=wandb accepted"
grep -q "logger: expected tensorboard or none, got 'wandb'" o4.txt || fail "logger refusal: $(cat o4.txt)"
echo "cli_tensorboard: ok"
