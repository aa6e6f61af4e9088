"""Writes torch_like.pt: a file laid out exactly as torch.save writes a state_dict (Python's
own pickler at protocol 2 with torch's persistent ids, memo and OrderedDict _metadata), made
without torch by standing in modules named torch and torch._utils. test_torch_pt.c reads it
and checks every value below. One storage member is deflated, two views share a storage, one
of them strided (a transpose), and a nested dict and a plain integer ride along.

Usage: python3 make_torch_like.py OUT.pt
"""
import collections, io, pickle, struct, sys, types, zipfile

torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")
sys.modules["torch"], sys.modules["torch._utils"] = torch, utils


def _rebuild_tensor_v2(*args):
    raise RuntimeError("never called here")


_rebuild_tensor_v2.__module__ = "torch._utils"
utils._rebuild_tensor_v2 = _rebuild_tensor_v2
for name in ("FloatStorage", "BFloat16Storage", "IntStorage"):
    cls = type(name, (), {"__module__": "torch"})
    setattr(torch, name, cls)


class Storage:
    def __init__(self, cls, key, data, numel):
        self.cls, self.key, self.data, self.numel = cls, key, data, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride)

    def __reduce_ex__(self, proto):
        s, off, size, stride = self.args
        return (_rebuild_tensor_v2, (s, off, size, stride, False, collections.OrderedDict()))


class Saver(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cuda:0", obj.numel)
        return None


f32 = Storage(torch.FloatStorage, "0", struct.pack("<6f", 1, 2, 3, 4, 5, 6), 6)
bf16 = Storage(torch.BFloat16Storage, "1", struct.pack("<4H", 0x3F80, 0x4000, 0xBF80, 0x4040), 4)
i32 = Storage(torch.IntStorage, "2", struct.pack("<3i", -7, 0, 1 << 30), 3)

sd = collections.OrderedDict()
sd["_orig_mod.model.inner.H_init"] = Tensor(bf16, 0, (4,), (1,))
sd["w"] = Tensor(f32, 0, (2, 3), (3, 1))
sd["w_t"] = Tensor(f32, 0, (3, 2), (1, 3))  # a transpose: strided
sd["w_row1"] = Tensor(f32, 3, (3,), (1,))  # an offset view of the same storage
sd["nested"] = {"ids": Tensor(i32, 0, (3,), (1,))}
sd["step"] = 5
sd._metadata = collections.OrderedDict([("", {"version": 1}), ("model", {"version": 1})])

buf = io.BytesIO()
Saver(buf, protocol=2).dump(sd)
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("step_7/data.pkl", buf.getvalue())
    z.writestr("step_7/byteorder", "little")
    z.writestr("step_7/data/0", f32.data, compress_type=zipfile.ZIP_DEFLATED)
    z.writestr("step_7/data/1", bf16.data)
    z.writestr("step_7/data/2", i32.data)
    z.writestr("step_7/version", "3\n")
