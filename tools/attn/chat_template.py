"""An instruct checkpoint's chat template as a model file's chat section (docs/FORMAT.md).

A Jinja chat template (tokenizer_config.json's `chat_template`, chat_template.jinja, or a GGUF's
`tokenizer.chat_template`) is recognised by the markers of its family, never by its exact text,
and stored as the family chat/template.c formats, the special token ids it writes, and one text:

  chatml  <|im_start|> / <|im_end|> (SmolLM2, Qwen2.5); text: the system prompt the template
          inserts when a conversation has none, taken from the template
  qwen3   ChatML with Qwen3's <think> handling (reasoning_content); no default system prompt
  llama3  <|start_header_id|> / <|end_header_id|> / <|eot_id|>; text: the system turn's preamble
          (Llama 3.1/3.2's "Cutting Knowledge Date" and "Today Date" lines; "{date}" where the
          template calls strftime_now("%d %b %Y"), else its fallback date), empty for Llama 3
  llama2  Meta's [INST] and <<SYS>>
  gemma   <start_of_turn> / <end_of_turn>, the system folded into the first user turn
  zephyr  <|user|> / <|assistant|> / <|system|> text, each turn ended by eos_token (TinyLlama)
  mistral " [INST] " / " [/INST]" text, the system prompt inside the first, each reply ended by
          eos_token (Mixtral-8x7B-Instruct's template since 2024; its first, without a system
          prompt or the spaces, is of no family)

The section (format version 5) also keeps the template's own text, so that an export can write
it back. chat_section(template, tok, name=None) returns the section's bytes; a template no family
matches is stored with family 0, none (`./run -m chat` then asks for --chat-template), and a name
overrides the recognition (also for a checkpoint without a template). pack_section and
parse_section are the layout itself; parse_section also reads version 4's, which had no template.
no_family_note is convert.py's note on a family-0 section; for_export gives the text an export
writes back.
"""
import re
import struct
import os

from attn import modelfile as mf

# chat/chat.h's CHAT_* numbers, and the ids each family's section holds (None: the tokenizer's
# bos_id, then eos_id, which llama2.c's tokenizer.bin spells "\n<s>\n" and "\n</s>\n")
FAMILIES = ["chatml", "qwen3", "llama3", "llama2", "gemma", "zephyr", "mistral"]
FAMILY_IDS = {
    "chatml": ["<|im_start|>", "<|im_end|>"],
    "qwen3": ["<|im_start|>", "<|im_end|>"],
    "llama3": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "llama2": [None, None],
    "gemma": ["<bos>", "<start_of_turn>", "<end_of_turn>"],
    "zephyr": [None, None],
    "mistral": [None, None],
}
# What `./run --chat-template llama3` uses too: Llama 3.2's preamble with today's date.
LLAMA3_PREAMBLE = "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
KNOWN = ", ".join(FAMILIES)


def family_number(name):
    return FAMILIES.index(name) + 1


def _literals(template):
    """The string literals inside the template's {{ }} and {% %} tags, escapes decoded."""
    out = []
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
    for tag in re.findall(r"\{\{.*?\}\}|\{%.*?%\}", template, re.S):
        for m in re.finditer(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"", tag, re.S):
            raw = m.group(1) if m.group(1) is not None else m.group(2)
            out.append(re.sub(r"\\(.)", lambda e: escapes.get(e.group(1), "\\" + e.group(1)), raw, flags=re.S))
    return out


def _chatml_default_system(template):
    """The system prompt a ChatML template writes when the conversation has none: a literal
    '<|im_start|>system\\n...<|im_end|>' with text in it ('' if there is none)."""
    for lit in _literals(template):
        m = re.match(r"<\|im_start\|>system\n(.+?)<\|im_end\|>", lit, re.S)
        if m:
            return m.group(1)
    return ""


def _llama3_preamble(template):
    """Llama 3.1/3.2's lines at the top of the system turn, '' for Llama 3's template."""
    lits = _literals(template)
    knowledge = [s for s in lits if s.startswith("Cutting Knowledge Date:")]
    if not knowledge:
        return ""
    if not any(s == "Today Date: " for s in lits):
        raise ValueError("chat template: a Llama 3 template with %r but no \"Today Date: \" line, which this build "
                         "does not know" % knowledge[0])
    if "strftime_now" in template:
        if 'strftime_now("%d %b %Y")' not in template and "strftime_now('%d %b %Y')" not in template:
            raise ValueError("chat template: Llama 3 date format other than strftime_now(\"%d %b %Y\")")
        date = "{date}"
    else:
        m = re.search(r"set\s+date_string\s*=\s*[\"']([^\"']*)[\"']", template)
        if not m:
            raise ValueError("chat template: a Llama 3 template with a Today Date line but no date_string default")
        date = m.group(1)
    return knowledge[0] + "Today Date: " + date + "\n\n"


