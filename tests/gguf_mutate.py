"""The GGUF reader's mutation harness: damaged copies of valid files, each read in full.

Seeds are small valid files: ones tools/attn/gguf_write.py makes here (every metadata value type, a
tensor of every dequantisable type and one of a refused type, alignments 32 and 64, versions 2
and 3) and some of ../shared/models/gguf/. Each damaged file is one seeded mutation, or a few,
of a seed: byte flips, truncation, inserted or deleted bytes, or a structural field (a count,
length, value or element type, dimension count, dim, tensor type, offset, the alignment)
overwritten with an inflated, boundary, off-by-one or random value. Every file is then read
fully: GGUFFile (header, metadata, tensor infos), every tensor dequantised and q8_blocks'd,
every matrix of a type a model file holds taken as convert.py keeps it (its blocks, which the
model file's reader dequantises to the same values),
under an alarm (a hang fails) and an address-space limit (a huge allocation fails). Anything
raised other than a one-line GGUFError is a failure, and the file is kept in tests/gguf_bad/.

  /usr/bin/python3 tests/gguf_mutate.py [--files N] [--seconds S] [--seed K] [--shared]
"""
import argparse
import collections
import os
import random
import re
import resource
import signal
import struct
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from attn import gguf_file as gguf  # noqa: E402
from attn import gguf_write  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
from attn.sources import gguf as gguf_source  # noqa: E402

SHARED_GGUF = os.path.join(ROOT, "..", "shared", "models", "gguf")
BAD_DIR = os.path.join(ROOT, "tests", "gguf_bad")
# the shared files small enough to read thousands of times a minute
SHARED_SEEDS = ["stories260K-Q4_K_M.gguf", "stories260K-Q6_K.gguf", "stories260K-BF16.gguf"]
TIMEOUT = 10  # seconds one file may take; the largest seed reads in well under a tenth of that
ADDRESS_LIMIT = 4 << 30  # bytes: any allocation near this is a reader that trusted a count


class Hang(Exception):
    pass


