"""interop_ref.py — the reference's side of bench/interop_check.sh, run where torch is (the
device machine), with the reference's models/ folder (SamsungSAILMontreal/TinyRecursiveModels)
in REF_DIR. Nothing here is trm code: the model, loss head and sparse-embedding optimiser are
the reference's own; the evaluation loop is its pretrain.py evaluate() for one process.

  interop_ref.py REF_DIR eval MODEL_JSON DATA_DIR TRM_PREDS.npy [--dtypes] FILE...
      Loads each FILE (trm convert's output: .safetensors via safetensors' load_file, anything
      else via torch.load(weights_only=True)) into the reference model with
      load_state_dict(strict=True) — a torch.compile'd one for _orig_mod. keys, with assign=True
      as pretrain.py's load_checkpoint does —, evaluates the test split, and compares the
      predictions and q_halt logits with TRM_PREDS.npy (+ _q_halt.npy) from `trm generate
      --output`. --dtypes: every tensor's dtype and shape must equal the model's own.
  interop_ref.py REF_DIR train MODEL_JSON DATA_DIR RUN_DIR STEPS
      Trains the reference model STEPS steps (its ACT loss head, AdamATan2 as the adam_atan2
      package computes it, its sparse sign-SGD) and saves as pretrain.py does:
      RUN_DIR/plain/step_N = torch.save(model.state_dict()) without torch.compile,
      RUN_DIR/compiled/step_N with it (_orig_mod. keys), each with all_config.yaml beside it;
      then RUN_DIR/ref_f32_preds.npy (+ _q_halt.npy): the test predictions of those weights
      evaluated in float32.
  interop_ref.py REF_DIR compare REF_PREDS.npy TRM_PREDS.npy LABEL
      Compares two prediction files (and their _q_halt.npy).

MODEL_JSON: the arch keys of the run (hidden_size, num_heads, H_cycles, ...), and "device".
Prints one JSON line per check; exits 1 when a check fails.
"""
import ast, json, math, os, struct, sys, types

REF = sys.argv[1]
sys.path.insert(0, REF)
try:
    import pydantic  # noqa: F401
except ImportError:  # the model only reads attributes (as bench's ref_bench.py does)
    m = types.ModuleType("pydantic")

    class BaseModel:
        def __init__(self, **kw):
            for k, v in type(self).__dict__.items():
                if not k.startswith("_") and not callable(v):
                    setattr(self, k, v)
            for k, v in kw.items():
                setattr(self, k, v)

    m.BaseModel = BaseModel
    sys.modules["pydantic"] = m

import torch
from models.recursive_reasoning.trm import TinyRecursiveReasoningModel_ACTV1
from models.losses import ACTLossHead, IGNORE_LABEL_ID
from models.sparse_embedding import CastedSparseEmbeddingSignSGD_Distributed

FAILED = []


def report(check, ok, **kw):
    print(json.dumps(dict(check=check, ok=bool(ok), **kw)), flush=True)
    if not ok:
        FAILED.append(check)


# ---- .npy without numpy ------------------------------------------------------------------------
NPY_DT = {"<i4": torch.int32, "<i8": torch.int64, "<f4": torch.float32, "|u1": torch.uint8, "<i2": torch.int16,
          "|i1": torch.int8, "|b1": torch.bool}


def npy_read(path):
    raw = open(path, "rb").read()
    assert raw[:6] == b"\x93NUMPY", path
    start = 10 if raw[6] == 1 else 12
    hl = struct.unpack("<H" if raw[6] == 1 else "<I", raw[8:start])[0]
    h = ast.literal_eval(raw[start:start + hl].decode("latin1"))
    assert not h["fortran_order"], path
    dt = NPY_DT[h["descr"]]
    data = bytearray(raw[start + hl:])
    t = torch.frombuffer(data, dtype=dt) if len(data) else torch.empty(0, dtype=dt)
    return t.reshape(h["shape"]).clone()


def npy_write(path, t):
    t = t.contiguous().cpu()
    descr = {torch.int32: "<i4", torch.float32: "<f4", torch.int64: "<i8"}[t.dtype]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(t.shape)))
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(bytes(t.reshape(-1).view(torch.uint8).tolist()) if t.numel() else b"")


