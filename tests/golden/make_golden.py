#!/usr/bin/env python3
"""make_golden.py -- the golden tensors of tests/test_golden.c, made by the reference's own code.

WHAT IT MAKES
  For each of the 8 variants (SPEC.md §8) a VARIANT.safetensors + VARIANT.json:
    att_rope, att_learned, mlp_t, noemb_rope                      (TRM)
    archs/hrm_rope, archs/transformers_baseline_rope,
    archs/trm_hier6_rope, archs/trm_singlez_rope                  (the other architectures)
  The reference PyTorch model (in float32, on the CPU) is loaded with the init/ weights, trained for
  4 ACT steps on 4 batches (each step: forward + loss head, backward of loss/B, the sparse
  puzzle-embedding sign-SGD, then AdamATan2, with constant learning rates), then evaluated for 3 ACT
  steps on a fresh carry in eval mode. Tensors written (names as test_golden.c reads them):
    init/<state-dict name>                    weights and buffers loaded before step 1
    step<t>/batch/{inputs,labels,puzzle_identifiers}            I32
    step<t>/out/{logits,q_halt_logits,q_continue_logits}        F32 (logits (B,S,V))
    step<t>/out/target_q_continue             F32, only where the model bootstraps it (HRM)
    step<t>/out/<carry field>                 F32 (B,T,D): z_H, z_L / z_L / z_H, z_L1..z_L6 / z_H
    step<t>/out/steps (I32), step<t>/out/halted (BOOL)
    step<t>/loss, step<t>/metric/<name>       F64 (1,): what the loss head returns, unnormalised
    step<t>/grad/<param>                      gradient of loss/B; the puzzle rows' gradient is
                                              grad/inner.puzzle_emb.local_weights (one row per sample)
    step<t>/after/<param>, step<t>/after/inner.puzzle_emb.weights   after both optimisers
    eval/batch/*, eval/step<i>/{out/logits,out/q_halt_logits,out/preds (I64),loss,metric/*}
  Exploration is 0 (halt_exploration_prob 0.0). The reference initialises q_head to weight 0 and
  bias -5 and the puzzle rows to 0, under which no sample would halt before halt_max_steps; so, as
  for the original files, q_head and the puzzle rows are re-randomised (q_head.weight ~ N(0, 0.2²),
  q_head.bias = [0.1, -0.1], puzzle rows ~ N(0, 0.5²)) so that halting happens mid-run.

  A seed (--seed, then the next ones) is kept only if its run
   - halts some sample before the last training step, not every sample at step 1, and some sample
     through its Q head (before halt_max_steps); repeats a puzzle id in some batch (puzzle variants);
   - leaves every discrete decision a margin: each halting decision and each q_halt sign that enters
     q_halt_accuracy >= Q_MARGIN (0.05), each argmax a top-2 logit gap >= LOGIT_GAP (1e-4);
   - survives bfloat16: the reference run in bfloat16, continued from the float32 state at every
     step as test_golden.c does, halts the same and stays within BF16_OUT (0.16) on outputs and
     BF16_GRAD (0.2) on gradients (test_golden.c's bf16 run allows 0.25 and 0.3);
   - has an evaluation that does not amplify float32 rounding: with every weight perturbed by
     2^-23, the logits of evaluation step i move by less than 1/5 of test_golden.c's 3e-5 * 4^(i-1).
  The seed kept is recorded in the .json ("seed"); files from one torch version are reproducible
  bit for bit on the same machine (--threads 1, the default).

  Model sizes (generate mode): the settings of the original files (batch 4, seq_len 16, vocab 6,
  5 puzzle ids, halt_max_steps 3, the same layer counts and cycles per variant, expansion 4,
  2 heads, 4 train / 3 eval steps, lr 3e-3, puzzle_emb_lr 1e-2, ...) with hidden size 16 instead of
  32 (--hidden-size; puzzle_emb_ndim = hidden size). The reference rounds the SwiGLU intermediate
  up to a multiple of 256, so every MLP is 256 wide whatever the hidden size and the per-step
  grad/after copies of the MLP weights are most of the bytes: all 16 files take 10.8 MB at hidden
  size 16 (21.5 MB for the originals at 32; 8.3 MB at 12, 5.9 MB at 8). Below 16 the bf16 run of
  test_golden.c comes close to its tolerances (seen on an AVX512-BF16 CPU: gradients off by 0.27
  at 8 and 0.295 at 12 against 0.3, 0.12 at 16 as 0.10 for the originals).

THE REFERENCE
  github SamsungSAILMontreal/TinyRecursiveModels, commit e7b68717f0a6c4cbb4ce6fbef787b14f42083bd9
  (only its models/ and utils/ are imported), checked out in .ref at the repository root
  (.ref is git-ignored through .git/info/exclude). pydantic and einops are stood in for when they
  are not installed (the models only read config attributes and rearrange = permute). The
  reference trains with the adam_atan2 package (a CUDA extension); this script carries AdamATan2 as
  the pure-PyTorch transcription in shared/anchors/ref_bench_optim.py (copied below), same update.

COMMANDS (from the repository root; python3 with torch, numpy and safetensors; CPU only)
  python3 tests/golden/make_golden.py --ref .ref --out tests/golden
      writes tests/golden/{att_rope,att_learned,mlp_t,noemb_rope}.{safetensors,json} and
      tests/golden/archs/{hrm,transformers_baseline,trm_hier6,trm_singlez}_rope.{safetensors,json},
      then re-checks each written file against a fresh run (--no-verify skips that)
  python3 tests/golden/make_golden.py --ref .ref --out tests/golden --variants att_rope hrm_rope
  python3 tests/golden/make_golden.py --ref .ref --check tests/golden/*.safetensors \\
          tests/golden/archs/*.safetensors
      re-runs the reference from each file's init/ weights and batches and compares every tensor:
      relative error max|a-b| / max|b| <= 1e-5 for outputs, losses and metrics, <= 1e-4 for grad/
      and after/, equality for integer and bool tensors and the counting metrics; exit 1 otherwise.
      --teacher-force continues each step from the file's after/ weights and carry (as
      test_golden.c does) to tell float32 amplification over the steps from a real difference.
  python3 tests/golden/make_golden.py --selftest tests/golden
      without torch: the built-in safetensors reader/writer reproduce each file byte for byte, the
      variant table reproduces each .json, the expected tensor layout matches each header; prints
      the expected size of the files that generate mode writes.
"""
import argparse
import dataclasses
import json
import math
import os
import struct
import sys
import types