def writer_seeds(tmp):
    """Small valid files that between them hold every value type and tensor type read here."""
    rng = np.random.default_rng(7)
    seeds = []
    for version, alignment in ((3, 32), (2, 64), (3, 8)):
        path = os.path.join(tmp, "seed-v%d-a%d.gguf" % (version, alignment))
        w = gguf_write.GGUFWriter(path, alignment=alignment, version=version)
        w.add("general.architecture", "llama")
        w.add("llama.block_count", 2, gguf.T_UINT32)
        for vtype, (name, _) in gguf.VALUE_TYPES.items():
            if vtype not in (gguf.T_STRING, gguf.T_ARRAY):
                w.add("test.%s" % name.lower(), 1, vtype)
                w.add("test.%s_array" % name.lower(), [0, 1, 1], (gguf.T_ARRAY, vtype))
        w.add("test.strings", ["<s>", "héllo", "", "▁a"])
        w.add("tokenizer.ggml.pre", "default")
        tensors = []
        for type_id in list(gguf.DEQUANTIZE) + [gguf.TYPE_IDS["IQ2_XXS"]]:
            block, block_bytes = gguf.BLOCK_SIZES[type_id]
            shape = (2, max(block, 32)) if type_id != 0 else (3,)
            tensors.append(("t.%s" % gguf.GGML_TYPES[type_id], shape, type_id, block, block_bytes))
        for name, shape, type_id, block, block_bytes in tensors:
            w.add_tensor(name, shape, type_id)
        for name, shape, type_id, block, block_bytes in tensors:
            raw = rng.integers(0, 256, int(np.prod(shape)) // block * block_bytes, dtype=np.uint8)
            if block > 1:  # scales kept finite in most blocks, so the values are exercised too
                raw.reshape(-1, block_bytes)[:, 1] &= 0x3B
            w.write_tensor(name, raw)
        w.close()
        seeds.append(path)
    return seeds


def structural_fields(data):
    """(offset, size, kind) of every structural field of a valid GGUF file's bytes."""
    fields = [(4, 4, "version"), (8, 8, "count"), (16, 8, "count")]
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    pos = 24

    def string(kind):
        nonlocal pos
        n = struct.unpack_from("<Q", data, pos)[0]
        fields.append((pos, 8, kind))
        pos += 8 + n

    for _ in range(n_kv):
        string("key length")
        vtype = struct.unpack_from("<I", data, pos)[0]
        fields.append((pos, 4, "value type"))
        pos += 4
        if vtype == gguf.T_ARRAY:
            etype, n = struct.unpack_from("<IQ", data, pos)
            fields += [(pos, 4, "value type"), (pos + 4, 8, "count")]
            pos += 12
            if etype == gguf.T_STRING:
                for _ in range(min(n, 50)):  # the first strings; the rest are alike
                    string("string length")
                for _ in range(n - min(n, 50)):
                    pos += 8 + struct.unpack_from("<Q", data, pos)[0]
            else:
                pos += n * struct.calcsize(gguf.VALUE_TYPES[etype][1])
        elif vtype == gguf.T_STRING:
            string("string length")
        else:
            size = struct.calcsize(gguf.VALUE_TYPES[vtype][1])
            fields.append((pos, size, "value"))
            pos += size
    for _ in range(n_tensors):
        string("name length")
        n_dims = struct.unpack_from("<I", data, pos)[0]
        fields.append((pos, 4, "dimension count"))
        pos += 4
        fields += [(pos + 8 * i, 8, "dim") for i in range(n_dims)]
        pos += 8 * n_dims
        fields += [(pos, 4, "tensor type"), (pos + 4, 8, "offset")]
        pos += 12
    return fields, pos


def inflated(old, size, rnd, filesize):
    """A new value for a field of `size` bytes that held `old`."""
    top = (1 << (8 * size)) - 1
    choices = [0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, old + 1, old - 1, old * 2, old + 32,
               old + 4096, filesize, filesize - 1, filesize // 2, 1 << 31, 1 << 32, 1 << 62,
               rnd.getrandbits(8 * size), rnd.randrange(0, 64)]
    return rnd.choice(choices) & top


def mutate(data, fields, header_end, rnd):
    """One damaged copy of data (bytes): one to three mutations."""
    b = bytearray(data)
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        kind = rnd.random()
        end = min(len(b), header_end)
        if kind < 0.45 and fields:  # a structural field
            off, size, what = rnd.choice(fields)
            if off + size > len(b):
                continue
            old = int.from_bytes(b[off:off + size], "little")
            if what in ("value type", "tensor type") and rnd.random() < 0.7:
                new = rnd.randrange(0, 45)
            else:
                new = inflated(old, size, rnd, len(b))
            b[off:off + size] = new.to_bytes(size, "little")
        elif not b:  # nothing left to flip or cut
            continue
        elif kind < 0.70:  # byte flips, mostly in the header
            for _ in range(rnd.randrange(1, 9)):
                i = rnd.randrange(end) if rnd.random() < 0.85 or end == len(b) else rnd.randrange(len(b))
                b[i] = rnd.randrange(256) if rnd.random() < 0.5 else b[i] ^ (1 << rnd.randrange(8))
        elif kind < 0.85:  # truncation, mostly in the header
            cut = rnd.randrange(end + 1) if rnd.random() < 0.8 else rnd.randrange(len(b) + 1)
            del b[cut:]
        else:  # bytes inserted or deleted in the header
            i = rnd.randrange(end + 1)
            if rnd.random() < 0.5:
                b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 9)))
            else:
                del b[i:i + rnd.randrange(1, 9)]
    return bytes(b)