def recognise(template):
    """(family name, the section's text) of a Jinja chat template; ValueError if none matches."""
    def has(*marks):
        return all(m in template for m in marks)
    if has("<|im_start|>", "<|im_end|>", "<think>", "</think>", "reasoning_content"):
        return "qwen3", ""
    if has("<|im_start|>", "<|im_end|>") and re.search(r"message(\[['\"]role['\"]\]|\.role)", template):
        return "chatml", _chatml_default_system(template)
    if has("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"):
        return "llama3", _llama3_preamble(template)
    if has("[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "bos_token", "eos_token"):
        return "llama2", ""
    if has("[INST]", "[/INST]", "bos_token", "eos_token") and "<<SYS>>" not in template and \
            {" [INST] ", " [/INST]", "\n\n"} <= set(_literals(template)) and "[AVAILABLE_TOOLS]" not in template:
        return "mistral", ""
    if has("<start_of_turn>", "<end_of_turn>", "model") and "bos_token" in template:
        return "gemma", ""
    if has("<|user|>", "<|assistant|>", "<|system|>", "eos_token") and "<|end|>" not in template:
        return "zephyr", ""
    raise ValueError("chat template not recognised (%r...); pass --chat-template NAME (%s)" % (_head(template), KNOWN))


def _head(template):
    return " ".join(template.split())[:40]


def _family_of(template):
    try:
        return recognise(template)[0]
    except ValueError:
        return None


def no_family_note(template):
    """convert.py's note for a template stored with family 0."""
    return ("chat template %r... is of no family this build formats: kept as text (--export-hf writes it back), "
            "but ./run -m chat needs --chat-template NAME (%s)" % (_head(template), KNOWN))


def for_export(section, n_pieces):
    """(the template text an export writes, None for none; a note, None if none is due) of a model
    file's chat section (b"" for none). The template is the section's text as the checkpoint had
    it: this project keeps no canonical template of its own per family, so a family without its
    text (chosen with --chat-template alone, or from a version 4 file) exports no template, and a
    family chosen over the template's own is not in it either; the note says that converting the
    export back then needs --chat-template NAME."""
    if not section:
        return None, None
    name, _, _, template = parse_section(section, n_pieces)
    if name is None or _family_of(template) == name:
        return template or None, None
    back = "converting the export back needs --chat-template %s" % name
    if not template:
        return None, ("the chat section is family %s without its template's text (--chat-template alone, or a "
                      "version 4 file): tokenizer_config.json gets no chat_template; %s" % (name, back))
    theirs = _family_of(template)
    return template, ("tokenizer_config.json gets the checkpoint's chat template, %s, while the model file formats "
                      "chats as %s (--chat-template); %s" % ("of family %s" % theirs if theirs else "of no family",
                                                            name, back))


def _default_text(name):
    return LLAMA3_PREAMBLE if name == "llama3" else ""


def _token_ids(tok, name):
    """The ids family name needs, found in the tokenizer spec (blob, kind, flags, bos, eos)."""
    blob, bos, eos = tok[0], tok[3], tok[4]
    pieces, _, _, added = mf.parse_tokenizer(bytes(blob), with_added=True)
    special = {pieces[i]: i for i, attr in added if attr & 1}
    ids = []
    for k, spelling in enumerate(FAMILY_IDS[name]):
        if spelling is None:
            i = bos if k == 0 else eos
            if i < 0:
                raise ValueError("chat template %s needs %s, which the tokenizer does not have"
                                 % (name, "a BOS token" if k == 0 else "an EOS token"))
        else:
            i = special.get(spelling.encode())
            if i is None:
                raise ValueError("chat template %s needs the special token %s, which the tokenizer does not have"
                                 % (name, spelling))
        ids.append(i)
    return ids


def pack_section(name, ids, text, template=""):
    """A version 5 chat section: family name (None: family 0, no family, with no ids and no
    text), the ids it writes, its text, and the Jinja template's source (may be empty)."""
    t, j = text.encode("utf-8"), (template or "").encode("utf-8")
    if name is None and (ids or t):
        raise ValueError("chat section: family 0 (none) has no ids and no text")
    family = 0 if name is None else family_number(name)
    return (struct.pack("<II%di" % len(ids), family, len(ids), *ids) + struct.pack("<I", len(t)) + t
            + struct.pack("<I", len(j)) + j)


def chat_section(template, tok, name_override=None):
    """The chat section's bytes for a Jinja chat template (None: the checkpoint has none) and the
    tokenizer spec tok (blob, kind, flags, bos_id, eos_id) it goes with; the template's text is
    kept in it. name_override (--chat-template) chooses the family instead of recognising it;
    the template's own text is kept when it is of that family. A template no family matches gives
    a section of family 0 (parse_section's name None). ValueError, one line, if the template
    names an unknown family or the tokenizer lacks a token the family writes."""
    name = name_override
    if name is not None and name not in FAMILIES:
        raise ValueError("--chat-template %s: unknown chat template (known: %s)" % (name, KNOWN))
    try:
        found = recognise(template) if template is not None else None
    except ValueError:
        found = None
    if name is None and found is None:
        return pack_section(None, [], "", template)
    if name is None:
        name, text = found
    else:
        text = found[1] if found and found[0] == name else _default_text(name)
    return pack_section(name, _token_ids(tok, name), text, template)


def _utf8(what, data):
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("chat section: its %s is not UTF-8 (or holds NUL) at byte %d" % (what, e.start))
    if "\0" in s:
        raise ValueError("chat section: its %s is not UTF-8 (or holds NUL) at byte %d" % (what, data.index(b"\0")))
    return s


def parse_section(data, n_pieces, version=mf.VERSION):
    """(family name or None for family 0, ids, text, template) of a chat section of a file of
    format version (4: no template, returned as ""; family 0 only from 5), checked as
    chat/template.c checks it."""
    if len(data) < 8:
        raise ValueError("chat section: %d bytes, shorter than its 8-byte start" % len(data))
    family, n = struct.unpack_from("<II", data)
    if not (version >= 5 and family == 0) and not 1 <= family <= len(FAMILIES):
        raise ValueError("chat section: family %d is unknown to this build" % family)
    name = FAMILIES[family - 1] if family else None
    want = len(FAMILY_IDS[name]) if name else 0
    if n != want:
        raise ValueError("chat section: n_ids is %d, but family %s has %d" % (n, name or "0 (none)", want))
    if len(data) < 12 + 4 * n:
        raise ValueError("chat section: truncated in its ids (%d bytes)" % len(data))
    ids = list(struct.unpack_from("<%di" % n, data, 8))
    for k, i in enumerate(ids):
        if not 0 <= i < n_pieces:
            raise ValueError("chat section: id %d is %d, outside the vocabulary of %d" % (k, i, n_pieces))
    (length,) = struct.unpack_from("<I", data, 8 + 4 * n)
    at = 12 + 4 * n
    rest = len(data) - at
    if version >= 5 and (rest < 4 or length > rest - 4):
        raise ValueError("chat section: its text is %d bytes, but %d remain before the template's length"
                         % (length, rest))
    if version < 5 and length != rest:
        raise ValueError("chat section: its text is %d bytes, but %d remain" % (length, rest))
    if not name and length:
        raise ValueError("chat section: family 0 (none) has a text of %d bytes" % length)
    text = _utf8("text", data[at:at + length])
    if version < 5:
        return name, ids, text, ""
    at += length
    (template_len,) = struct.unpack_from("<I", data, at)
    at += 4
    if template_len != len(data) - at:
        raise ValueError("chat section: its template is %d bytes, but %d remain" % (template_len, len(data) - at))
    return name, ids, text, _utf8("template", data[at:])


def read_template(folder):
    """The chat template a Hugging Face folder carries (chat_template.jinja, else
    tokenizer_config.json's chat_template, the "default" one of a list), or None."""
    import json
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja):
        with open(jinja, encoding="utf-8") as f:
            return f.read()
    path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        t = json.load(f).get("chat_template")
    if isinstance(t, list):
        t = {d.get("name"): d.get("template") for d in t if isinstance(d, dict)}.get("default")
    if t is not None and not isinstance(t, str):
        raise ValueError("%s: chat_template is not a string or a list of named templates" % path)
    return t
