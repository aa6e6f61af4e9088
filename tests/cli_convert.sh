#!/usr/bin/env bash
# CLI test of PyTorch interop without torch: a trm checkpoint exported as the reference's
# state_dict (torch.save and safetensors, with and without torch.compile's prefix) and
# converted back gives identical tensors (H_init/L_init rounded to bfloat16 where the run's
# forward_dtype is bfloat16, as the reference holds them); the export is deterministic; trm
# generate gives the same metrics on the export, on the re-import and on a reference-style run
# directory (step_N + all_config.yaml); load_checkpoint= continues from it; Python's own zipfile
# and pickle (with torch.load's weights_only allowlist) read the export when python3 is here;
# bad inputs fail with their messages.
set -uo pipefail
TRM=$1 SRC=$2 GOLDEN=$3 TMP=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP" && cd "$TMP" || exit 1

"$TRM" data sudoku4 --out data --train 128 --test 40 --seed 4 > /dev/null || fail "data sudoku4"

# largest relative difference over the tensors of A whose names start with inner. once the
# reference's prefixes are dropped, and how many were compared
inner_diff() {
  "$TRM" inspect --diff "$1" "$2" | awk '$1 ~ /^(_orig_mod\.)?(model\.)?inner\./ && NF == 3 { n++; if ($3 > m) m = $3 }
    END { printf "%d %.9g\n", n, m + 0 }'
}
json_of() { "$TRM" generate --checkpoint "$@" --data data --json 2>gen_err.txt || { cat gen_err.txt; fail "generate $*"; }; }

# --- an mlp_t float32 run with EMA --------------------------------------------------------------
common=(cfg=tiny "data_paths=[data]" epochs=2 eval_interval=2 global_batch_size=32 arch.hidden_size=32
        arch.H_cycles=1 arch.L_cycles=2 arch.halt_max_steps=2 ema=True)
"$TRM" pretrain "${common[@]}" checkpoint_path=mlp > train.txt 2>&1 || { cat train.txt; fail "pretrain"; }
ck=$(ls -v mlp/step_*.safetensors | tail -1)
[ -f "$ck" ] || fail "no checkpoint"
ninner=$("$TRM" inspect "$ck" | grep -c '^    inner\.')

"$TRM" convert "$ck" ref.pt 2>conv.txt || { cat conv.txt; fail "export to .pt"; }
grep -q "model.inner.\*, torch.save" conv.txt || fail "export does not say what it wrote: $(cat conv.txt)"
"$TRM" convert "$ck" ref.safetensors 2>/dev/null || fail "export to .safetensors"
"$TRM" convert "$ck" compiled.pt --compiled 2>/dev/null || fail "export --compiled"
"$TRM" inspect ref.pt > ref_inspect.txt || fail "inspect ref.pt"
[ "$(grep -c '^    model\.inner\.' ref_inspect.txt)" = "$ninner" ] || fail "ref.pt does not hold the $ninner weights as model.inner.*"
grep -Eq '^    (optim|raw|carry)\.' ref_inspect.txt && fail "ref.pt carries trm's optimiser, raw or carry tensors"
grep -q '^    model\.inner\.H_init  *F32 ' ref_inspect.txt || fail "H_init of a float32 run is not F32"
[ "$(grep -A2 'name ' ref_inspect.txt | sed -n 2p | awk '{print $1}')" = model.inner.H_init ] ||
  fail "the state_dict does not start with H_init as the reference's does"
[ "$("$TRM" inspect compiled.pt | grep -c '^    _orig_mod\.model\.inner\.')" = "$ninner" ] || fail "--compiled names"
read -r n m <<<"$(inner_diff "$ck" ref.pt)"
[ "$n" = "$ninner" ] && [ "$m" = 0 ] || fail "export differs from the checkpoint ($n tensors, largest difference $m)"
"$TRM" inspect --diff ref.pt ref.safetensors --tol 0 > /dev/null || fail ".pt and .safetensors exports differ"

# back to trm: the weights are the same, and a second export is the same file
"$TRM" convert ref.pt back.safetensors "${common[@]}" 2>conv.txt || { cat conv.txt; fail "import"; }
grep -q "config: tiny with the command-line overrides" conv.txt || fail "import does not say where its config came from"
read -r n m <<<"$(inner_diff "$ck" back.safetensors)"
[ "$n" = "$ninner" ] && [ "$m" = 0 ] || fail "checkpoint -> .pt -> trm changed tensors ($n compared, largest difference $m)"
mkdir -p again && "$TRM" convert back.safetensors again/ref.pt 2>/dev/null || fail "export of the re-import"
cmp -s ref.pt again/ref.pt || fail "exporting the same weights twice gave different files"

