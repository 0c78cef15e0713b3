"""Reading pickles (PyTorch .pt and pytorch_model.bin, nanoGPT's meta.pkl) without running code from them.

A pickle is a program: its GLOBAL opcodes import any name and its REDUCE opcodes call it, so
pickle.load on a downloaded checkpoint runs whatever its author chose. This unpickler admits only
the names those formats need (ADMITTED: tensors and their storages, OrderedDict, torch.Size, sets,
torch and numpy dtypes, numpy scalars) and calls, constructs or sets the state of nothing else;
anything else raises Refused naming it, before it runs. There is no way to switch it off.

    safe_pickle.torch_load(path)   # a .pt or pytorch_model.bin, tensors on the CPU
    safe_pickle.load(f)            # any other pickle

torch.load(pickle_module=...) cannot be trusted with this: Debian's torch 1.13 ignores the
argument and unpickles with pickle itself (serialization.py sets pickle_module = pickle), so
torch_load calls the two readers torch.load dispatches to, which honour it. They subclass
Unpickler (turning storage names into storage types themselves, then asking this find_class for
the rest) and use load() for a legacy (non-zip) file's header pickles. Unpickler is the
pure-Python one, whose opcode table can be narrowed: the pickles are small, the tensor data
lying beside them.
"""
import _codecs
import _compat_pickle
import collections
import importlib
import pickle
import sys

# module -> the names in it a pickle may ask for; it may call or construct each but NOT_CALLABLE.
ADMITTED = {
    "collections": ("OrderedDict",),
    "builtins": ("set", "frozenset", "complex"),
    "_codecs": ("encode",),  # protocol 2 stores bytes as encode(text, "latin1"); checked below
    "torch": ("Size", "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
              "bool", "complex64", "complex128"),
    "torch._utils": ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_parameter", "_rebuild_parameter_with_state"),
    "numpy": ("dtype",),
    "numpy.core.multiarray": ("scalar",),
    "numpy._core.multiarray": ("scalar",),  # numpy 2's name for it
}
NOT_CALLABLE = {("torch", n) for n in ADMITTED["torch"] if n != "Size"}  # dtypes are values


class Refused(pickle.UnpicklingError):
    """The pickle asked for something not admitted; str() is the one-line reason."""

    def __init__(self, what):
        super().__init__("the pickle asks for %s; refusing to run code from a checkpoint" % what)


def _name(obj):
    """module.name of a function or class, else of the object's type."""
    o = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return "%s.%s" % (getattr(o, "__module__", "?"), getattr(o, "__qualname__", getattr(o, "__name__", "?")))


class Unpickler(pickle._Unpickler):
    """pickle's Unpickler with find_class limited to ADMITTED and every call checked."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.callables = {}  # id -> object, for the admitted callables this pickle imported

    def find_class(self, module, name):
        if self.proto < 3 and self.fix_imports:  # Python 2's names, as pickle.Unpickler maps them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if name not in ADMITTED.get(module, ()):
            raise Refused("%s.%s" % (module, name))
        obj = getattr(importlib.import_module(module), name)
        if (module, name) not in NOT_CALLABLE:
            self.callables[id(obj)] = obj
        return obj

    def checked(self, func, args=()):
        """func, if this pickle may call it with args (a tuple)."""
        if self.callables.get(id(func)) is not func:
            raise Refused("a call of %s" % _name(func))
        if func is _codecs.encode and (len(args) != 2 or args[1] != "latin1"):  # a codec may be anything
            raise Refused("_codecs.encode with %r" % (args[1:],))
        return func

    # The opcodes that call something: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST, and BUILD (which
    # calls __setstate__ or fills __dict__).
    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        self.stack[-1] = self.checked(func, args)(*args)

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self.checked(cls, args).__new__(cls, *args))

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self.checked(cls, args).__new__(cls, *args, **kwargs))

    def _instantiate(self, klass, args):
        super()._instantiate(self.checked(klass, tuple(args)), args)

    def load_build(self):
        if not _buildable(self.stack[-2], self.stack[-1]):
            raise Refused("the state of %s to be set" % _name(self.stack[-2]))
        super().load_build()

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build


def _buildable(inst, state):
    """Whether BUILD may set inst's state: an OrderedDict's attributes (a state dict's _metadata)
    or a numpy dtype's own state tuple."""
    if type(inst) is collections.OrderedDict:
        return isinstance(state, dict)
    if "numpy" in type(inst).__module__:
        import numpy as np
        return isinstance(inst, np.dtype) and isinstance(state, tuple)
    return False


def load(file, **kwargs):
    """The object pickled in the binary file object, as pickle.load reads it, or Refused."""
    return Unpickler(file, **kwargs).load()


def torch_load(path):
    """What torch.load(path, map_location="cpu") returns, read with this module's Unpickler."""
    import torch.serialization as ts
    with open(path, "rb") as f:
        if ts._is_zipfile(f):
            with ts._open_zipfile_reader(f) as z:
                return ts._load(z, "cpu", sys.modules[__name__], encoding="utf-8")
        return ts._legacy_load(f, "cpu", sys.modules[__name__], encoding="utf-8")


def torch_strings(path):
    """The strings in the pickle of path, a torch zip file, read without unpickling it (pickletools
    parses the opcodes and runs nothing); empty for any other file."""
    import pickletools
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
            data = z.read(pkl[0]) if pkl else b""
        return {arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)}
    except (zipfile.BadZipFile, ValueError, EOFError, OSError):  # damaged: not a file of ours either
        return set()
