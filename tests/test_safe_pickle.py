"""No pickle runs code (tools/attn/safe_pickle.py): a .pt in torch's zip and legacy formats, a Hugging
Face pytorch_model.bin and a nanoGPT meta.pkl whose pickles call a function are refused by
tools/convert.py in one line naming it, and the function did not run (its marker file is
absent); the calls, constructions and state settings the restricted unpickler narrows are each
refused; and what checkpoints do hold (tensors of every dtype, Parameters, OrderedDicts with
_metadata, numpy scalars and dtypes, bytes, sets) still loads, in both torch formats.
tests/test_convert.py converts real nanoGPT, llama2.c and Hugging Face files through it.

Run from the repository root: /usr/bin/python3 tests/test_safe_pickle.py [-k SUBSTRING]
"""
import collections
import json
import os
import pickle
import subprocess
import tempfile

import numpy as np
import torch

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import safe_pickle  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-safe-pickle-")
PY = "/usr/bin/python3"
CONVERT = os.path.join(ROOT, "tools", "convert.py")
LLAMA2XS = os.path.join(ROOT, "..", "shared", "models", "llama2xs_ckpt.pt")
case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


class Call:
    """Pickles as a call of func(*args): what an attacker's checkpoint holds."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def marker(name):
    path = tmp(name + ".ran")
    if os.path.exists(path):
        os.unlink(path)
    return path


def attacks(name):
    """(global the pickle names, the object, its marker file) for each way a pickle can run code."""
    import subprocess as sp
    out = []
    for qual, func, args in (("posix.system", os.system, lambda m: ("touch %s" % m,)),
                             ("builtins.eval", eval, lambda m: ("open(%r, 'w').close()" % m,)),
                             ("builtins.exec", exec, lambda m: ("open(%r, 'w').close()" % m,)),
                             ("subprocess.Popen", sp.Popen, lambda m: (["touch", m],))):
        m = marker("%s-%s" % (name, qual))
        out.append((qual, Call(func, *args(m)), m))
    return out


def refused_by_convert(args, src, qual, m):
    r = subprocess.run([PY, CONVERT] + args, capture_output=True, text=True)
    want = "convert.py: %s: the pickle asks for %s; refusing to run code from a checkpoint\n" % (src, qual)
    assert r.returncode == 1 and r.stderr == want, "%s: exit %d, stderr %r, wanted %r" % (
        args, r.returncode, r.stderr, want)
    assert r.stdout == ""
    assert not os.path.exists(m), "%s ran: %s exists" % (qual, m)


def nanogpt_like(payload):
    """A checkpoint of nanoGPT's layout with payload nested inside its config."""
    return {"model": collections.OrderedDict(w=torch.zeros(2)), "model_args": {"n_layer": 1},
            "config": {"nested": [{"deeper": payload}]}, "iter_num": 0}


@case
def pt_zip_and_legacy_refused():
    for zipped in (True, False):
        for qual, obj, m in attacks("pt%d" % zipped):
            src = tmp("evil%d.pt" % zipped)
            torch.save(nanogpt_like(obj), src, _use_new_zipfile_serialization=zipped)
            refused_by_convert([src, tmp("o.bin")], src, qual, m)
            assert not os.path.exists(tmp("o.bin"))


@case
def pytorch_model_bin_refused():
    d = tmp("hf_evil")
    os.makedirs(d, exist_ok=True)
    json.dump({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
               "num_attention_heads": 2, "vocab_size": 16, "max_position_embeddings": 32},
              open(os.path.join(d, "config.json"), "w"))
    qual, obj, m = attacks("bin")[0]
    src = os.path.join(d, "pytorch_model.bin")
    torch.save(collections.OrderedDict([("model.embed_tokens.weight", torch.zeros(16, 8)), ("x", obj)]), src)
    refused_by_convert([d, tmp("o.bin")], src, qual, m)


