#!/usr/bin/env bash
# Device-side proof of issue 15 (PyTorch interop), run where torch and the reference's code are
# (REF_DIR holds the reference's models/ folder, as ../shared/anchors/README.md sets up .ref):
#  1. trm -> reference: trm trains two small models on a 4x4 Sudoku set (cfg=tiny: mlp_t in
#     float32 with EMA; attention + RoPE in bfloat16), `trm convert` exports each as safetensors,
#     as torch.save and as torch.save with torch.compile's prefix; the reference model loads
#     every file with load_state_dict(strict=True) (dtypes and shapes equal to its own) and its
#     test predictions equal those of `trm generate` (the bfloat16 model compared in float32 on
#     both sides, and in bfloat16 for information).
#  2. reference -> trm: the reference trains (its loss head, AdamATan2, sparse sign-SGD) and
#     saves as pretrain.py does, with and without torch.compile, all_config.yaml beside; `trm
#     generate` on both files (config from all_config.yaml) and on `trm convert`'s trm
#     checkpoint predicts as the reference does, and `trm pretrain load_checkpoint=` continues
#     training from the reference's file (its first losses are the trained model's, not a fresh
#     one's).
# Prints one JSON line per check and a summary; exits 1 if any check failed.
# usage: bench/interop_check.sh TRM_BINARY REF_DIR WORKDIR   (PYTHON=python3 by default; TRM_EXTRA="k=v ..."
#        adds overrides to both trm runs)
set -uo pipefail
TRM=$(realpath "$1") REF=$(realpath "$2") W=$3
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W" && W=$(realpath "$W") || exit 1
RES=$W/interop_results.jsonl
: > "$RES"
say() { echo "== $*"; }
check() { # name ok(0/1) detail
  local ok=$([ "$2" = 1 ] && echo true || echo false)
  printf '{"check": "%s", "ok": %s, "detail": "%s"}\n' "$1" "$ok" "$3" | tee -a "$RES"
}
refpy() { # a python crash is a failed check too
  "$PY" "$HERE/interop_ref.py" "$REF" "$@" > "$W/py.out" 2>>"$W/python.err"
  local rc=$?
  cat "$W/py.out" && cat "$W/py.out" >> "$RES"
  [ $rc = 0 ] || grep -q '"ok": false' "$W/py.out" || check "python $1" 0 "exit $rc: $(tail -1 "$W/python.err" | tr '"' "'")"
}
first_loss() { grep -m1 '"kind":"train"' "$1/metrics.jsonl" | grep -o '"train/lm_loss":[^,}]*' | cut -d: -f2; }
# the arch block of a resolved config as JSON (the keys interop_ref.py builds the reference model from)
arch_json() { # extra-json args...
  local extra=$1; shift
  "$TRM" config show "$@" | awk -v extra="$extra" '
    /^arch:/ { a = 1; next } /^[^ ]/ { a = 0 }
    a && /^  [A-Za-z_]+: / && !/^  (name|loss):/ {
      k = $1; sub(":", "", k); v = $2
      if (v !~ /^(true|false|-?[0-9.e+-]+)$/) v = "\"" v "\""
      out = out (out ? ", " : "") "\"" k "\": " v
    } END { print "{" out (extra ? ", " extra : "") "}" }'
}

"$PY" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), file=sys.stderr)' ||
  { echo "no torch for $PY"; exit 1; }
"$TRM" version
"$TRM" data sudoku4 --out "$W/data" --train 1000 --test 200 --seed 1 > /dev/null || exit 1
read -r -a extra <<<"${TRM_EXTRA:-}" # more overrides for both runs (a quicker dry run: fewer cycles and epochs)
A=(cfg=tiny "data_paths=[$W/data]" global_batch_size=64 epochs=16 eval_interval=16 log_interval=50 ema=True ema_rate=0.95
   "${extra[@]}")
B=(cfg=tiny "data_paths=[$W/data]" global_batch_size=64 epochs=16 eval_interval=16 log_interval=50
   arch.mlp_t=False arch.pos_encodings=rope arch.forward_dtype=bfloat16 "${extra[@]}")
arch_json '' "${A[@]}" > "$W/A.json"
arch_json '"informational": true' "${B[@]}" > "$W/B16.json" # bf16 kernels differ: numbers only
arch_json '' "${B[@]}" arch.forward_dtype=float32 > "$W/B32.json"
cat "$W/A.json" "$W/B16.json"