def read_fully(path):
    """Everything a converter would read; GGUFError (checked to be one line) is the only way out."""
    try:
        with gguf.GGUFFile(path) as f:
            for key, value in f.metadata.items():
                assert key in f.metadata_types
            for t in f.tensors.values():
                try:
                    v = f.dequantize(t)
                    assert v.dtype == np.float32 and v.shape == t.shape
                    if len(t.shape) == 2 and t.type_name in mf.MATRIX_TYPES:  # convert.py's default
                        blocks = gguf_source.Rows(f, t).blocks(t.type_name)
                        assert blocks.shape == (t.shape[0], storage.block_layout(t.type_name, t.shape)[2])
                        kept = storage.dequantize_matrix(t.type_name, blocks, t.shape)
                        assert np.array_equal(kept, v, equal_nan=True), t.name
                except gguf.GGUFError as e:
                    assert "cannot be dequantised" in str(e), str(e)
                for group in (16, 32):
                    q = gguf.q8_blocks(f, t, group)
                    if q is not None:
                        rows = t.n_values // t.dims[0]
                        assert q[0].shape == (rows, t.dims[0]) and q[1].shape == (rows, t.dims[0] // group)
        return "ok"
    except gguf.GGUFError as e:
        assert "\n" not in str(e) and str(e).startswith(path + ": "), repr(str(e))
        return "refused: " + re.sub(r"'[^']*'|\d+", "#", e.msg)[:60]


def _alarm(signum, frame):
    raise Hang("no answer within %d s" % TIMEOUT)


def run(n_files, seconds=None, seed=1, use_shared=False, keep=True, quiet=False):
    """Read n_files damaged files (or as many as fit in seconds); returns (files, seconds,
    outcome counts, failures [(file kept, error)])."""
    old_limit = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(ADDRESS_LIMIT, old_limit[1]), old_limit[1]))
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    tmp = tempfile.mkdtemp(prefix="gguf_mutate.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rnd = random.Random(seed)
    paths = [writer_seeds(tmp)]
    if use_shared:  # a quarter of the files: they take ten times as long to read as the others
        paths.append([os.path.join(SHARED_GGUF, n) for n in SHARED_SEEDS])
    seeds = []
    for group in paths:
        seeds.append([])
        for p in group:
            data = open(p, "rb").read()
            fields, header_end = structural_fields(data)
            seeds[-1].append((data, fields, header_end))
    target = os.path.join(tmp, "damaged.gguf")
    outcomes, failures = collections.Counter(), []
    start, n = time.time(), 0
    try:
        while n < n_files and (seconds is None or time.time() - start < seconds):
            group = seeds[1] if len(seeds) > 1 and rnd.random() < 0.25 else seeds[0]
            data, fields, header_end = group[rnd.randrange(len(group))]
            damaged = mutate(data, fields, header_end, rnd)
            with open(target, "wb") as f:
                f.write(damaged)
            signal.alarm(TIMEOUT)
            try:
                outcome = read_fully(target)
            except BaseException as e:  # everything else is a reader bug: keep the file
                if isinstance(e, KeyboardInterrupt):
                    raise
                outcome = "FAILED: %s" % type(e).__name__
                kept = None
                if keep:
                    os.makedirs(BAD_DIR, exist_ok=True)
                    kept = os.path.join(BAD_DIR, "mutant-s%d-%d.gguf" % (seed, n))
                    with open(kept, "wb") as f:
                        f.write(damaged)
                failures.append((kept, "%s: %s" % (type(e).__name__, str(e)[:300])))
                if not quiet:
                    print("FAILED %s: %s" % (kept, failures[-1][1]), flush=True)
            finally:
                signal.alarm(0)
            outcomes[outcome] += 1
            n += 1
            if not quiet and n % 100000 == 0:
                print("%d files, %.0f s, %d failures" % (n, time.time() - start, len(failures)), flush=True)
    finally:
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, old_limit)
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    return n, time.time() - start, outcomes, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000000)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared", action="store_true", help="seed with some of ../shared/models/gguf too")
    ap.add_argument("--outcomes", type=int, default=25, help="how many kinds of outcome to list")
    a = ap.parse_args()
    n, secs, outcomes, failures = run(a.files, a.seconds, a.seed, a.shared)
    print("%d damaged files in %.1f s (%.0f a second), seed %d%s: %d failures"
          % (n, secs, n / max(secs, 1e-9), a.seed, ", shared seeds too" if a.shared else "", len(failures)))
    for what, count in outcomes.most_common(a.outcomes):
        print("%9d  %s" % (count, what))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