# ---- data and model --------------------------------------------------------------------------
def load_split(data_dir, split):
    meta = json.load(open(os.path.join(data_dir, split, "dataset.json")))
    xs, ys, ps = [], [], []
    for s in meta["sets"]:
        base = os.path.join(data_dir, split, s + "__")
        inp, lab = npy_read(base + "inputs.npy").to(torch.int32), npy_read(base + "labels.npy").to(torch.int32)
        pid, pidx = npy_read(base + "puzzle_identifiers.npy"), npy_read(base + "puzzle_indices.npy").to(torch.int64)
        ex_puzzle = torch.searchsorted(pidx, torch.arange(inp.shape[0]), right=True) - 1
        if meta["ignore_label_id"] is not None:
            lab = torch.where(lab == meta["ignore_label_id"], torch.full_like(lab, IGNORE_LABEL_ID), lab)
        xs.append(inp), ys.append(lab), ps.append(pid.to(torch.int32)[ex_puzzle])
    return meta, torch.cat(xs), torch.cat(ys), torch.cat(ps)


def make_model(arch, meta, batch, dev, forward_dtype=None, compiled=False):
    cfg = dict(batch_size=batch, seq_len=meta["seq_len"], vocab_size=meta["vocab_size"],
               num_puzzle_identifiers=meta["num_puzzle_identifiers"], causal=False,
               H_cycles=arch["H_cycles"], L_cycles=arch["L_cycles"], H_layers=0, L_layers=arch["L_layers"],
               hidden_size=arch["hidden_size"], expansion=float(arch["expansion"]), num_heads=arch["num_heads"],
               pos_encodings=arch["pos_encodings"], halt_max_steps=arch["halt_max_steps"],
               halt_exploration_prob=arch["halt_exploration_prob"],
               forward_dtype=forward_dtype or arch["forward_dtype"], mlp_t=arch["mlp_t"],
               puzzle_emb_ndim=arch["puzzle_emb_ndim"], puzzle_emb_len=arch["puzzle_emb_len"],
               no_ACT_continue=True, rms_norm_eps=1e-5, rope_theta=10000.0)
    with torch.device(dev):
        model = ACTLossHead(TinyRecursiveReasoningModel_ACTV1(cfg), loss_type="stablemax_cross_entropy")
        if compiled:  # the wrapper only: nothing is compiled until it is called, and it is not
            model = torch.compile(model)
    return model


@torch.inference_mode()
def evaluate(model, meta, x, y, p, batch, dev):
    """pretrain.py's evaluate() for one process: padded test batches, ACT steps until all halt."""
    mod = getattr(model, "_orig_mod", model)
    mod.eval()
    preds, qh = [], []
    n = x.shape[0]
    for s in range(0, n, batch):
        e = min(n, s + batch)
        pad = batch - (e - s)
        b = {"inputs": torch.cat([x[s:e], torch.full((pad, x.shape[1]), meta["pad_id"], dtype=torch.int32)]),
             "labels": torch.cat([y[s:e], torch.full((pad, y.shape[1]), IGNORE_LABEL_ID, dtype=torch.int32)]),
             "puzzle_identifiers": torch.cat([p[s:e], torch.full((pad,), meta["blank_identifier_id"], dtype=torch.int32)])}
        b = {k: v.to(dev) for k, v in b.items()}
        with torch.device(dev):
            carry = mod.initial_carry(b)
        while True:
            carry, _, _, out, all_finish = mod(carry=carry, batch=b, return_keys={"preds", "q_halt_logits"})
            if all_finish:
                break
        preds.append(out["preds"][:e - s].to(torch.int32).cpu())
        qh.append(out["q_halt_logits"][:e - s].float().cpu())
    return torch.cat(preds), torch.cat(qh)


def compare(label, rp, rq, tp, tq, informational=False):
    if rp.shape != tp.shape:
        report("same predictions: " + label, False, shapes=[list(rp.shape), list(tp.shape)])
        return
    same_tok = (rp == tp).float().mean().item()
    same_seq = (rp == tp).all(-1).float().mean().item()
    dq = (rq - tq).abs().max().item()
    scale = max(1.0, rq.abs().max().item())
    ok = informational or (same_tok >= 0.999 and dq <= 1e-2 * scale)
    report("same predictions: " + label, ok, tokens_equal=round(same_tok, 6), sequences_equal=round(same_seq, 6),
           q_halt_max_abs_diff=dq, n=int(rp.shape[0]), **({"informational": True} if informational else {}))