# the same evaluation from every form of the weights
want=$(json_of "$ck")
[ "$(json_of ref.pt "${common[@]}")" = "$want" ] || fail "generate on the exported .pt differs"
[ "$(json_of back.safetensors)" = "$want" ] || fail "generate on the re-imported weights differs"
[ "$(json_of compiled.pt "${common[@]}")" = "$want" ] || fail "generate on the _orig_mod. export differs"

# a run directory as the reference writes it: step_N (torch.save, compiled names) + all_config.yaml
mkdir -p refrun && cp compiled.pt refrun/step_8
cat > refrun/all_config.yaml <<'EOF'
arch:
  H_cycles: 1
  H_layers: 0
  L_cycles: 2
  L_layers: 2
  expansion: 4.0
  forward_dtype: float32
  halt_exploration_prob: 0.1
  halt_max_steps: 2
  hidden_size: 32
  loss:
    loss_type: stablemax_cross_entropy
    name: losses@ACTLossHead
  mlp_t: true
  name: recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1
  no_ACT_continue: true
  num_heads: 2
  pos_encodings: none
  puzzle_emb_len: 1
  puzzle_emb_ndim: 32
beta1: 0.9
beta2: 0.95
checkpoint_every_eval: true
checkpoint_path: checkpoints/Data-ACT-torch/TinyRecursiveReasoningModel_ACTV1 able-otter
data_paths:
- data
data_paths_test: []
ema: true
ema_rate: 0.999
epochs: 2
eval_interval: 2
eval_save_outputs: []
evaluators: []
freeze_weights: false
global_batch_size: 32
load_checkpoint: null
lr: 0.001
lr_min_ratio: 1.0
lr_warmup_steps: 100
min_eval_interval: 0
project_name: Data-ACT-torch
puzzle_emb_lr: 0.001
puzzle_emb_weight_decay: 0.1
run_name: TinyRecursiveReasoningModel_ACTV1 able-otter
seed: 0
weight_decay: 0.1
EOF
[ "$(json_of refrun/step_8)" = "$want" ] || fail "generate on the reference-style run directory differs"
grep -q "config: refrun/all_config.yaml (the reference's run config)" gen_err.txt || fail "generate does not name all_config.yaml: $(cat gen_err.txt)"
"$TRM" convert refrun/step_8 refrun.safetensors 2>/dev/null || fail "import with all_config.yaml"
read -r n m <<<"$(inner_diff "$ck" refrun.safetensors)"
[ "$n" = "$ninner" ] && [ "$m" = 0 ] || fail "import through all_config.yaml changed tensors"
[ "$(json_of refrun.safetensors)" = "$want" ] || fail "generate on the imported run differs"

# training continues from the reference's file
"$TRM" pretrain "${common[@]}" checkpoint_path=cont load_checkpoint=refrun/step_8 > cont.txt 2>&1 || { cat cont.txt; fail "load_checkpoint=step_8"; }
grep -q "loaded weights from refrun/step_8" cont.txt || fail "load_checkpoint did not load"
ls cont/step_*.safetensors > /dev/null 2>&1 || fail "the continued run wrote no checkpoint"
"$TRM" pretrain "${common[@]}" checkpoint_path=nores resume=back.safetensors > res.txt 2>&1 && fail "resumed from a weights-only file"
grep -q "trm-weights-1" res.txt || fail "resume= of weights: $(cat res.txt)"

# --- attention, rope, bfloat16: H_init/L_init go out as bfloat16 ----------------------------------
att=(cfg=tiny "data_paths=[data]" epochs=1 eval_interval=1 global_batch_size=32 arch.hidden_size=32 arch.H_cycles=1
     arch.L_cycles=1 arch.halt_max_steps=2 arch.mlp_t=False arch.pos_encodings=rope arch.forward_dtype=bfloat16)
"$TRM" pretrain "${att[@]}" checkpoint_path=att > att.txt 2>&1 || { cat att.txt; fail "pretrain attention"; }
ack=$(ls -v att/step_*.safetensors | tail -1)
"$TRM" convert "$ack" att.pt 2>/dev/null || fail "export attention"
"$TRM" inspect att.pt | grep -q '^    model\.inner\.H_init  *BF16 ' || fail "H_init of a bfloat16 run is not BF16"
"$TRM" inspect att.pt | grep -q 'self_attn.qkv_proj.weight' || fail "no attention weights"
nowhere=("${att[@]/data_paths=\[data\]/data_paths=[nowhere]}")
"$TRM" convert att.pt att_back.safetensors "${nowhere[@]}" 2>err.txt && fail "imported a rope model without knowing seq_len"
grep -q "do not tell seq_len; give --data DIR" err.txt || fail "seq_len message: $(cat err.txt)"
"$TRM" convert att.pt att_back.safetensors "${nowhere[@]}" --seq-len 16 2>/dev/null || fail "import with --seq-len"
"$TRM" inspect --diff att.pt att_back.safetensors --tol 0 > /dev/null || fail "bf16 export -> trm is not exact"
"$TRM" inspect --diff "$ack" att_back.safetensors > att_diff.txt # exit 1: the optimiser's tensors are not in the import
awk '
  $1 == "inner.H_init" || $1 == "inner.L_init" { inits++; if ($3 > 0.004) bad = 1; next }
  $1 ~ /^inner\./ && NF == 3 && $3 != 0 { bad = 1 } END { exit !(inits == 2 && !bad) }' att_diff.txt ||
  fail "a bfloat16 round trip should change H_init/L_init by rounding only"
