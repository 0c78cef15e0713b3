"""convert.py's mutation harness for Hugging Face directories: damaged copies of valid ones,
each converted in full.

Seeds are small directories made here: a Llama one in float32 (one shard), in bfloat16 (two
shards, with their index) and with a tokenizer.json and tokenizer_config.json, and one of each
mixture-of-experts family (Qwen3-MoE, Qwen2-MoE with its shared expert, Mixtral, OLMoE); the
others carry a llama2.c tokenizer.bin. Each damaged copy changes one file of a seed: in
config.json, the tokenizer's JSON, the safetensors header or the shards' index, one
or two values anywhere in the JSON set to a boundary, huge, negative, fractional, non-finite
or mistyped value (or a key deleted, a number moved by one, a list cut or grown), the header's
length sometimes wrong too; or bytes flipped; or the file cut short. convert.py then reads the
copy in-process under an alarm (a hang fails) and the caller's address-space limit. It must
succeed, or refuse in one line naming what it refused: a traceback, a second line, or the
message for an exception no reader foresaw ("cannot convert (...)") fails, and the directory
is kept beside the others in the temporary folder.

  /usr/bin/python3 tests/hf_mutate.py [--dirs N] [--seed K]
"""
import argparse
import contextlib
import io
import json
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import convert  # noqa: E402
from attn import fake_hf, families, modelfile as mf, random_models  # noqa: E402

# published configs of the mixture-of-experts families, and what their cut-down seed changes
MOE_SEEDS = [(families.QWEN3_30B_A3B, {}), (families.QWEN1_5_MOE_A2_7B, dict(shared_expert_intermediate_size=48)),
             (families.MIXTRAL_8X7B, {}), (families.OLMOE_1B_7B_0924, {})]
# what a damaged value becomes
VALUES = [None, -1, 0, 1, 2 ** 31, 2 ** 63, -2 ** 40, 1e308, float("nan"), float("inf"), "x", "F8", "BF16", "I64",
          [], {}, True, 3.5, [1, 2], 7]


def make_seeds(root):
    """The seed directories under root."""
    seeds = []
    small = dict(dim=64, hidden_dim=96, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, seq_len=64)
    for i, (dtype, shards) in enumerate((("F32", 1), ("BF16", 2))):
        d = os.path.join(root, "llama%d" % i)
        fake_hf.write_hf_llama(d, small, seed=i, shards=shards, dtype=dtype)
        seeds.append(d)
    blob = random_models.default_vocab(512)[0]
    seeds.append(tokenizer_json_seed(os.path.join(root, "llama_tokjson"), seeds[0], blob))
    for published, changes in MOE_SEEDS:
        conf = families.moe_config(published, **dict(dict(experts=4, hidden_size=64, heads=2, kv_heads=1, width=32,
                                                          vocab_size=512, max_position_embeddings=256), **changes))
        d = os.path.join(root, published["model_type"])
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(conf, f)
        fake_hf.write_hf_weights(d, families.family_weights(conf, len(seeds)))
        random_models.write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), blob)
        seeds.append(d)
    return seeds