def load_file(path, dev):
    if path.endswith(".safetensors"):
        try:
            from safetensors.torch import load_file as st_load
            return st_load(path, device=str(dev))
        except ImportError:  # the format is simple enough to read by hand
            raw = open(path, "rb").read()
            hl = struct.unpack("<Q", raw[:8])[0]
            hdr = json.loads(raw[8:8 + hl])
            hdr.pop("__metadata__", None)
            dts = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I32": torch.int32}
            out = {}
            for k, h in hdr.items():
                a, b = h["data_offsets"]
                buf = bytearray(raw[8 + hl + a:8 + hl + b])
                out[k] = torch.frombuffer(buf, dtype=dts[h["dtype"]]).reshape(h["shape"]).to(dev)
            return out
    return torch.load(path, map_location=dev, weights_only=True)


def cmd_eval(args):
    arch, data, trm_preds = json.load(open(args[0])), args[1], args[2]
    check_dtypes = "--dtypes" in args
    files = [a for a in args[3:] if a != "--dtypes"]
    dev = torch.device(arch.get("device", "cuda" if torch.cuda.is_available() else "cpu"))
    meta, x, y, p = load_split(data, "test")
    tp = npy_read(trm_preds)
    tq = npy_read(trm_preds[:-4] + "_q_halt.npy")
    for f in files:
        sd = load_file(f, dev)
        compiled = next(iter(sd)).startswith("_orig_mod.")
        model = make_model(arch, meta, 64, dev, compiled=compiled)
        own = model.state_dict()
        if check_dtypes:
            bad = [k for k in own if k not in sd or sd[k].dtype != own[k].dtype or sd[k].shape != own[k].shape]
            report("dtypes and shapes as the reference holds them: " + os.path.basename(f), not bad and len(sd) == len(own),
                   tensors=len(sd), mismatched=bad[:5])
        try:  # strict=True; pretrain.py's load_checkpoint also assigns (keeps the file's tensors)
            model.load_state_dict(sd, strict=True, assign=compiled)
            report("load_state_dict(strict=True): " + os.path.basename(f), True, keys=len(sd),
                   prefix=next(iter(sd)).split("inner.")[0])
        except RuntimeError as e:
            report("load_state_dict(strict=True): " + os.path.basename(f), False, error=str(e)[:400])
            continue
        rp, rq = evaluate(model, meta, x, y, p, arch.get("eval_batch", 64), dev)
        compare(os.path.basename(f) + " vs trm generate (" + arch["forward_dtype"] + ")", rp, rq, tp, tq,
                arch.get("informational", False))


class AdamATan2(torch.optim.Optimizer):
    """The update of the adam_atan2 package the reference trains with (a = b = 1)."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s["step"], s["m"], s["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                s["step"] += 1
                b1, b2 = g["betas"]
                p.mul_(1 - g["lr"] * g["weight_decay"])
                s["m"].lerp_(p.grad, 1 - b1)
                s["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.sub_(g["lr"] * torch.atan2(s["m"] / (1 - b1 ** s["step"]), s["v"].sqrt() / math.sqrt(1 - b2 ** s["step"])))


def yaml_dump(d, indent=0):
    """yaml.dump of pretrain.py's config.model_dump(): sorted keys, block style."""
    out = []
    for k in sorted(d):
        v, pad = d[k], " " * indent
        if isinstance(v, dict):
            out.append(f"{pad}{k}:")
            out.append(yaml_dump(v, indent + 2))
        elif isinstance(v, list):
            out.append(f"{pad}{k}: []" if not v else f"{pad}{k}:")
            for it in v:
                if isinstance(it, dict):
                    first, *rest = yaml_dump(it, 0).split("\n")
                    out.append(f"{pad}- {first}")
                    out.extend(f"{pad}  {r}" for r in rest)
                else:
                    out.append(f"{pad}- {it}")
        else:
            s = "null" if v is None else "true" if v is True else "false" if v is False else repr(v) if isinstance(v, float) else str(v)
            out.append(f"{pad}{k}: {s}")
    return "\n".join(out)