[ "$(json_of att_back.safetensors)" = "$(json_of att.pt "${att[@]}")" ] || fail "generate: attention export vs re-import"

# --- Python's zipfile and pickle read the export as torch.load(weights_only=True) would --------
if command -v python3 > /dev/null; then
  python3 - ref.pt ref.safetensors <<'EOF' || fail "python could not read the .pt as torch.load would"
import collections, io, json, pickle, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
top = z.namelist()[0].split("/")[0]
assert all(n.startswith(top + "/") for n in z.namelist())
assert z.read(top + "/byteorder") == b"little" and z.read(top + "/version") == b"3\n"
ALLOWED = {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"), ("torch", "FloatStorage"),
           ("torch", "BFloat16Storage")}
class Loader(pickle.Unpickler):
    def find_class(self, mod, name):
        if (mod, name) not in ALLOWED: raise pickle.UnpicklingError(f"{mod}.{name} is not allowed")
        if name == "OrderedDict": return collections.OrderedDict
        if name == "_rebuild_tensor_v2": return lambda st, off, size, stride, rg, hooks: (st, off, size, stride)
        return name
    def persistent_load(self, pid):
        kind, cls, key, loc, numel = pid
        assert kind == "storage" and loc == "cpu"
        data = z.read(f"{top}/data/{key}")
        assert len(data) == numel * (4 if cls == "FloatStorage" else 2)
        return (cls, data)
sd = Loader(io.BytesIO(z.read(top + "/data.pkl"))).load()
assert type(sd) is collections.OrderedDict
raw = open(sys.argv[2], "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + hlen])
hdr.pop("__metadata__")
assert list(sd) == [k for k in sd] and set(sd) == set(hdr), "names differ"
for name, ((cls, data), off, size, stride) in sd.items():
    h = hdr[name]
    b, e = h["data_offsets"]
    assert list(size) == h["shape"] and off == 0, name
    assert {"FloatStorage": "F32", "BFloat16Storage": "BF16"}[cls] == h["dtype"], name
    assert data == raw[8 + hlen + b:8 + hlen + e], name + ": bytes differ"
print(f"python: {len(sd)} tensors read with the weights_only allowlist, equal to the safetensors export")
EOF
else
  echo "python3 not found: the .pt is not cross-checked by Python's zipfile and pickle"
fi

# --- refusals ----------------------------------------------------------------------------------
"$TRM" convert "$ck" ref.pt 2>err.txt && fail "overwrote an existing file"
grep -q "ref.pt exists; it is kept" err.txt || fail "existing OUT message"
"$TRM" convert ref.pt x.pt "${common[@]}" 2>err.txt && fail "imported into a .pt"
grep -q "a trm checkpoint is a .safetensors file" err.txt || fail ".safetensors OUT message"
"$TRM" convert "$ck" y.pt cfg=tiny 2>err.txt && fail "export took a config"
grep -q "its config is stored in it" err.txt || fail "export with cfg= message"
"$TRM" convert ref.pt z.safetensors cfg=tiny "data_paths=[data]" 2>err.txt && fail "imported with the wrong hidden_size"
grep -q "has shape \[6, 32\], the model needs \[6, 64\]" err.txt || fail "shape message: $(cat err.txt)"
"$TRM" convert ref.pt z.safetensors "${common[@]}" arch.mlp_t=False 2>err.txt && fail "imported mlp_t weights into attention"
grep -q "is not part of this model (the file's layers mix tokens with an MLP: arch.mlp_t=true)" err.txt ||
  fail "strict names message: $(cat err.txt)"
head -c 700 ref.pt > trunc.pt
"$TRM" generate --checkpoint trunc.pt --data data "${common[@]}" 2>err.txt && fail "read a truncated .pt"
grep -q "no zip end-of-central-directory record" err.txt || fail "truncated .pt message: $(cat err.txt)"
echo "cli_convert: all checks passed"