@case
def meta_pkl_refused():
    for qual, obj, m in attacks("meta"):
        meta = tmp("meta.pkl")
        with open(meta, "wb") as f:
            pickle.dump({"vocab_size": 512, "itos": {0: obj}}, f)
        refused_by_convert([LLAMA2XS, tmp("o.bin"), "--tokenizer", meta], meta, qual, m)


def refused(data, needle):
    try:
        safe_pickle.load(__import__("io").BytesIO(data))
    except safe_pickle.Refused as e:
        assert needle in str(e), "%r lacks %r" % (str(e), needle)
        return
    raise AssertionError("loaded: %r" % data)


@case
def narrowed_opcodes_refused():
    """Each opcode that calls something, on something admitted only as a value or not at all."""
    m = marker("opcodes")
    refused(pickle.dumps(Call(os.system, "touch " + m), protocol=0), "posix.system")  # GLOBAL + REDUCE, protocol 0
    refused(b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.", "os.system")  # STACK_GLOBAL
    refused(b"cos\nsystem\n(Vtrue\ntR.", "os.system")
    refused(b"(cos\nsystem\nVtrue\no.", "os.system")  # OBJ
    refused(b"(Vtrue\nios\nsystem\n.", "os.system")  # INST
    refused(b"ctorch\nfloat32\n)R.", "a call of torch.dtype")  # a value admitted, not as a callable
    refused(b"ctorch\nfloat32\n)\x81.", "a call of torch.dtype")  # NEWOBJ on it
    refused(b"c_codecs\nencode\nVx\nVzlib\n\x86R.", "_codecs.encode with ('zlib',)")  # only latin1 bytes
    refused(b"ctorch\nSize\n)R}b.", "the state of torch.Size to be set")  # BUILD on what is not admitted
    refused(b"ctorch._utils\n_rebuild_tensor_v2.mod\n.", "torch._utils._rebuild_tensor_v2.mod")  # a dotted name
    refused(b"cbuiltins\ngetattr\n.", "builtins.getattr")
    assert not os.path.exists(m)


@case
def checkpoint_contents_load():
    """What checkpoints hold loads as torch.load gives it, from both torch formats and plain pickle."""
    sd = collections.OrderedDict((str(dt), torch.arange(6).to(dt).reshape(2, 3))
                                 for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8))
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    obj = {"model": sd, "param": torch.nn.Parameter(torch.ones(2)), "loss": np.float64(1.5),
           "dtype": np.dtype("f4"), "blob": b"\x00\xff", "set": {1, 2}, "size": torch.Size([2, 3]),
           "view": torch.arange(10.0)[2:5], "scalar": torch.tensor(9.0), "c": 1 + 2j}
    for zipped in (True, False):
        path = tmp("good%d.pt" % zipped)
        torch.save(obj, path, _use_new_zipfile_serialization=zipped)
        got = safe_pickle.torch_load(path)
        want = torch.load(path)
        assert got.keys() == want.keys()
        for k in got["model"]:
            assert torch.equal(got["model"][k], want["model"][k]) and got["model"][k].dtype == want["model"][k].dtype
        assert got["model"]._metadata == sd._metadata
        assert isinstance(got["param"], torch.nn.Parameter) and torch.equal(got["param"], obj["param"])
        assert torch.equal(got["view"], obj["view"]) and torch.equal(got["scalar"], obj["scalar"])
        assert [got[k] for k in ("loss", "dtype", "blob", "set", "size", "c")] == \
            [obj[k] for k in ("loss", "dtype", "blob", "set", "size", "c")]
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        meta = {"vocab_size": 3, "itos": {0: "a", 1: "b"}, "loss": np.float32(2.5), "t": (1, None, True)}
        assert safe_pickle.load(__import__("io").BytesIO(pickle.dumps(meta, protocol=proto))) == meta
    ck = safe_pickle.torch_load(LLAMA2XS)  # a real llama2.c checkpoint, optimizer state and all
    assert ck["model_args"]["dim"] == 64 and len(ck["model"]) > 40


if __name__ == "__main__":
    raise SystemExit(case.main(TMP))