def cmd_train(args):
    arch, data, run, steps = json.load(open(args[0])), args[1], args[2], int(args[3])
    dev = torch.device(arch.get("device", "cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(0)
    meta, x, y, p = load_split(data, "train")
    B, lr = 64, 1e-3
    model = make_model(arch, meta, B, dev)
    opts = [CastedSparseEmbeddingSignSGD_Distributed(model.model.puzzle_emb.buffers(), world_size=1, lr=lr,
                                                     weight_decay=0.1),
            AdamATan2(model.parameters(), lr=lr, weight_decay=0.1)]
    g = torch.Generator().manual_seed(1)
    model.train()
    carry, losses = None, []
    for step in range(steps):
        idx = torch.randint(0, x.shape[0], (B,), generator=g)
        batch = {"inputs": x[idx].to(dev), "labels": y[idx].to(dev), "puzzle_identifiers": p[idx].to(dev)}
        if carry is None:
            with torch.device(dev):
                carry = model.initial_carry(batch)
        carry, loss, metrics, _, _ = model(carry=carry, batch=batch, return_keys=[])
        ((1 / B) * loss).backward()
        for o in opts:
            o.step()
            o.zero_grad()
        losses.append(metrics["lm_loss"].item() / B)
    report("reference trained", math.isfinite(losses[-1]), steps=steps, first_lm_loss=round(losses[0], 4),
           last_lm_loss=round(sum(losses[-10:]) / len(losses[-10:]), 4))
    config = dict(arch=dict(arch, name="recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1", H_layers=0,
                            expansion=float(arch["expansion"]), no_ACT_continue=True,
                            loss=dict(name="losses@ACTLossHead", loss_type="stablemax_cross_entropy")),
                  data_paths=[data], data_paths_test=[], evaluators=[], global_batch_size=B, epochs=1,
                  eval_interval=None, checkpoint_every_eval=True, lr=lr, lr_min_ratio=1.0, lr_warmup_steps=0,
                  beta1=0.9, beta2=0.95, weight_decay=0.1, puzzle_emb_weight_decay=0.1, puzzle_emb_lr=lr, seed=0,
                  min_eval_interval=0, eval_save_outputs=[], ema=False, ema_rate=0.999, freeze_weights=False,
                  project_name="Interop-ACT-torch", run_name="TinyRecursiveReasoningModel_ACTV1 interop",
                  checkpoint_path=run, load_checkpoint=None)
    config["arch"].pop("device", None)
    config["arch"].pop("eval_batch", None)
    config["arch"].pop("informational", None)
    for kind in ("plain", "compiled"):
        os.makedirs(os.path.join(run, kind), exist_ok=True)
        sd = (torch.compile(model) if kind == "compiled" else model).state_dict()
        torch.save(sd, os.path.join(run, kind, f"step_{steps}"))
        with open(os.path.join(run, kind, "all_config.yaml"), "w") as f:
            f.write(yaml_dump(config) + "\n")
        report(f"saved {kind}", True, path=os.path.join(run, kind, f"step_{steps}"), first_key=next(iter(sd)),
               H_init_dtype=str(sd[next(k for k in sd if k.endswith("H_init"))].dtype))
    test = load_split(data, "test")
    m32 = make_model(arch, meta, 64, dev, forward_dtype="float32")
    m32.load_state_dict(model.state_dict(), strict=True)  # bf16 H_init/L_init copied into float32 buffers
    rp, rq = evaluate(m32, *test, 64, dev)
    npy_write(os.path.join(run, "ref_f32_preds.npy"), rp)
    npy_write(os.path.join(run, "ref_f32_preds_q_halt.npy"), rq)
    exact = ((rp == test[2]) | (test[2] == IGNORE_LABEL_ID)).all(-1).float().mean().item()
    report("reference evaluated in float32", True, exact_accuracy=round(exact, 4), n=int(rp.shape[0]))


def cmd_compare(args):
    rp, tp = npy_read(args[0]), npy_read(args[1])
    rq, tq = npy_read(args[0][:-4] + "_q_halt.npy"), npy_read(args[1][:-4] + "_q_halt.npy")
    compare(args[2], rp, rq, tp, tq)


if __name__ == "__main__":
    {"eval": cmd_eval, "train": cmd_train, "compare": cmd_compare}[sys.argv[2]](sys.argv[3:])
    sys.exit(1 if FAILED else 0)