def tokenizer_json_seed(d, llama, blob):
    """A copy of the Llama seed llama carrying a tokenizer.json (SentencePiece-style BPE with byte
    fallback, as Llama 2's, made from the vocabulary blob) and its tokenizer_config.json."""
    shutil.copytree(llama, d)
    os.remove(os.path.join(d, "tokenizer.bin"))
    pieces, scores, _ = mf.parse_tokenizer(blob)
    names = ["<unk>", "<s>", "</s>"] + [p.decode().replace(" ", "\u2581") for p in pieces[3:]]
    vocab = {n: i for i, n in enumerate(names)}
    merges = []
    for i in sorted(range(3, len(names)), key=lambda i: -scores[i]):
        n = names[i]
        split = next((k for k in range(1, len(n)) if n[:k] in vocab and n[k:] in vocab), None)
        if len(n) > 1 and split:
            merges.append("%s %s" % (n[:split], n[split:]))
    j = {"added_tokens": [{"id": i, "content": names[i], "special": True} for i in range(3)],
         "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
         "pre_tokenizer": None,
         "post_processor": {"type": "TemplateProcessing", "single": [
             {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
         "model": {"type": "BPE", "byte_fallback": True, "vocab": vocab, "merges": merges}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(j, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:  # BOS and EOS by name, as transformers reads them
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}, f)
    return d


def mutate_json(obj, rnd):
    """obj with one value somewhere replaced, moved by one, cut or grown, or a key deleted."""
    paths = []

    def walk(o, path):
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            paths.append(path + [k])
            walk(v, path + [k])
    walk(obj, [])
    if not paths:
        return obj
    *up, key = rnd.choice(paths)
    parent = obj
    for k in up:
        parent = parent[k]
    v, how = parent[key], rnd.randrange(8)
    if how == 0 and isinstance(parent, dict):
        del parent[key]
    elif how == 1 and isinstance(v, int) and not isinstance(v, bool):
        parent[key] = v + rnd.choice([-1, 1, 2, 1 << 20, -(1 << 20)])
    elif how == 2 and isinstance(v, list) and v:
        parent[key] = v[:-1] if rnd.random() < 0.5 else v + v[-1:]
    else:
        parent[key] = rnd.choice(VALUES)
    return obj


def damage(src, dst, rnd):
    """A copy of directory src at dst with one of its files damaged; returns that file's name."""
    shutil.copytree(src, dst)
    name = rnd.choice(sorted(os.listdir(dst)))
    path = os.path.join(dst, name)
    with open(path, "rb") as f:
        data = f.read()
    how = rnd.randrange(6)
    if how < 4 and name.endswith(".json"):
        data = json.dumps(mutate_json(json.loads(data), rnd)).encode()
    elif how < 4 and name.endswith(".safetensors"):
        n = struct.unpack_from("<Q", data)[0]
        head = json.loads(data[8:8 + n])
        for _ in range(rnd.randrange(1, 3)):
            head = mutate_json(head, rnd)
        h = json.dumps(head).encode()
        h += b" " * (n - len(h)) if rnd.random() < 0.7 else b""  # the data where it was, or moved
        length = len(h) if rnd.random() < 0.9 else rnd.choice([0, 1, 1 << 40, len(h) + 7])
        data = struct.pack("<Q", length) + h + data[8 + n:]
    elif how == 4:
        data = data[:rnd.randrange(len(data))]
    else:
        data = bytearray(data)
        for _ in range(rnd.randrange(1, 8)):  # mostly in the headers, where a byte means most
            data[rnd.randrange(min(len(data), 4096) if rnd.random() < 0.8 else len(data))] = rnd.randrange(256)
        data = bytes(data)
    with open(path, "wb") as f:
        f.write(data)
    return name


def convert_once(src, out):
    """convert.py src out --force in-process: (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = convert.main([src, out, "--force"])
    return rc, err.getvalue()


def run(n, seed=0, quiet=False):
    """n damaged directories; returns (outcomes by exit status, failures)."""
    root = tempfile.mkdtemp(prefix="hf_mutate.")
    seeds = make_seeds(os.path.join(root, "seeds"))

    def hang(*_):
        raise TimeoutError("no answer within 30 s")
    signal.signal(signal.SIGALRM, hang)
    rnd, outcomes, failures = random.Random(seed), {}, []
    for i in range(n):
        src = rnd.choice(seeds)
        dst = os.path.join(root, "damaged")
        name = damage(src, dst, rnd)
        signal.alarm(30)
        try:
            rc, err = convert_once(dst, os.path.join(root, "out.bin"))
        except BaseException as e:  # a hang, or what main let through
            rc, err = -1, repr(e)
        signal.alarm(0)
        outcomes[rc] = outcomes.get(rc, 0) + 1
        lines = [ln for ln in err.strip().split("\n") if ": note: " not in ln]
        if rc not in (0, 1) or (rc == 1 and len(lines) != 1) or "cannot convert (" in err:
            kept = os.path.join(root, "failed%d" % i)
            os.rename(dst, kept)
            failures.append("%s (%s of %s damaged): exit %s: %s" % (kept, name, os.path.basename(src), rc,
                                                                    err.strip()[:300]))
            if not quiet:
                print(failures[-1], flush=True)
        else:
            shutil.rmtree(dst)
    if not failures:
        shutil.rmtree(root)
    return outcomes, failures


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--dirs", type=int, default=1000)
    a.add_argument("--seed", type=int, default=0)
    args = a.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))
    outcomes, failures = run(args.dirs, args.seed)
    print("%d damaged directories: %s converted, %s refused in one line, %d failures"
          % (args.dirs, outcomes.get(0, 0), outcomes.get(1, 0), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