REF_COMMIT = "e7b68717f0a6c4cbb4ce6fbef787b14f42083bd9"
TRAIN_STEPS, EVAL_STEPS = 4, 3
IGNORE_LABEL_ID = -100
IGNORED_TAIL = 2  # the last 2 label positions of every row are IGNORE, as in the original files

# re-randomisation (generate mode), as in the original files
Q_WEIGHT_STD = 0.2
Q_BIAS = (0.1, -0.1)  # q_halt, q_continue
PUZZLE_STD = 0.5
# seeds of the three random streams, offset from --seed
INIT_SEED_OFFSET, RERAND_SEED_OFFSET, BATCH_SEED_OFFSET = 0, 1000003, 2000003
# margins a kept seed must have (generate mode)
Q_MARGIN = 0.05   # |q_halt| and, where halting compares them, |q_halt - q_continue| (bf16-safe)
LOGIT_GAP = 1e-4  # top-1 minus top-2 logit of every position
PROBE_EPS = 2.0 ** -23  # relative perturbation of the weights for the evaluation's sensitivity probe
PROBE_SEED_OFFSET = 3000017
PROBE_SAFETY = 5.0   # the probe's logits change must stay within 1/5 of test_golden.c's allowance
TEST_TOL_OUT = 3e-5  # test_golden.c's TOL_OUT (its evaluation steps allow TOL_OUT * 4^(i-1))
# test_golden.c also runs in bf16 (TRM_TEST_BF16=1: ctest's test_golden_cpu_bf16 on AVX512-BF16
# CPUs, and on GPUs) against the same float32 files, at tolerances 0.25 (outputs) and 0.3 (gradients,
# weights) with every halting decision and step count equal (B = 4: 85% agreement means all). A
# seed is kept only if the reference itself, run in bfloat16 and continued from the float32 state
# at every training step as the test does, stays within these (about 2/3 of the test's):
BF16_OUT = 0.16
BF16_GRAD = 0.2

TOL_OUT, TOL_GRAD = 1e-5, 1e-4
EXACT_METRICS = ("count", "exact_accuracy", "q_halt_accuracy", "steps")
BATCH_KEYS = ("inputs", "labels", "puzzle_identifiers")
TRAIN_RETURN_KEYS = ["logits", "q_halt_logits", "q_continue_logits", "target_q_continue"]
EVAL_RETURN_KEYS = ["logits", "q_halt_logits", "preds"]

# ------------------------------------------------------------------------------------------------
# The variants: the settings of the original files, with the hidden size as a parameter.

ARCH_NAMES = {
    "trm": "recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1",
    "hrm": "recursive_reasoning.hrm@HierarchicalReasoningModel_ACTV1",
    "transformers_baseline": "recursive_reasoning.transformers_baseline@Model_ACTV2",
    "trm_hier6": "recursive_reasoning.trm_hier6@TinyRecursiveReasoningModel_ACTV1",
    "trm_singlez": "recursive_reasoning.trm_singlez@TinyRecursiveReasoningModel_ACTV1",
}
VARIANTS = ["att_rope", "att_learned", "mlp_t", "noemb_rope", "archs/hrm_rope",
            "archs/transformers_baseline_rope", "archs/trm_hier6_rope", "archs/trm_singlez_rope"]
# (arch, settings replaced in the common model dict, keys removed from it)
VARIANT_MODEL = {
    "att_rope": ("trm", {}, ()),
    "att_learned": ("trm", {"pos_encodings": "learned"}, ()),
    "mlp_t": ("trm", {"pos_encodings": "none", "mlp_t": True}, ()),
    "noemb_rope": ("trm", {"puzzle_emb_ndim": 0, "puzzle_emb_len": 0}, ()),
    "archs/hrm_rope": ("hrm", {"H_layers": 2}, ("puzzle_emb_len",)),  # HRM's config has none
    "archs/transformers_baseline_rope": ("transformers_baseline", {"H_cycles": 1, "L_cycles": 1, "H_layers": 3}, ()),
    "archs/trm_hier6_rope": ("trm_hier6", {"L_cycles": 3}, ()),
    "archs/trm_singlez_rope": ("trm_singlez", {}, ()),
}


