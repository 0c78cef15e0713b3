"""The PyTorch reference's Hugging Face mode: a directory's weights and config.json run as
transformers runs them (HFModel), read independently of convert.py, and its tokenizer's pieces."""
import copy
import json
import os
import struct
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from attn.archs import FAMILIES
from attn.reference.model import inv_frequencies, window_mask


# ---- Hugging Face directories ----

class Bad(ValueError):
    """A problem with one file of a Hugging Face directory: main prints `reference.py: FILE: PROBLEM`."""

    def __init__(self, path, msg):
        super().__init__(msg)
        self.path = path


SAFETENSORS_DTYPES = {"F32": "<f4", "BF16": "<u2", "F16": "<f2"}


def read_safetensors(path):
    """name -> float32 numpy array of a .safetensors file: an 8-byte header length, a JSON header
    {name: {dtype, shape, data_offsets}}, the data. BF16 and F16 are widened exactly."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Bad(path, "%d bytes: no safetensors header" % size)
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            raise Bad(path, "header length %d runs past the file's %d bytes" % (n, size))
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise Bad(path, "safetensors header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise Bad(path, "safetensors header is not a JSON object")
    data = np.memmap(path, dtype=np.uint8, mode="r") if size > 8 + n else np.zeros(0, np.uint8)
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (b, end) = e["dtype"], [int(s) for s in e["shape"]], e["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise Bad(path, "tensor %s: a malformed header entry" % name)
        if dtype not in SAFETENSORS_DTYPES:
            raise Bad(path, "tensor %s: dtype %s (this reads %s)" % (name, dtype, ", ".join(SAFETENSORS_DTYPES)))
        width = np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
        if not 0 <= b <= end <= size - 8 - n or end - b != width * int(np.prod(shape)):
            raise Bad(path, "tensor %s: data_offsets [%d, %d] do not hold %s %s" % (name, b, end, dtype, shape))
        raw = data[8 + n + b:8 + n + end].view(SAFETENSORS_DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":
            out[name] = (raw.astype("<u4") << 16).view("<f4")
        else:  # float32 read where it lies (read-only; nothing writes to the weights)
            out[name] = raw if dtype == "F32" else raw.astype(np.float32)
    return out


def read_hf_weights(d):
    """Every tensor of model.safetensors, or of the shards model.safetensors.index.json maps."""
    single, index = os.path.join(d, "model.safetensors"), os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(single):
        return read_safetensors(single)
    if not os.path.exists(index):
        raise Bad(d, "no model.safetensors or model.safetensors.index.json")
    try:
        wmap = json.load(open(index))["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        raise Bad(index, "no weight_map: %s" % e)
    out = {}
    for shard in sorted(set(wmap.values())):
        got = read_safetensors(os.path.join(d, shard))
        for name in got:
            if wmap.get(name) != shard:
                raise Bad(index, "tensor %s is in %s but the weight map says %s" % (name, shard, wmap.get(name)))
        out.update(got)
    missing = set(wmap) - set(out)
    if missing:
        raise Bad(index, "tensor(s) in the weight map but in no shard: %s" % ", ".join(sorted(missing)[:4]))
    return out


def read_json(path, required=True):
    if not os.path.exists(path) and not required:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Bad(path, "unreadable JSON: %s" % e)


ACTIVATIONS = {"silu": F.silu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
               "gelu_new": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu, "relu": F.relu}
# buffers some checkpoints carry that hold nothing a forward pass reads
IGNORED = (".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias")


class HFModel:
    """A Hugging Face checkpoint computed as transformers computes it (eager attention), in dtype."""

    def __init__(self, d, dtype=torch.float32):
        self.dir, self.dtype = d, dtype
        cpath = os.path.join(d, "config.json")
        conf = read_json(cpath)
        self.model_type = mt = conf.get("model_type")
        if mt not in FAMILIES:
            raise Bad(cpath, "model_type %r (this reads %s)" % (mt, ", ".join(FAMILIES)))
        # what transformers assumes when config.json leaves a field out, and the family's quirks
        self.family = fam = FAMILIES[mt]
        self.conf = dict(fam.ref_defaults, **{k: v for k, v in conf.items() if v is not None})
        self.window = fam.ref_window(conf)
        self.cpath = cpath
        with warnings.catch_warnings():  # float32 tensors on the read-only file mapping
            warnings.simplefilter("ignore", UserWarning)
            tensors = {k: torch.from_numpy(v) for k, v in read_hf_weights(d).items()}
        try:
            (self.configure_gpt2 if fam.kind == "gpt2" else self.configure_decoder)(tensors)
        except (KeyError, TypeError, ZeroDivisionError) as e:  # a field of the wrong kind
            raise Bad(cpath, "malformed: %s: %s" % (type(e).__name__, e))
        gen = read_json(os.path.join(d, "generation_config.json"), required=False)
        eos = gen.get("eos_token_id", conf.get("eos_token_id"))
        self.stop_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])

    def need(self, key):
        if key not in self.conf:
            raise Bad(self.cpath, "no %s" % key)
        return self.conf[key]

    def take(self, tensors, name, shape):
        """Pop a tensor by its Hugging Face name, its shape checked."""
        if name not in tensors:
            raise Bad(self.dir, "missing tensor %s" % name)
        t = tensors.pop(name)
        if tuple(t.shape) != tuple(shape):
            raise Bad(self.dir, "tensor %s has shape %s, the config implies %s" % (name, tuple(t.shape), tuple(shape)))
        return t

    def leftovers(self, tensors):
        extra = [n for n in tensors if not n.endswith(IGNORED)]
        if extra:
            raise Bad(self.dir, "tensor(s) this model_type does not use: %s" % ", ".join(sorted(extra)[:4]))

    def rope_config(self):
        """(theta, scaling) for the global layers: rope_scaling (or the newer rope_parameters) as
        modeling_rope_utils reads it; "type" is the older spelling of "rope_type"."""
        c = self.conf
        rs = c.get("rope_parameters") or c.get("rope_scaling") or {}
        if self.family.ref_gemma and "full_attention" in rs:
            rs = rs["full_attention"] or {}
        theta = float(rs.get("rope_theta", c["rope_theta"]))
        kind = rs.get("rope_type", rs.get("type", "default"))
        if kind == "default":
            return theta, None
        if kind == "linear":
            return theta, ("linear", float(rs["factor"]), 0, 0, 0)
        if kind == "llama3":
            try:
                return theta, ("llama3", float(rs["factor"]), float(rs["low_freq_factor"]),
                               float(rs["high_freq_factor"]), float(rs["original_max_position_embeddings"]))
            except KeyError as e:
                raise Bad(self.cpath, "rope_scaling llama3 lacks %s" % e)
        raise Bad(self.cpath, "rope_scaling type %r (this reads default, linear, llama3)" % kind)

    def configure_decoder(self, t):
        """llama, mistral, qwen2, qwen3, gemma3_text: the model.layers.N.* tensors and the config's knobs."""
        c, fam = self.conf, self.family
        d, L = self.need("hidden_size"), self.need("num_hidden_layers")
        H = self.need("num_attention_heads")
        KV = c.get("num_key_value_heads", H)
        hd = c.get("head_dim") or d // H
        V = self.need("vocab_size")
        moe_layers = fam.ref_expert_layers(c, L)  # the others have the dense MLP of intermediate_size
        self.has_experts = lambda i: moe_layers[i]
        hidden = self.need("intermediate_size") if not all(moe_layers) else None
        gemma = fam.ref_gemma
        act = c["hidden_activation"] if gemma else c["hidden_act"]
        if act not in ACTIVATIONS:
            raise Bad(self.cpath, "activation %r (this reads %s)" % (act, ", ".join(ACTIVATIONS)))
        for k in ("use_sliding_window", "use_bidirectional_attention", "attn_logit_softcapping",
                  "final_logit_softcapping", "clip_qkv"):
            if c.get(k):
                raise Bad(self.cpath, "%s = %r: not modelled here" % (k, c[k]))
        r = int(hd * c.get("partial_rotary_factor", 1.0))
        self.eps, self.act, self.plus_one, self.gemma = c["rms_norm_eps"], ACTIVATIONS[act], gemma, gemma
        self.H, self.KV, self.hd, self.rope_dims, self.V = H, KV, hd, r, V
        self.qk_norm, self.qk_norm_whole = fam.ref_qk_norm, fam.ref_qk_norm_whole
        self.embed_scale = float(np.float32(d ** 0.5)) if gemma else 1.0  # a float32 tensor in transformers
        self.scaling = c["query_pre_attn_scalar"] ** -0.5 if gemma else hd ** -0.5
        theta, scaling = self.rope_config()
        global_inv = inv_frequencies(theta, r, scaling)
        if gemma:
            types = c.get("layer_types") or [
                "sliding_attention" if (i + 1) % c["sliding_window_pattern"] else "full_attention" for i in range(L)]
            if len(types) != L or set(types) - {"sliding_attention", "full_attention"}:
                raise Bad(self.cpath, "layer_types %s does not give each of %d layers a known kind" % (types, L))
            rl = c.get("rope_parameters", {}).get("sliding_attention") or {}
            local_inv = inv_frequencies(float(rl.get("rope_theta", c["rope_local_base_freq"])), r)
            self.windows = [c["sliding_window"] if k == "sliding_attention" else 0 for k in types]
            self.layer_inv = [local_inv if w else global_inv for w in self.windows]
        else:  # Mistral's mask: every layer's last sliding_window positions, RoPE scaled as configured
            self.windows, self.layer_inv = [self.window or 0] * L, [global_inv] * L
        qkv_bias, o_bias, mlp_bias = fam.ref_biases(c)
        self.embed = self.take(t, "model.embed_tokens.weight", (V, d))
        self.final_norm = self.take(t, "model.norm.weight", (d,))
        tied = c["tie_word_embeddings"]
        self.lm_head = self.embed if tied else self.take(t, "lm_head.weight", (V, d))
        if tied:
            t.pop("lm_head.weight", None)  # transformers ties it to the embedding whatever it holds
        shapes = {"self_attn.q_proj": (H * hd, d), "self_attn.k_proj": (KV * hd, d), "self_attn.v_proj": (KV * hd, d),
                  "self_attn.o_proj": (d, H * hd)}
        mlp = {"mlp.gate_proj": (hidden, d), "mlp.up_proj": (hidden, d), "mlp.down_proj": (d, hidden)}
        biased = {"self_attn.q_proj": qkv_bias, "self_attn.k_proj": qkv_bias, "self_attn.v_proj": qkv_bias,
                  "self_attn.o_proj": o_bias, "mlp.gate_proj": mlp_bias, "mlp.up_proj": mlp_bias,
                  "mlp.down_proj": mlp_bias}
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        self.layers = []
        for i in range(L):
            p, W = "model.layers.%d." % i, {}
            moe = self.has_experts(i)
            if moe:
                W["experts"] = self.take_experts(t, p, d)
            for n, shape in dict(shapes, **({} if moe else mlp)).items():
                W[n + ".weight"] = self.take(t, p + n + ".weight", shape)
                if biased[n]:
                    W[n + ".bias"] = self.take(t, p + n + ".bias", shape[:1])
            for n in norms:
                W[n] = self.take(t, p + n + ".weight", (d,))
            if self.qk_norm:  # OlmoeAttention's norms span the whole projection, Qwen3's and Gemma 3's a head
                W["q_norm"] = self.take(t, p + "self_attn.q_norm.weight", (H * hd if self.qk_norm_whole else hd,))
                W["k_norm"] = self.take(t, p + "self_attn.k_norm.weight", (KV * hd if self.qk_norm_whole else hd,))
            self.layers.append(W)
        self.leftovers(t)
        self.max_positions = c.get("max_position_embeddings", 1 << 30)

    def take_experts(self, t, p, d):
        """A layer's router and experts as Qwen3MoeSparseMoeBlock (mlp.gate, mlp.experts.E.gate_proj
        ...) or MixtralSparseMoeBlock (block_sparse_moe.gate, block_sparse_moe.experts.E.w1 ...)
        holds them: the family's ref_experts names them, and the keys of their count, width,
        top_k and renormalising (Mixtral always renormalises)."""
        c, x = self.conf, self.family.ref_experts
        E, width = self.need(x["count"]), self.need(x["width"])
        self.top_k, self.norm_topk = self.need(x["top_k"]), c[x["norm"]] if x["norm"] else True
        experts = [{n + ".weight": self.take(t, p + x["expert"] % e + x[n] + ".weight", shape)
                    for n, shape in (("gate", (width, d)), ("up", (width, d)), ("down", (d, width)))}
                   for e in range(E)]
        shared = None
        if x.get("shared"):  # Qwen2-MoE's shared expert and its gate, Linear(hidden_size, 1)
            S = self.need(x["shared_width"])
            shared = ({n + ".weight": self.take(t, p + x["shared"] + x[n] + ".weight", shape)
                       for n, shape in (("gate", (S, d)), ("up", (S, d)), ("down", (d, S)))},
                      self.take(t, p + x["shared_gate"], (1, d)))
        return self.take(t, p + x["router"], (E, d)), experts, shared

    def moe(self, h, router, experts, shared=None):
        """Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock and OlmoeSparseMoeBlock: the router's softmax
        in float32, the top_k experts of each row (of equal probabilities the lower expert, as a
        stable sort orders them: torch.topk on a CPU breaks such a tie either way), renormalised
        (Qwen3-MoE and OLMoE: with norm_topk_prob), then in the model's dtype; each expert's SwiGLU
        over its rows, weighted and summed in expert order; Qwen2-MoE's shared expert added, gated."""
        probs = F.softmax(F.linear(h, self.cast(router)), dim=-1, dtype=torch.float)
        chosen = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :self.top_k]
        weights = probs.gather(-1, chosen)
        if self.norm_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(h.dtype)
        out = torch.zeros_like(h)
        for e, W in enumerate(experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if len(rows):
                x = h[rows]
                y = self.linear(self.act(self.linear(x, W, "gate")) * self.linear(x, W, "up"), W, "down")
                out.index_add_(0, rows, y * weights[rows, slot, None])
        if shared:  # Qwen2MoeSparseMoeBlock: sigmoid(shared_expert_gate(h)) * shared_expert(h), added
            W, gate = shared
            y = self.linear(self.act(self.linear(h, W, "gate")) * self.linear(h, W, "up"), W, "down")
            out = out + torch.sigmoid(F.linear(h, self.cast(gate))) * y
        return out

    def mlp(self, h, W):
        if "experts" in W:
            return self.moe(h, *W["experts"])
        return self.linear(self.act(self.linear(h, W, "mlp.gate_proj")) * self.linear(h, W, "mlp.up_proj"), W,
                           "mlp.down_proj")

    def configure_gpt2(self, t):
        c = self.conf
        d, L, H, V = self.need("n_embd"), self.need("n_layer"), self.need("n_head"), self.need("vocab_size")
        S, hidden = c["n_positions"], c["n_inner"] or 4 * d
        if c["activation_function"] not in ACTIVATIONS:
            raise Bad(self.cpath, "activation_function %r (this reads %s)" % (c["activation_function"],
                                                                           ", ".join(ACTIVATIONS)))
        if c["scale_attn_by_inverse_layer_idx"] or not c["scale_attn_weights"]:
            raise Bad(self.cpath, "GPT-2 attention scaled other than by 1 / sqrt(head_dim): not modelled here")
        self.eps, self.act, self.H, self.hd, self.V = c["layer_norm_epsilon"], ACTIVATIONS[c["activation_function"]], \
            H, d // H, V
        pre = "transformer." if "transformer.wte.weight" in t else ""
        self.embed = self.take(t, pre + "wte.weight", (V, d))
        self.wpe = self.take(t, pre + "wpe.weight", (S, d))
        self.final_norm = (self.take(t, pre + "ln_f.weight", (d,)), self.take(t, pre + "ln_f.bias", (d,)))
        tied = c["tie_word_embeddings"]
        self.lm_head = self.embed if tied else self.take(t, "lm_head.weight", (V, d))
        if tied:
            t.pop("lm_head.weight", None)
        shapes = {"ln_1": (d,), "ln_2": (d,), "attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d),
                  "mlp.c_fc": (d, hidden), "mlp.c_proj": (hidden, d)}  # Conv1D: [in, out]
        self.layers = []
        for i in range(L):
            p, W = pre + "h.%d." % i, {}
            for n, shape in shapes.items():
                W[n + ".weight"] = self.take(t, p + n + ".weight", shape)
                W[n + ".bias"] = self.take(t, p + n + ".bias", shape[-1:])
            self.layers.append(W)
        self.leftovers(t)
        self.max_positions = S

    # -- computation --

    def cast(self, w):
        return w.to(self.dtype)

    def rms_norm(self, x, w):
        w = (1 + w.float()) if self.plus_one else w  # Gemma forms 1 + w in float32
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.cast(w)

    def linear(self, x, W, name):
        b = W.get(name + ".bias")
        return F.linear(x, self.cast(W[name + ".weight"]), None if b is None else self.cast(b))

    def rope(self, x, layer, pos):
        """x [T, heads, hd]: transformers' apply_rotary_pos_emb, x cos + rotate_half(x) sin, where
        rotate_half(a, b) = (-b, a) over the halves of the first rope_dims."""
        r = self.rope_dims
        ang = torch.outer(pos.double(), torch.from_numpy(self.layer_inv[layer]))
        emb = torch.cat([ang, ang], -1)
        cos, sin = emb.cos().to(self.dtype)[:, None, :], emb.sin().to(self.dtype)[:, None, :]
        xr = x[..., :r]
        half = torch.cat([-xr[..., r // 2:], xr[..., :r // 2]], -1)
        return torch.cat([xr * cos + half * sin, x[..., r:]], -1)

    def attend(self, q, k, v, pos, window, scaling):
        """q [T, H, hd], k and v [S, KV, hd] (every position so far), pos the queries' positions."""
        H, KV = q.shape[1], k.shape[1]
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) * scaling
        s = s.masked_fill(~window_mask(pos, torch.arange(k.shape[0]), window), float("-inf"))
        return torch.einsum("hts,shd->thd", s.softmax(-1), v).reshape(q.shape[0], -1)

    def hidden(self, tokens, cache):
        """The final normed hidden states [T, dim] of tokens following the cache's positions; the
        cache (a list of per-layer (k, v), or [] to start) grows by them."""
        start = cache[0][0].shape[0] if cache else 0
        T = len(tokens)
        if start + T > self.max_positions:
            raise ValueError("%d positions exceed the model's %d" % (start + T, self.max_positions))
        pos = torch.arange(start, start + T)
        ids = torch.tensor(list(tokens), dtype=torch.long)
        if self.family.kind == "gpt2":
            return self.gpt2_hidden(ids, pos, cache)
        x = self.cast(self.embed[ids]) * self.embed_scale
        H, KV, hd = self.H, self.KV, self.hd
        for l, W in enumerate(self.layers):
            h = self.rms_norm(x, W["input_layernorm"])
            q, k = self.linear(h, W, "self_attn.q_proj"), self.linear(h, W, "self_attn.k_proj")
            v = self.linear(h, W, "self_attn.v_proj").view(T, KV, hd)
            if self.qk_norm_whole:  # OlmoeAttention: q_norm(q_proj(h)) before the view into heads
                q, k = self.rms_norm(q, W["q_norm"]), self.rms_norm(k, W["k_norm"])
            q, k = q.view(T, H, hd), k.view(T, KV, hd)
            if self.qk_norm and not self.qk_norm_whole:
                q, k = self.rms_norm(q, W["q_norm"]), self.rms_norm(k, W["k_norm"])
            q, k = self.rope(q, l, pos), self.rope(k, l, pos)
            if len(cache) <= l:
                cache.append((k[:0], v[:0]))
            k, v = torch.cat([cache[l][0], k]), torch.cat([cache[l][1], v])
            cache[l] = (k, v)
            a = self.linear(self.attend(q, k, v, pos, self.windows[l], self.scaling), W, "self_attn.o_proj")
            if self.gemma:  # Gemma 3: post_attention_layernorm on the output, pre_feedforward before the MLP
                x = x + self.rms_norm(a, W["post_attention_layernorm"])
                h = self.rms_norm(x, W["pre_feedforward_layernorm"])
            else:  # Llama, Qwen: post_attention_layernorm is the MLP's input norm
                x = x + a
                h = self.rms_norm(x, W["post_attention_layernorm"])
            f = self.mlp(h, W)
            x = x + (self.rms_norm(f, W["post_feedforward_layernorm"]) if self.gemma else f)
        return self.rms_norm(x, self.final_norm)

    def gpt2_hidden(self, ids, pos, cache):
        T, d = len(ids), self.embed.shape[1]
        ln = lambda x, w, b: F.layer_norm(x, (d,), self.cast(w), self.cast(b), self.eps)  # noqa: E731
        conv1d = lambda x, W, n: x @ self.cast(W[n + ".weight"]) + self.cast(W[n + ".bias"])  # noqa: E731
        x = self.cast(self.embed[ids]) + self.cast(self.wpe[pos])
        for l, W in enumerate(self.layers):
            q, k, v = conv1d(ln(x, W["ln_1.weight"], W["ln_1.bias"]), W, "attn.c_attn").split(d, -1)
            q, k, v = (z.view(T, self.H, self.hd) for z in (q, k, v))
            if len(cache) <= l:
                cache.append((k[:0], v[:0]))
            k, v = torch.cat([cache[l][0], k]), torch.cat([cache[l][1], v])
            cache[l] = (k, v)
            x = x + conv1d(self.attend(q, k, v, pos, 0, self.hd ** -0.5), W, "attn.c_proj")
            h = ln(x, W["ln_2.weight"], W["ln_2.bias"])
            x = x + conv1d(self.act(conv1d(h, W, "mlp.c_fc")), W, "mlp.c_proj")
        return ln(x, *self.final_norm)

    def classify(self, h):
        """[T, vocab] logits; in another dtype than float32 the classifier is cast a slice at a time
        (a float64 copy of a 262k-row matrix would be large)."""
        if self.dtype == torch.float32:
            return F.linear(h, self.lm_head)
        rows = 1 << 15
        return torch.cat([F.linear(h, self.cast(self.lm_head[i:i + rows])) for i in range(0, self.V, rows)], -1)

    # the interface logits(), perplexity() and greedy() use, shared with Transformer
    def all_logits(self, tokens):
        with torch.no_grad():
            return self.classify(self.hidden(tokens, []))

    def in_double(self):
        """This model computing in float64 (the weights shared, cast as they are used), for perplexity."""
        m = copy.copy(self)
        m.dtype = torch.float64
        return m

    def context(self):
        return self.max_positions

    def stops(self, t):
        return t in self.stop_ids

    def generate(self, tokens, n, draft=None):
        """Greedy with a KV cache, as transformers' generate does. A step of one token reads every
        weight for one row of work; draft(new tokens so far) -> a guess at the tokens that follow
        (another program's output, say) lets the layers run over the whole guess at once, and the
        classifier over a block of its states, each state's argmax checked against the guess. The
        first that differs is taken instead and the rest guessed again; with no guess a step is the
        plain one. The result is the greedy continuation whatever draft guesses."""
        room = min(n, self.context() - len(tokens))  # new tokens allowed
        out, cache = [], []
        with torch.no_grad():
            state = self.hidden(tokens, cache)[-1:]
            while len(out) < room:
                guess = (draft(out) if draft else [])[:room - len(out)]
                states = torch.cat([state, self.hidden(guess, cache)]) if guess else state
                for b in range(0, len(guess) + 1, 16):
                    best = self.classify(states[b:b + 16]).argmax(-1).tolist()
                    i = next((b + j for j, t in enumerate(best) if b + j == len(guess) or t != guess[b + j]), None)
                    if i is not None:
                        break
                out += guess[:i]
                cache[:] = [(k[:len(tokens) + len(out)], v[:len(tokens) + len(out)]) for k, v in cache]
                t = best[i - b]
                if len(out) == room or self.stops(t):
                    break
                out.append(t)
                state = self.hidden([t], cache)
        return out


def hf_pieces(d):
    """id -> (bytes, special) of a Hugging Face directory's tokenizer.json, as text decodes: a
    byte-level vocabulary's characters mapped back to bytes, a SentencePiece one's '▁' as a space
    and <0xNN> as the byte; added tokens as their text. None when the directory has no tokenizer.json."""
    path = os.path.join(d, "tokenizer.json")
    if not os.path.exists(path):
        return None
    tj = read_json(path)
    vocab = tj.get("model", {}).get("vocab", {})
    byte_level = "ByteLevel" in json.dumps(tj.get("decoder"))
    if byte_level:
        keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
        extra = [b for b in range(256) if b not in keep]
        char_byte = {chr(b): b for b in keep}
        char_byte.update({chr(256 + i): b for i, b in enumerate(extra)})
    out = {}
    for piece, i in vocab.items():
        if byte_level:
            out[i] = (bytes(char_byte[ch] for ch in piece), False)
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            out[i] = (bytes([int(piece[3:5], 16)]), False)
        else:
            out[i] = (piece.replace("\u2581", " ").encode("utf-8"), False)
    for a in tj.get("added_tokens", []):
        out[a["id"]] = (a["content"].encode("utf-8"), bool(a.get("special")))
    return out


def hf_decode(d, ids):
    """The bytes ids stand for, as ./run prints them: special tokens as nothing."""
    pieces = hf_pieces(d)
    if pieces is None:
        raise Bad(d, "no tokenizer.json to decode with")
    return b"".join(b"" if pieces[t][1] else pieces[t][0] for t in ids)