# ---- 1. trm -> the reference -----------------------------------------------------------------
train_export() { # NAME pretrain-args...
  local m=$1; shift
  say "trm trains $m"
  "$TRM" pretrain "$@" checkpoint_path="$W/$m" > "$W/$m.log" 2>&1 || { tail -5 "$W/$m.log"; check "trm pretrain $m" 0 "see $m.log"; return; }
  local ck=$(ls -v "$W/$m"/step_*.safetensors | tail -1)
  grep '"kind":"eval"' "$W/$m/metrics.jsonl" | tail -1
  "$TRM" convert "$ck" "$W/${m}_ref.safetensors" && "$TRM" convert "$ck" "$W/${m}_ref.pt" &&
    "$TRM" convert "$ck" "$W/${m}_compiled.pt" --compiled || check "trm convert $m" 0 "export failed"
}
train_export A "${A[@]}"
train_export B "${B[@]}"
# A (float32): trm generate on its own checkpoint. B: on the export, whose H_init/L_init are the
# bfloat16 values the reference holds (trm keeps float32 masters of them)
"$TRM" generate --checkpoint "$(ls -v "$W"/A/step_*.safetensors | tail -1)" --data "$W/data" --output "$W/A_trm.npy" --json
"$TRM" generate --checkpoint "$W/B_ref.safetensors" --data "$W/data" --output "$W/B_trm_f32.npy" --json "${B[@]}" arch.forward_dtype=float32
"$TRM" generate --checkpoint "$W/B_ref.safetensors" --data "$W/data" --output "$W/B_trm_bf16.npy" --json "${B[@]}"
say "the reference loads trm's exports (strict=True) and predicts"
refpy eval "$W/A.json" "$W/data" "$W/A_trm.npy" --dtypes "$W/A_ref.safetensors" "$W/A_ref.pt" "$W/A_compiled.pt"
refpy eval "$W/B32.json" "$W/data" "$W/B_trm_f32.npy" "$W/B_ref.safetensors" "$W/B_ref.pt" "$W/B_compiled.pt"
refpy eval "$W/B16.json" "$W/data" "$W/B_trm_bf16.npy" --dtypes "$W/B_ref.safetensors" "$W/B_compiled.pt"

# ---- 2. the reference -> trm -----------------------------------------------------------------
say "the reference trains and saves as pretrain.py does"
refpy train "$W/B16.json" "$W/data" "$W/R" 300
for kind in plain compiled; do
  f=$W/R/$kind/step_300
  [ -f "$f" ] || { check "reference saved $kind" 0 "no $f"; continue; }
  "$TRM" generate --checkpoint "$f" --data "$W/data" --output "$W/R_${kind}_trm.npy" --json arch.forward_dtype=float32 2> "$W/R_$kind.err"
  grep -q "config: $W/R/$kind/all_config.yaml" "$W/R_$kind.err"; check "trm generate takes all_config.yaml ($kind)" $((! $?)) "$(grep -m1 config: "$W/R_$kind.err")"
  refpy compare "$W/R/ref_f32_preds.npy" "$W/R_${kind}_trm.npy" "reference step_300 ($kind) by trm generate"
done
"$TRM" convert "$W/R/compiled/step_300" "$W/R.safetensors" || check "trm convert of the reference's file" 0 ""
"$TRM" generate --checkpoint "$W/R.safetensors" --data "$W/data" --output "$W/R_conv_trm.npy" --json arch.forward_dtype=float32
refpy compare "$W/R/ref_f32_preds.npy" "$W/R_conv_trm.npy" "reference step_300 through trm convert"
say "trm continues training from the reference's file"
C=("${B[@]}" log_interval=1 stop_after_steps=20)
"$TRM" pretrain "${C[@]}" load_checkpoint="$W/R/compiled/step_300" checkpoint_path="$W/cont" > "$W/cont.log" 2>&1
grep -q "loaded weights from $W/R/compiled/step_300" "$W/cont.log"; check "load_checkpoint= of the reference's step_300" $((! $?)) "$(tail -1 "$W/cont.log")"
"$TRM" pretrain "${C[@]}" checkpoint_path="$W/fresh" > "$W/fresh.log" 2>&1
lc=$(first_loss "$W/cont") lf=$(first_loss "$W/fresh")
awk -v c="$lc" -v f="$lf" 'BEGIN { exit !(c != "" && f != "" && c < 0.9 * f) }'
check "training continues from the reference's weights" $((! $?)) "first lm_loss $lc from step_300, $lf from scratch; 20 steps: $(ls "$W/cont" | grep -c safetensors) checkpoint"

nfail=$(grep -c '"ok": false' "$RES")
say "$(grep -c '"ok": true' "$RES") checks passed, $nfail failed (results: $RES; python stderr: $W/python.err)"
[ "$nfail" = 0 ]