def variant_config(variant, hidden_size, num_heads, torch_version, seed=None):
    """The .json of a variant (key order as in the original files; "seed" only in new ones)."""
    arch, over, drop = VARIANT_MODEL[variant]
    model = {
        "seq_len": 16, "vocab_size": 6, "num_puzzle_identifiers": 5, "batch_size": 4,
        "H_cycles": 2, "L_cycles": 2, "H_layers": 0, "L_layers": 2,
        "hidden_size": hidden_size, "expansion": 4, "num_heads": num_heads,
        "puzzle_emb_ndim": hidden_size, "puzzle_emb_len": 2, "pos_encodings": "rope", "mlp_t": False,
        "halt_max_steps": 3, "halt_exploration_prob": 0.0, "no_ACT_continue": True,
        "forward_dtype": "float32", "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    }
    for k, v in over.items():
        model[k] = v
    for k in drop:
        del model[k]
    cj = {"variant": os.path.basename(variant)}
    if variant.startswith("archs/"):
        cj["arch"] = arch
        cj["arch_name"] = ARCH_NAMES[arch]
    cj["model"] = model
    cj["loss_type"] = "stablemax_cross_entropy"
    cj["hyperparams"] = {"lr": 0.003, "beta1": 0.9, "beta2": 0.95, "weight_decay": 0.1,
                         "puzzle_emb_lr": 0.01, "puzzle_emb_weight_decay": 0.1}
    cj["train_steps"] = TRAIN_STEPS
    cj["eval_steps"] = EVAL_STEPS
    if seed is not None:
        cj["seed"] = seed
    cj["torch_version"] = torch_version
    return cj


def json_text(cj):
    return json.dumps(cj, indent=1)  # as the original files: indent 1, no final newline


def pick_variants(names):
    if not names:
        return list(VARIANTS)
    out = []
    for n in names:
        n = n[:-len(".safetensors")] if n.endswith(".safetensors") else n
        hits = [v for v in VARIANTS if v == n or os.path.basename(v) == n]
        if not hits:
            raise SystemExit("unknown variant %r (known: %s)" % (n, ", ".join(VARIANTS)))
        out += [h for h in hits if h not in out]
    return out


# ------------------------------------------------------------------------------------------------
# The layout test_golden.c reads, derived from the config alone (no torch): name -> (dtype, shape).

def ceil256(x):
    return -(x // -256) * 256


def expected_layout(cj):
    m = cj["model"]
    arch = cj.get("arch", "trm")
    B, S, V, D = m["batch_size"], m["seq_len"], m["vocab_size"], m["hidden_size"]
    nd, NP = m["puzzle_emb_ndim"], m["num_puzzle_identifiers"]
    if arch in ("hrm", "transformers_baseline") or m.get("puzzle_emb_len", 0) == 0:
        P = -(nd // -D)
    else:
        P = m["puzzle_emb_len"]
    T = S + P
    inter = ceil256(round(m["expansion"] * D * 2 / 3))
    params = {}

    def block(prefix, mlp_t):
        if mlp_t:
            it = ceil256(round(m["expansion"] * T * 2 / 3))
            params[prefix + "mlp_t.gate_up_proj.weight"] = [2 * it, T]
            params[prefix + "mlp_t.down_proj.weight"] = [T, it]
        else:
            params[prefix + "self_attn.qkv_proj.weight"] = [3 * D, D]
            params[prefix + "self_attn.o_proj.weight"] = [D, D]
        params[prefix + "mlp.gate_up_proj.weight"] = [2 * inter, D]
        params[prefix + "mlp.down_proj.weight"] = [D, inter]

    levels = {"trm": [("L", m["L_layers"])], "trm_singlez": [("L", m["L_layers"])],
              "trm_hier6": [("L", m["L_layers"])], "hrm": [("H", m["H_layers"]), ("L", m["L_layers"])],
              "transformers_baseline": [("H", m["H_layers"])]}[arch]
    for level, n in levels:
        for i in range(n):
            block("inner.%s_level.layers.%d." % (level, i), bool(m.get("mlp_t")) and arch != "transformers_baseline")
    params["inner.embed_tokens.embedding_weight"] = [V, D]
    if m["pos_encodings"] == "learned":
        params["inner.embed_pos.embedding_weight"] = [T, D]
    params["inner.lm_head.weight"] = [V, D]
    params["inner.q_head.weight"] = [2, D]
    params["inner.q_head.bias"] = [2]
    inits = {"trm": ["H", "L"], "hrm": ["H", "L"], "trm_singlez": ["L"], "transformers_baseline": ["H"],
             "trm_hier6": ["H"] + ["L%d" % i for i in range(1, 7)]}[arch]
    states = {"trm": ["z_H", "z_L"], "hrm": ["z_H", "z_L"], "trm_singlez": ["z_L"], "transformers_baseline": ["z_H"],
              "trm_hier6": ["z_H"] + ["z_L%d" % i for i in range(1, 7)]}[arch]
    metrics = ["count", "accuracy", "exact_accuracy", "q_halt_accuracy", "steps", "lm_loss", "q_halt_loss"]
    t = {}
    for k, s in params.items():
        t["init/" + k] = ("F32", s)
    for k in inits:
        t["init/inner.%s_init" % k] = ("F32", [D])
    if nd:
        t["init/inner.puzzle_emb.weights"] = ("F32", [NP, nd])
    for step in range(1, cj["train_steps"] + 1):
        p = "step%d/" % step
        t[p + "batch/inputs"] = ("I32", [B, S])
        t[p + "batch/labels"] = ("I32", [B, S])
        t[p + "batch/puzzle_identifiers"] = ("I32", [B])
        t[p + "out/logits"] = ("F32", [B, S, V])
        t[p + "out/q_halt_logits"] = ("F32", [B])
        t[p + "out/q_continue_logits"] = ("F32", [B])
        if arch == "hrm":
            t[p + "out/target_q_continue"] = ("F32", [B])
        for z in states:
            t[p + "out/" + z] = ("F32", [B, T, D])
        t[p + "out/steps"] = ("I32", [B])
        t[p + "out/halted"] = ("BOOL", [B])
        t[p + "loss"] = ("F64", [1])
        for k in metrics + (["q_continue_loss"] if arch == "hrm" else []):
            t[p + "metric/" + k] = ("F64", [1])
        for k, s in params.items():
            t[p + "grad/" + k] = ("F32", s)
            t[p + "after/" + k] = ("F32", s)
        if nd:
            t[p + "grad/inner.puzzle_emb.local_weights"] = ("F32", [B, nd])
            t[p + "after/inner.puzzle_emb.weights"] = ("F32", [NP, nd])
    t["eval/batch/inputs"] = ("I32", [B, S])
    t["eval/batch/labels"] = ("I32", [B, S])
    t["eval/batch/puzzle_identifiers"] = ("I32", [B])
    for step in range(1, cj["eval_steps"] + 1):
        p = "eval/step%d/" % step
        t[p + "out/logits"] = ("F32", [B, S, V])
        t[p + "out/q_halt_logits"] = ("F32", [B])
        t[p + "out/preds"] = ("I64", [B, S])
        t[p + "loss"] = ("F64", [1])
        for k in metrics:
            t[p + "metric/" + k] = ("F64", [1])
    return t


# ------------------------------------------------------------------------------------------------
# safetensors without the package (used where it is not importable, and by --selftest). The
# layout is the package's: tensors sorted by dtype, descending in its enum order, then by name;
# compact JSON header in that order, padded with spaces to a multiple of 8; no __metadata__.

ST_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4,
           "F32": 4, "F64": 8, "I64": 8, "U64": 8}
ST_RANK = {d: i for i, d in enumerate(
    ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"])}


def st_read_raw(path):
    """name -> (dtype, shape, bytes), in the file's order; and the metadata (or None)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = info["data_offsets"]
        count = 1
        for s in info["shape"]:
            count *= s
        if b - a != count * ST_SIZE[info["dtype"]] or base + b > len(data):
            raise ValueError("%s: tensor %s has a bad size or offsets" % (path, name))
        out[name] = (info["dtype"], list(info["shape"]), data[base + a:base + b])
    return out, meta


def st_serialize_raw(entries):
    """entries: name -> (dtype, shape, bytes). Returns the file's bytes."""
    names = sorted(entries, key=lambda nm: (-ST_RANK[entries[nm][0]], nm))
    header, blobs, off = {}, [], 0
    for nm in names:
        dt, shape, raw = entries[nm]
        header[nm] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


# ------------------------------------------------------------------------------------------------
# The reference, imported from its checkout.

def _stand_in_missing_modules():
    """pydantic (the configs only set attributes) and einops (rearrange = a permutation), where
    they are not installed: the same stand-in for pydantic as shared/anchors/ref_train.py."""
    try:
        import pydantic  # noqa: F401
    except ImportError:
        m = types.ModuleType("pydantic")

        class BaseModel:
            def __init__(self, **kw):
                for k, v in type(self).__dict__.items():
                    if not k.startswith("_") and not callable(v):
                        setattr(self, k, v)
                for k, v in kw.items():
                    setattr(self, k, v)

            def model_dump(self):
                return dict(self.__dict__)

        m.BaseModel = BaseModel
        sys.modules["pydantic"] = m
    try:
        import einops  # noqa: F401
    except ImportError:
        m = types.ModuleType("einops")

        def rearrange(tensor, pattern):
            lhs, rhs = [side.split() for side in pattern.split("->")]
            if sorted(lhs) != sorted(rhs) or len(lhs) != tensor.dim():
                raise NotImplementedError("einops stand-in: only permutations, not %r" % pattern)
            return tensor.permute(*[lhs.index(a) for a in rhs])

        m.rearrange = rearrange
        sys.modules["einops"] = m


def _adam_atan2_class(torch):
    """AdamATan2, copied from shared/anchors/ref_bench_optim.py (the project's pure-PyTorch
    transcription of the adam_atan2 package the reference's pretrain.py uses, a = b = 1):
    p <- p*(1 - lr*wd); m <- lerp(m, g, 1-b1); v <- b2*v + (1-b2)*g*g;
    p <- p - lr*atan2(m/(1-b1^t), sqrt(v)/sqrt(1-b2^t))."""

    class AdamATan2(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1):
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                ps = [p for p in g["params"] if p.grad is not None]
                if not ps:
                    continue
                grads = [p.grad for p in ps]
                st = [self.state[p] for p in ps]
                for s, p in zip(st, ps):
                    if not s:
                        s["step"] = 0
                        s["m"] = torch.zeros_like(p)
                        s["v"] = torch.zeros_like(p)
                    s["step"] += 1
                b1, b2 = g["betas"]
                lr = g["lr"]
                step = st[0]["step"]
                ms = [s["m"] for s in st]
                vs = [s["v"] for s in st]
                torch._foreach_mul_(ps, 1 - lr * g["weight_decay"])
                torch._foreach_lerp_(ms, grads, 1 - b1)
                torch._foreach_mul_(vs, b2)
                torch._foreach_addcmul_(vs, grads, grads, 1 - b2)
                bc1 = 1 - b1 ** step
                bc2s = math.sqrt(1 - b2 ** step)
                for p, m_, v_ in zip(ps, ms, vs):
                    p.sub_(lr * torch.atan2(m_ / bc1, v_.sqrt() / bc2s))

    return AdamATan2


def load_reference(ref_dir):
    ref_dir = os.path.abspath(ref_dir)
    if not os.path.isfile(os.path.join(ref_dir, "models", "recursive_reasoning", "trm.py")):
        raise SystemExit("%s: not a checkout of the reference (models/recursive_reasoning/trm.py missing): "
                         "github SamsungSAILMontreal/TinyRecursiveModels at %s, see --help" % (ref_dir, REF_COMMIT))
    sys.path.insert(0, ref_dir)
    _stand_in_missing_modules()
    import torch
    from models.losses import ACTLossHead
    from models.sparse_embedding import CastedSparseEmbeddingSignSGD_Distributed
    from utils.functions import load_model_class
    return types.SimpleNamespace(torch=torch, ACTLossHead=ACTLossHead, SparseSignSGD=CastedSparseEmbeddingSignSGD_Distributed,
                                 load_model_class=load_model_class, AdamATan2=_adam_atan2_class(torch), ref_dir=ref_dir)


def build_model(R, cj):
    """ACTLossHead(model) as the reference's pretrain.py builds it (on the CPU, float32)."""
    arch = cj.get("arch", "trm")
    cls = R.load_model_class(cj.get("arch_name", ARCH_NAMES[arch]))
    return R.ACTLossHead(cls(dict(cj["model"])), loss_type=cj["loss_type"])


def _f64(x):
    return float(x.item()) if hasattr(x, "item") else float(x)


def run_reference(R, cj, init, batches, eval_batch, force=None):
    """Runs the reference: loads `init` (state-dict name -> tensor), trains one ACT step per batch
    (pretrain.py's train_batch with global batch = batch_size on one rank and constant learning
    rates), then evaluates `eval_steps` ACT steps of eval_batch from a fresh carry in eval mode
    (pretrain.py's evaluate). Returns golden name -> tensor. With `force` (the tensors of a golden
    file), each training step continues from the file's after/ weights and carry instead of its
    own, as test_golden.c does."""
    torch = R.torch
    m, hp = cj["model"], cj["hyperparams"]
    B = int(m["batch_size"])
    torch.manual_seed(0)  # the exploration draws (probability 0) take from the global generator
    model = build_model(R, cj)
    act = model.model
    act.load_state_dict(init, strict=True)
    has_pe = int(m["puzzle_emb_ndim"]) > 0
    # pretrain.py's create_model: the sparse sign-SGD over the puzzle embedding's buffers (weights,
    # local_weights, local_ids) first, then AdamATan2 over every parameter
    optimizers = []
    if has_pe:
        optimizers.append((R.SparseSignSGD(act.puzzle_emb.buffers(), world_size=1, lr=0,
                                           weight_decay=hp["puzzle_emb_weight_decay"]), hp["puzzle_emb_lr"]))
    optimizers.append((R.AdamATan2(model.parameters(), lr=0, betas=(hp["beta1"], hp["beta2"]),
                                   weight_decay=hp["weight_decay"]), hp["lr"]))
    named = list(act.named_parameters())

    res = {}
    for k, v in act.state_dict().items():
        res["init/" + k] = v.detach().clone()

    model.train()
    carry = None
    for t, batch in enumerate(batches, start=1):
        pre = "step%d/" % t
        for k in BATCH_KEYS:
            res[pre + "batch/" + k] = batch[k].clone()
        if carry is None:
            carry = model.initial_carry(batch)  # all halted: step 1 starts every row from batch 1
        carry, loss, metrics, outs, _ = model(carry=carry, batch=batch, return_keys=TRAIN_RETURN_KEYS)
        ((1 / B) * loss).backward()

        res[pre + "out/logits"] = outs["logits"].detach().float().clone()
        res[pre + "out/q_halt_logits"] = outs["q_halt_logits"].detach().float().clone()
        res[pre + "out/q_continue_logits"] = outs["q_continue_logits"].detach().float().clone()
        if "target_q_continue" in outs:
            res[pre + "out/target_q_continue"] = outs["target_q_continue"].detach().float().clone()
        for f in dataclasses.fields(carry.inner_carry):
            res[pre + "out/" + f.name] = getattr(carry.inner_carry, f.name).detach().float().clone()
        res[pre + "out/steps"] = carry.steps.detach().to(torch.int32).clone()
        res[pre + "out/halted"] = carry.halted.detach().to(torch.bool).clone()
        res[pre + "loss"] = torch.tensor([_f64(loss.detach())], dtype=torch.float64)
        for k, v in metrics.items():
            res[pre + "metric/" + k] = torch.tensor([_f64(v)], dtype=torch.float64)

        for name, p in named:
            if p.grad is None:
                print("warning: %s%s has no gradient; written as zeros" % (pre, name), file=sys.stderr)
                res[pre + "grad/" + name] = torch.zeros_like(p).detach()
            else:
                res[pre + "grad/" + name] = p.grad.detach().clone()
        if has_pe:
            g = act.puzzle_emb.local_weights.grad
            if g is None:
                raise RuntimeError("%s: the puzzle embedding's local_weights got no gradient" % pre)
            res[pre + "grad/inner.puzzle_emb.local_weights"] = g.detach().clone()

        for opt, lr in optimizers:
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            opt.zero_grad()

        for name, p in named:
            res[pre + "after/" + name] = p.detach().clone()
        if has_pe:
            res[pre + "after/inner.puzzle_emb.weights"] = act.puzzle_emb.weights.detach().clone()

        if force is not None:  # continue from the file's state (the Adam moments stay ours)
            with torch.no_grad():
                for name, p in named:
                    p.copy_(force[pre + "after/" + name])
                if has_pe:
                    act.puzzle_emb.weights.copy_(force[pre + "after/inner.puzzle_emb.weights"])
            for f in dataclasses.fields(carry.inner_carry):
                z = getattr(carry.inner_carry, f.name)
                setattr(carry.inner_carry, f.name, force[pre + "out/" + f.name].to(z.dtype).clone())
            carry.steps = force[pre + "out/steps"].clone()
            carry.halted = force[pre + "out/halted"].clone()

    res.update(run_eval(R, model, cj, eval_batch))
    return {k: v.contiguous() for k, v in res.items()}


def run_eval(R, model, cj, eval_batch):
    """pretrain.py's evaluate on one batch: a fresh carry in eval mode, under inference_mode, every
    row runs halt_max_steps ACT steps; the first `eval_steps` are recorded."""
    torch = R.torch
    model.eval()
    ev = {}
    with torch.inference_mode():
        carry = model.initial_carry(eval_batch)
        for i in range(1, int(cj["eval_steps"]) + 1):
            pre = "eval/step%d/" % i
            carry, loss, metrics, outs, _ = model(carry=carry, batch=eval_batch, return_keys=EVAL_RETURN_KEYS)
            ev[pre + "out/logits"] = outs["logits"].float()
            ev[pre + "out/q_halt_logits"] = outs["q_halt_logits"].float()
            ev[pre + "out/preds"] = outs["preds"].to(torch.int64)
            ev[pre + "loss"] = _f64(loss)
            for k, v in metrics.items():
                ev[pre + "metric/" + k] = _f64(v)
    res = {}
    for k, v in ev.items():  # clones outside inference mode are ordinary tensors
        res[k] = torch.tensor([v], dtype=torch.float64) if isinstance(v, float) else v.clone().contiguous()
    for k in BATCH_KEYS:
        res["eval/batch/" + k] = eval_batch[k].clone()
    return res


# ------------------------------------------------------------------------------------------------
# Tensors <-> files

def _st_dtype(torch, t):
    return {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}[t.dtype]


def read_tensors(R, path):
    """name -> torch tensor, with the safetensors package if importable, else the reader above."""
    torch = R.torch
    try:
        from safetensors.torch import load_file
    except ImportError:
        load_file = None
    if load_file is not None:
        return dict(load_file(path))
    raw, _ = st_read_raw(path)
    td = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}
    out = {}
    for name, (dt, shape, data) in raw.items():
        if dt == "BOOL":
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.bool)
        else:
            t = torch.frombuffer(bytearray(data), dtype=td[dt])
        out[name] = t.reshape(shape).clone()
    return out


def write_tensors(R, tensors, path):
    """With the safetensors package if importable, else the writer above (the same bytes)."""
    tmp = path + ".tmp"
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, tmp)
    else:
        entries = {}
        for k, v in tensors.items():
            v = v.detach().cpu().contiguous()
            entries[k] = (_st_dtype(R.torch, v), list(v.shape), v.numpy().tobytes())
        with open(tmp, "wb") as f:
            f.write(st_serialize_raw(entries))
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# --check

def compare(R, want, got, verbose=True):
    """Every tensor of `want` (a golden file) against `got`. Returns (failures, summary dict)."""
    torch = R.torch
    fails = []
    worst = {"out": (0.0, ""), "grad": (0.0, "")}
    for name, w in want.items():
        g = got.get(name)
        kind = "grad" if ("/grad/" in name or "/after/" in name) else "out"
        if g is None:
            fails.append(name)
            print("%-72s MISSING (not computed)" % name)
            continue
        if g.dtype != w.dtype or tuple(g.shape) != tuple(w.shape):
            fails.append(name)
            print("%-72s FAIL dtype/shape %s%s vs file %s%s" % (name, g.dtype, tuple(g.shape), w.dtype, tuple(w.shape)))
            continue
        if w.is_floating_point():
            a, b = g.double(), w.double()
            maxabs = (a - b).abs().max().item() if a.numel() else 0.0
            den = max(b.abs().max().item() if b.numel() else 0.0, 1e-30)
            rel = maxabs / den
            exact = any(name.endswith("/metric/" + k) for k in EXACT_METRICS)
            tol = 0.0 if exact else (TOL_GRAD if kind == "grad" else TOL_OUT)
            finite_same = bool((torch.isfinite(a) == torch.isfinite(b)).all())
            ok = finite_same and not math.isnan(rel) and (maxabs == 0.0 if exact else rel <= tol)
            if not math.isnan(rel) and rel > worst[kind][0]:
                worst[kind] = (rel, name)
            if verbose or not ok:
                print("%-72s %-4s %-14s maxabs %.3e rel %.3e %s %s" % (
                    name, _st_dtype(torch, w), list(w.shape), maxabs, rel,
                    "(exact)" if exact else "(tol %.0e)" % tol, "ok" if ok else "FAIL"))
        else:
            ndiff = int((g != w).sum().item())
            ok = ndiff == 0
            if verbose or not ok:
                print("%-72s %-4s %-14s %s" % (name, _st_dtype(torch, w), list(w.shape),
                                                "equal ok" if ok else "FAIL: %d of %d differ" % (ndiff, w.numel())))
        if not ok:
            fails.append(name)
    extra = sorted(set(got) - set(want))
    for name in extra:
        fails.append(name)
        print("%-72s EXTRA (computed, not in the file)" % name)
    return fails, worst


def check_file(R, path, teacher_force=False, verbose=True):
    jpath = path[:-len(".safetensors")] + ".json" if path.endswith(".safetensors") else path + ".json"
    with open(jpath) as f:
        cj = json.load(f)
    want = read_tensors(R, path)
    init = {k[len("init/"):]: v for k, v in want.items() if k.startswith("init/")}
    batches = [{k: want["step%d/batch/%s" % (t, k)] for k in BATCH_KEYS} for t in range(1, int(cj["train_steps"]) + 1)]
    eval_batch = {k: want["eval/batch/" + k] for k in BATCH_KEYS}
    got = run_reference(R, cj, init, batches, eval_batch, force=want if teacher_force else None)
    print("== %s (%s, torch %s here, %s in the file%s)" % (path, cj.get("arch", "trm"), R.torch.__version__,
                                                         cj.get("torch_version"), ", teacher-forced" if teacher_force else ""))
    fails, worst = compare(R, want, got, verbose=verbose)
    print("%s: %d tensors, %d failing; worst relative error: outputs %.3e (%s), grad/after %.3e (%s)" % (
        path, len(want), len(fails), worst["out"][0], worst["out"][1] or "-", worst["grad"][0], worst["grad"][1] or "-"))
    return not fails


# ------------------------------------------------------------------------------------------------
# generate mode

def make_init(R, cj, seed):
    """The reference's own initialisation under torch.manual_seed(seed), then q_head and the puzzle
    rows re-randomised so that halting happens mid-run."""
    torch = R.torch
    torch.manual_seed(seed + INIT_SEED_OFFSET)
    model = build_model(R, cj)
    sd = {k: v.detach().clone() for k, v in model.model.state_dict().items()}
    g = torch.Generator().manual_seed(seed + RERAND_SEED_OFFSET)
    D = int(cj["model"]["hidden_size"])
    sd["inner.q_head.weight"] = torch.randn(2, D, generator=g, dtype=torch.float32) * Q_WEIGHT_STD
    sd["inner.q_head.bias"] = torch.tensor(Q_BIAS, dtype=torch.float32)
    if "inner.puzzle_emb.weights" in sd:
        shape = tuple(sd["inner.puzzle_emb.weights"].shape)
        sd["inner.puzzle_emb.weights"] = torch.randn(*shape, generator=g, dtype=torch.float32) * PUZZLE_STD
    return sd


def make_batches(R, cj, seed):
    """Random batches like the original files': tokens 1..V-1, labels 1..V-1 with the last
    IGNORED_TAIL positions IGNORE, puzzle ids 1..num_puzzle_identifiers-1 (0 is the blank id)."""
    torch = R.torch
    m = cj["model"]
    B, S, V, N = int(m["batch_size"]), int(m["seq_len"]), int(m["vocab_size"]), int(m["num_puzzle_identifiers"])
    g = torch.Generator().manual_seed(seed + BATCH_SEED_OFFSET)

    def one():
        inputs = torch.randint(1, V, (B, S), generator=g, dtype=torch.int32)
        labels = torch.randint(1, V, (B, S), generator=g, dtype=torch.int32)
        labels[:, S - IGNORED_TAIL:] = IGNORE_LABEL_ID
        pid = torch.randint(1, N, (B,), generator=g, dtype=torch.int32)
        return {"inputs": inputs, "labels": labels, "puzzle_identifiers": pid}

    train = [one() for _ in range(int(cj["train_steps"]))]
    return train, one()


def acceptance_problems(R, cj, res, seed, check_bf16=True):
    """Why this seed's run does not exercise halting well enough or would make a fragile oracle
    (an empty list: it is kept)."""
    torch = R.torch
    m = cj["model"]
    T, E, hms, B = int(cj["train_steps"]), int(cj["eval_steps"]), int(m["halt_max_steps"]), int(m["batch_size"])
    arch = cj.get("arch", "trm")
    # HRM and the baseline halt on q_halt > q_continue; TRM and its variants on q_halt > 0
    # (no_ACT_continue, true in every variant here)
    compares_q = arch in ("hrm", "transformers_baseline") or not m.get("no_ACT_continue", True)
    halted = [res["step%d/out/halted" % t] for t in range(1, T + 1)]
    steps = [res["step%d/out/steps" % t] for t in range(1, T + 1)]
    problems = []
    if not any(bool(h.any()) for h in halted[:T - 1]):
        problems.append("no sample halts before the last training step")
    if bool(halted[0].all()):
        problems.append("every sample halts at step 1")
    if not any(bool((h & (s < hms)).any()) for h, s in zip(halted, steps)):
        problems.append("no sample halts through its Q head (before halt_max_steps)")
    if int(m["puzzle_emb_ndim"]) > 0 and not any(
            res["step%d/batch/puzzle_identifiers" % t].unique().numel() < B for t in range(1, T + 1)):
        problems.append("no training batch repeats a puzzle id")
    # Margins of the discrete decisions a re-implementation must reproduce exactly (its float32
    # results differ by ~1e-6 relative, its bf16 ones by ~1e-2): a halting decision (before
    # halt_max_steps) and the sign of q_halt where it enters q_halt_accuracy (rows that halted;
    # in evaluation every row from step halt_max_steps on), and the argmax of every position.
    for t in range(1, T + 1):
        pre = "step%d/" % t
        qh, qc = res[pre + "out/q_halt_logits"], res[pre + "out/q_continue_logits"]
        decides = steps[t - 1] < hms
        signal = (qh - qc) if compares_q else qh
        if bool(decides.any()) and signal[decides].abs().min().item() < Q_MARGIN:
            problems.append("%s: a halting decision with margin %.2e < %g" % (pre, signal[decides].abs().min().item(), Q_MARGIN))
        if bool(halted[t - 1].any()) and qh[halted[t - 1]].abs().min().item() < Q_MARGIN:
            problems.append("%s: |q_halt| %.2e < %g on a halted row" % (pre, qh[halted[t - 1]].abs().min().item(), Q_MARGIN))
    for i in range(hms, E + 1):
        qh = res["eval/step%d/out/q_halt_logits" % i]
        if qh.abs().min().item() < Q_MARGIN:
            problems.append("eval/step%d/: |q_halt| %.2e < %g" % (i, qh.abs().min().item(), Q_MARGIN))
    prefixes = ["step%d/" % t for t in range(1, T + 1)] + ["eval/step%d/" % i for i in range(1, E + 1)]
    for pre in prefixes:
        top2 = torch.topk(res[pre + "out/logits"], 2, dim=-1).values
        gap = (top2[..., 0] - top2[..., 1]).min().item()
        if gap < LOGIT_GAP:
            problems.append("%s: a top-2 logit gap of %.2e < %g" % (pre, gap, LOGIT_GAP))
    # the free-running evaluation must not amplify float32 differences towards test_golden.c's
    # allowance (TEST_TOL_OUT * 4^(i-1) at evaluation step i)
    if not problems and check_bf16:
        problems += bf16_problems(R, cj, res)
    if not problems:
        sens = [max(a, b) for a, b in zip(eval_sensitivity(R, cj, res, seed), eval_sensitivity(R, cj, res, seed + 1))]
        for i, r in enumerate(sens, start=1):
            allowed = TEST_TOL_OUT * 4.0 ** (i - 1)
            if r > allowed / PROBE_SAFETY:
                problems.append("eval/step%d/: logits move by %.2e under a 2^-23 weight perturbation (> %.2e, 1/%g of "
                                "test_golden.c's allowance)" % (i, r, allowed / PROBE_SAFETY, PROBE_SAFETY))
    return problems

def eval_sensitivity(R, cj, res, seed):
    """How much the free-running evaluation amplifies float32-level differences: the evaluation is
    re-run from the trained weights with every weight and buffer multiplied by (1 + PROBE_EPS*u),
    u uniform in [-1, 1], and the relative change of each eval step's logits is returned.
    test_golden.c runs the evaluation free (no carry to continue from), allowing 3e-5 * 4^(i-1)."""
    torch = R.torch
    T = int(cj["train_steps"])
    model = build_model(R, cj)
    g = torch.Generator().manual_seed(seed + PROBE_SEED_OFFSET)
    sd = {}
    for k in model.model.state_dict():
        v = res.get("step%d/after/%s" % (T, k), res["init/" + k])
        noise = (2 * torch.rand(tuple(v.shape), generator=g, dtype=torch.float64) - 1) * PROBE_EPS
        sd[k] = (v.double() * (1 + noise)).to(v.dtype)
    model.model.load_state_dict(sd, strict=True)
    ev = run_eval(R, model, cj, {k: res["eval/batch/" + k] for k in BATCH_KEYS})
    out = []
    for i in range(1, int(cj["eval_steps"]) + 1):
        a, b = ev["eval/step%d/out/logits" % i].double(), res["eval/step%d/out/logits" % i].double()
        out.append((a - b).abs().max().item() / max(b.abs().max().item(), 1e-30))
    return out


def bf16_problems(R, cj, res):
    """Runs the reference in bfloat16 (forward_dtype), each training step continued from the float32
    run's weights and carry, and lists where it leaves the margins above: halting or step counts
    that differ, training outputs (logits, q logits, carry) beyond BF16_OUT, gradients beyond
    BF16_GRAD, evaluation logits beyond BF16_OUT * 4^(i-1) (test_golden.c's allowance grows so)."""
    cb = json.loads(json.dumps(cj))
    cb["model"]["forward_dtype"] = "bfloat16"
    init = {k[len("init/"):]: v for k, v in res.items() if k.startswith("init/")}
    T, E = int(cj["train_steps"]), int(cj["eval_steps"])
    batches = [{k: res["step%d/batch/%s" % (t, k)] for k in BATCH_KEYS} for t in range(1, T + 1)]
    eval_batch = {k: res["eval/batch/" + k] for k in BATCH_KEYS}
    rb = run_reference(R, cb, init, batches, eval_batch, force=res)
    problems = []
    for name, want in res.items():
        if name.startswith("init/") or "/batch/" in name or "/metric/" in name or name.endswith("loss") \
                or "/after/" in name or name.endswith("/preds"):
            continue
        got = rb[name]
        if not want.is_floating_point():  # halted, steps
            if not bool((got == want).all()):
                problems.append("bf16: %s differs" % name)
            continue
        a, b = got.double(), want.double()
        r = (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)
        if "/grad/" in name:
            limit = BF16_GRAD
        elif name.startswith("eval/step"):
            limit = BF16_OUT * 4.0 ** (int(name.split("/")[1][len("step"):]) - 1)
        else:
            limit = BF16_OUT
        if not r <= limit:
            problems.append("bf16: %s off by %.3f > %.3f" % (name, r, limit))
    return problems


def layout_of(R, res):
    return {k: (_st_dtype(R.torch, v), list(v.shape)) for k, v in res.items()}


def generate(R, args):
    torch = R.torch
    out_dir = args.out
    ok_all = True
    total = 0
    for variant in pick_variants(args.variants):
        for seed in range(args.seed, args.seed + args.max_tries):
            cj = variant_config(variant, args.hidden_size, args.num_heads, str(torch.__version__), seed)
            init = make_init(R, cj, seed)
            batches, eval_batch = make_batches(R, cj, seed)
            res = run_reference(R, cj, init, batches, eval_batch)
            problems = acceptance_problems(R, cj, res, seed, check_bf16=not args.no_bf16_check)
            if not problems:
                break
            print("%s: seed %d rejected: %s" % (variant, seed, "; ".join(problems)))
        else:
            raise SystemExit("%s: no acceptable seed in [%d, %d)" % (variant, args.seed, args.seed + args.max_tries))
        want_layout, got_layout = expected_layout(cj), layout_of(R, res)
        if want_layout != got_layout:
            for k in sorted(set(want_layout) | set(got_layout)):
                if want_layout.get(k) != got_layout.get(k):
                    print("  layout: %s expected %s, computed %s" % (k, want_layout.get(k), got_layout.get(k)))
            raise SystemExit("%s: the computed tensors are not the layout test_golden.c reads" % variant)
        path = os.path.join(out_dir, variant + ".safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_tensors(R, res, path)
        with open(path[:-len(".safetensors")] + ".json", "w") as f:
            f.write(json_text(cj))
        size = os.path.getsize(path)
        total += size
        halts = " ".join("".join("H" if x else "." for x in res["step%d/out/halted" % t].tolist())
                         for t in range(1, TRAIN_STEPS + 1))
        print("%s: seed %d, %d tensors, %d bytes; halted per step %s" % (path, seed, len(res), size, halts))
        if not args.no_verify:  # read back and re-run from the written file
            ok_all &= check_file(R, path, verbose=False)
    print("total %d bytes (%.2f MB) of .safetensors written" % (total, total / 1e6))
    return ok_all


# ------------------------------------------------------------------------------------------------
# --selftest (no torch)

def selftest(golden_dir, hidden_size, num_heads):
    ok = True
    n = 0
    for variant in VARIANTS:
        base = os.path.join(golden_dir, variant)
        if not os.path.exists(base + ".safetensors"):
            print("%s: absent, skipped" % base)
            continue
        n += 1
        with open(base + ".safetensors", "rb") as f:
            data = f.read()
        raw, meta = st_read_raw(base + ".safetensors")
        same_bytes = meta is None and st_serialize_raw(raw) == data
        with open(base + ".json") as f:
            text = f.read()
        cj = json.loads(text)
        mine = variant_config(variant, cj["model"]["hidden_size"], cj["model"]["num_heads"], cj["torch_version"], cj.get("seed"))
        same_json = json_text(mine) == text
        layout = {k: (v[0], v[1]) for k, v in raw.items()}
        same_layout = expected_layout(cj) == layout
        print("%s: writer %s, json %s, layout %s" % (base, "byte-identical" if same_bytes else "DIFFERS",
                                                    "identical" if same_json else "DIFFERS",
                                                    "as expected" if same_layout else "DIFFERS"))
        ok &= same_bytes and same_json and same_layout
    total = 0
    for variant in VARIANTS:
        lay = expected_layout(variant_config(variant, hidden_size, num_heads, "x"))
        entries = {k: (dt, shape, b"\0" * (ST_SIZE[dt] * math.prod(shape))) for k, (dt, shape) in lay.items()}
        size = len(st_serialize_raw(entries))
        total += size
        print("generate mode, hidden size %d: %-36s %9d bytes" % (hidden_size, variant, size))
    print("generate mode, hidden size %d: all %d files %d bytes (%.2f MB, %.2f MiB)" % (
        hidden_size, len(VARIANTS), total, total / 1e6, total / 2 ** 20))
    print("selftest: %d golden files, %s" % (n, "all OK" if ok and n else "FAILED"))
    return ok and n > 0


# ------------------------------------------------------------------------------------------------

def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default=os.path.join(repo, ".ref"), help="the reference's checkout (default: REPO/.ref)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", metavar="DIR", help="generate: write the variants' files under DIR")
    mode.add_argument("--check", nargs="+", metavar="FILE.safetensors", help="re-run and compare existing files")
    mode.add_argument("--selftest", metavar="DIR", help="no torch: the writer, the variant table and the layout against DIR's files")
    ap.add_argument("--variants", nargs="*", help="generate: these only (att_rope, hrm_rope or archs/hrm_rope, ...)")
    ap.add_argument("--seed", type=int, default=0, help="generate: the first seed tried (default 0)")
    ap.add_argument("--max-tries", type=int, default=500, help="generate: seeds tried per variant (default 500)")
    ap.add_argument("--hidden-size", type=int, default=16, help="generate: hidden size = puzzle_emb_ndim (default 16)")
    ap.add_argument("--num-heads", type=int, default=2, help="generate: attention heads (default 2)")
    ap.add_argument("--no-verify", action="store_true", help="generate: do not re-check the written files")
    ap.add_argument("--no-bf16-check", action="store_true", help="generate: keep seeds without the bfloat16 margins")
    ap.add_argument("--teacher-force", action="store_true", help="check: continue each step from the file's state")
    ap.add_argument("--quiet", action="store_true", help="check: print failing tensors and summaries only")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args()

    if args.selftest:
        return 0 if selftest(args.selftest, args.hidden_size, args.num_heads) else 1
    if args.hidden_size % args.num_heads or (args.hidden_size // args.num_heads) % 2:
        raise SystemExit("--hidden-size / --num-heads must be an even head dimension (RoPE)")
    R = load_reference(args.ref)
    R.torch.set_num_threads(args.threads)
    if args.check:
        ok = True
        for path in args.check:
            ok &= check_file(R, path, teacher_force=args.teacher_force, verbose=not args.quiet)
        print("check: %d file(s), %s" % (len(args.check), "all reproduced" if ok else "DIFFERENCES FOUND"))
        if not ok and not args.teacher_force:
            print("(differences that grow over the steps may be float32 amplification on another torch or "
                  "CPU: --teacher-force checks each step from the file's own state)")
        return 0 if ok else 1
    ok = generate(R, args)
    print("generate: %s" % ("done, every written file re-checked" if ok and not args.no_verify else
                            "done (not re-checked)" if ok else "written, but a re-check FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
