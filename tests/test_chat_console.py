"""./run -m chat on a terminal, driven through a pseudo-terminal as a person types: the line editor
(chat/console.c on libedit) with its arrows, word motions and Ctrl keys; the history kept across two
sessions in a file under $HOME; a bracketed paste of 10,000 bytes over several lines arriving as
one message of exactly those bytes; every command; Ctrl-C in the middle of a reply; a message too
long for the context refused with the conversation, as /save writes it, byte for byte the same and
its text back on the line. The model is SmolLM2-Instruct's published config cut to one small random
layer with its real tokenizer and ChatML template, as tests/test_chat.py builds it; what the
conversation holds is read back from /save files, and what the screen shows through a terminal
emulator (python3-pyte).
Run from the repository root: /usr/bin/python3 tests/test_chat_console.py [-k SUBSTRING]
"""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

import pyte  # Debian's python3-pyte: a terminal emulator, to read what the screen shows

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
import chat_models  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-console-")
PY = "/usr/bin/python3"
RUN = os.path.join(ROOT, "run")
MODEL = os.path.join(TMP, "smol.bin")
SAMPLED = os.path.join(TMP, "sampled.bin")  # the same weights, with Qwen3's sampling defaults in the file
WIDE = os.path.join(TMP, "wide.bin")  # the same at width 512: a prompt of 7,000 tokens takes seconds
# The prompt marker as the line editor draws it, last on the screen while it waits for a line: after
# bracketed paste is turned on, and once the terminal is in its raw mode (a key typed earlier would
# be the terminal's own line editing's).
PROMPT = rb"\x1b\[\?2004h> $"
case = pycase.Cases()

# The keys as a terminal in xterm's mode sends them.
LEFT, RIGHT, UP, DOWN = b"\x1b[D", b"\x1b[C", b"\x1b[A", b"\x1b[B"
CTRL_LEFT = b"\x1b[1;5D"
CTRL = {k: bytes([ord(k) - 64]) for k in "ACDEKUWY"}
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"


@case
def build():
    """SmolLM2-135M-Instruct's directory cut to 1 layer of width 64, through convert.py."""
    chat_models.build_smol(os.path.join(TMP, "smol"), MODEL)


@case
def build_sampled():
    """The small model again, its generation_config.json giving Qwen3-0.6B's sampling settings."""
    chat_models.build_smol(os.path.join(TMP, "sampled"), SAMPLED,
                           sampling=dict(do_sample=True, temperature=0.6, top_k=20, top_p=0.95))


@case
def build_wide():
    """The same at width 512, through convert.py."""
    chat_models.build_smol(os.path.join(TMP, "wide"), WIDE, width=512)


class Session:
    """./run -m chat on a new pseudo-terminal, HOME at home (the history file's place); its standard
    output redirected to the file stdout when one is named, as `./run ... > out.txt` does."""

    def __init__(self, *args, home=None, model=MODEL, stdout=None, term="xterm", cols=80, shell=False):
        self.home = home or os.path.join(TMP, "home")
        self.screen = b""  # everything the terminal has shown
        self.vt = pyte.Screen(cols, 24)  # what the screen shows now, as a terminal emulator draws it
        self.vt_in = pyte.ByteStream(self.vt)
        self.command = [RUN, model, "-j", "1", "-m", "chat", "-s", "7"] + list(args)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: run on the terminal
            os.environ.update(HOME=self.home, TERM=term, PS1="$ ")
            os.environ.pop("XDG_STATE_HOME", None)
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
            if stdout:
                os.dup2(os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            if shell:  # a shell with job control, where the command is to be typed
                os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])
            os.execv(RUN, self.command)

    def shown(self, chunk):
        self.screen += chunk
        self.vt_in.feed(chunk)

    def resize(self, cols):
        """The window made cols wide, as a terminal emulator does: its rows cut (as xterm does), and
        the kernel signals the foreground."""
        self.vt.resize(24, cols)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))

    def rows(self):
        """The screen's text rows, and the cursor (row, column)."""
        return [line.rstrip() for line in self.vt.display], (self.vt.cursor.y, self.vt.cursor.x)

    def until(self, pattern, timeout=60, start=None, limit=600):
        """What the terminal shows from here up to and including the first match of pattern (. matches
        newlines too). A hang is timeout seconds with nothing new on the terminal, not a total time:
        a long prompt's progress on a slow machine (the sanitizers' build) is not one. limit bounds
        the whole wait."""
        start, first = len(self.screen) if start is None else start, time.time()
        last = first
        while not re.search(pattern, self.screen[start:], re.S):
            left = min(last + timeout, first + limit) - time.time()
            assert left > 0, "no %r, and nothing new for %d s (or %d s in all); the terminal shows %r" % (
                pattern, timeout, limit, self.screen[-600:])
            if select.select([self.fd], [], [], left)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child is gone
                    chunk = b""
                assert chunk, "the terminal closed; it showed %r" % self.screen[-600:]
                self.shown(chunk)
                last = time.time()
        return self.screen[start:]

    def type(self, keys, then=PROMPT):
        """Types keys, as a terminal sends them, and waits for then. A long paste goes in pieces, what
        the terminal shows read meanwhile, so that neither side waits on a full buffer."""
        start = len(self.screen)
        for at in range(0, len(keys), 1024):
            os.write(self.fd, keys[at:at + 1024])
            while select.select([self.fd], [], [], 0)[0]:
                self.shown(os.read(self.fd, 65536))
        return self.until(then, start=start) if then else self.screen[start:]

    def turn(self, text):
        """Sends a message and waits for its reply and the next prompt."""
        return self.type(text + b"\r", rb"\[prompt: .*" + PROMPT)

    def save(self, name):
        """/save's file: (its bytes, its messages as [(role, content)])."""
        path = os.path.join(TMP, name)
        self.type(b"/save " + path.encode() + b"\r", rb"saved to .*" + PROMPT)
        data = open(path, "rb").read()
        return data, [(m["role"], m["content"]) for m in json.loads(data)]

    def end(self, keys=CTRL["D"]):
        """Types keys that end the session; its exit status, the terminal read to the end."""
        os.write(self.fd, keys)
        end = time.time() + 60
        while True:
            left = end - time.time()
            assert left > 0 and select.select([self.fd], [], [], left)[0], \
                "still running 60 s after %r; the terminal shows %r" % (keys, self.screen[-600:])
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the child is gone
                break
            if not chunk:
                break
            self.screen += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.pid = 0
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)

    def kill(self):
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            os.close(self.fd)
            self.pid = 0


def session(*args, **kw):
    s = Session(*args, **kw)
    s.until(PROMPT)
    return s


def stats(screen):
    """[(prompt tokens run, reused from the cache)] of each reply the screen shows."""
    return [(int(a), int(b)) for a, b in re.findall(rb"prompt: (\d+) tok in [\d.]+ s, (\d+) reused", screen)]


@case(needs=[build])
def banner_and_quiet():
    """On a terminal a banner names the model, the format, the context (SmolLM2's 8192 held to the default
    4096) and the seed, and how to get help and quit; -q shows none, nor the timings after a reply."""
    s = Session("-t", "0", "-n", "4", "--no-history")
    try:
        shown = s.until(PROMPT)
        assert re.search(rb"attn.c chat: .*smol.bin, chatml format, context 4096, seed 7\r\n"
                         rb"/help for commands, Ctrl-D to quit\r\n", shown), shown
        s.turn(b"Hi")
        assert s.end() == 0
    finally:
        s.kill()
    s = Session("-t", "0", "-n", "4", "--no-history", "-q")
    try:
        assert b"attn.c chat" not in s.until(PROMPT)
        shown = s.type(b"Hi\r")
        assert b"[prompt:" not in shown and b"\r\n\r\n" in shown, shown
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def editing_and_history():
    """Arrows, Ctrl-A/E/K/U/W and Ctrl-Left edit the line as typed; the lines sent are recalled
    with Up in a second session with the same HOME (the history file under it), and a session with
    --no-history writes none."""
    home = os.path.join(TMP, "home_history")
    s = session("-t", "0", "-n", "4", home=home)
    try:
        s.turn(b"helo" + LEFT + LEFT + b"l")  # "hello"
        s.turn(b"abc def" + CTRL["W"] + b"xyz" + CTRL["A"] + b"<" + CTRL["E"] + b">")  # "<abc xyz>"
        s.turn(b"one two three" + CTRL_LEFT + CTRL["K"] + b"four" + LEFT * 4 + CTRL["U"] + b"(" + RIGHT * 4 + b")")
        _, msgs = s.save("history1.json")
        assert [c for r, c in msgs if r == "user"] == ["hello", "<abc xyz>", "(four)"], (msgs, s.screen[-3000:])
        assert s.end() == 0
    finally:
        s.kill()
    history = os.path.join(home, ".local", "state", "attn.c", "chat_history")
    assert os.path.exists(history), os.listdir(home)
    s = session("-t", "0", "-n", "4", home=home)
    try:
        # Up goes back over the /save line to "(four)", again to "<abc xyz>"; Down comes back
        s.turn(UP + UP + UP + DOWN)
        s.turn(UP + UP + UP + UP + UP + b"!")  # "hello!": the first session's first line
        _, msgs = s.save("history2.json")
        assert [c for r, c in msgs if r == "user"] == ["(four)", "hello!"], msgs
        assert s.end() == 0
    finally:
        s.kill()
    home2 = os.path.join(TMP, "home_none")
    s = session("-t", "0", "-n", "4", "--no-history", home=home2)
    try:
        s.turn(b"hi")
        assert s.end() == 0
        assert not os.path.exists(os.path.join(home2, ".local")), "--no-history wrote a history"
    finally:
        s.kill()


@case(needs=[build])
def history_of_two_sessions():
    """Two sessions at once with the same HOME: the first sends A, the second B, the first C; the
    history file keeps all three in the order typed, and a third session recalls C, B, A with Up. The
    file held 2,000 lines before: past that it is cut to its newest 1,000, and stays private (0600)."""
    home = os.path.join(TMP, "home_two")
    history = os.path.join(home, ".local", "state", "attn.c", "chat_history")
    os.makedirs(os.path.dirname(history))
    with open(history, "w") as f:
        f.write("_HiStOrY_V2_\n" + "".join("old%d\n" % i for i in range(2000)))
    one, two = session("-t", "0", "-n", "2", home=home), session("-t", "0", "-n", "2", home=home)
    try:
        one.turn(b"alpha")
        two.turn(b"bravo")
        one.turn(b"charlie")
        assert one.end() == 0 and two.end() == 0
    finally:
        one.kill()
        two.kill()
    lines = open(history).read().split("\n")
    assert lines[1:] == ["old%d" % i for i in range(1001, 2000)] + ["alpha", "bravo", "charlie", ""], lines[-6:]
    assert os.stat(history).st_mode & 0o777 == 0o600
    s = session("-t", "0", "-n", "2", home=home)
    try:
        s.turn(UP * 3)
        assert s.save("history_three.json")[1][0] == ("user", "alpha")
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def paste_is_one_message():
    """A bracketed paste of 10,000 bytes over several lines (UTF-8 and tabs among them) is one
    message of exactly those bytes, typed text before and after it on the same line, with one reply;
    the terminal's \\r line endings become \\n. Typed without bracketed paste, a block between \"\"\"
    lines is one message too."""
    line = "The quick brown fox jumps over the lazy dog; caf\u00e9 \u4e16\u754c\tend."
    body = ""
    while len(body.encode()) < 10000:
        body += line + "\n"
    body = body.encode()[:10000].decode("utf-8", "ignore")
    body = body + "x" * (10000 - len(body.encode()))
    assert len(body.encode()) == 10000 and body.count("\n") > 100
    s = session("-t", "0", "-n", "4", "--no-history")
    try:
        s.turn(b"before " + PASTE_START + body.replace("\n", "\r").encode() + PASTE_END + b" after")
        s.turn(b'"""\r' + b"first line\r" + b"  second line\r" + b'"""\r'[:-1])
        _, msgs = s.save("paste.json")
        assert [r for r, _ in msgs] == ["user", "assistant"] * 2, [r for r, _ in msgs]
        assert msgs[0][1] == "before " + body + " after", "the paste arrived as %d bytes" % len(msgs[0][1].encode())
        assert msgs[2][1] == "first line\n  second line", msgs[2]
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def invalid_utf8_paste():
    """Pasted bytes that are not UTF-8 go on the line as typed ones do, each bad sequence as U+FFFD:
    the paste of x C3 ( y LF TAB z and the same bytes typed send the same message."""
    s = session("-t", "0", "-n", "2", "--no-history")
    try:
        s.turn(PASTE_START + b"x\xc3(y\r\tz" + PASTE_END)
        s.turn(b"a\xc3(b \xf5 \xe4\xb8")
        _, msgs = s.save("invalid_utf8.json")
        assert [c for r, c in msgs if r == "user"] == ["x\ufffd(y\n\tz", "a\ufffd(b \ufffd \ufffd"], msgs
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def unknown_keys_and_dumb_terminal():
    """Keys the console does not bind (Insert, PageUp, F5, F1, Shift-Up, Alt-Left) insert nothing. With
    TERM=dumb the console writes no escape codes (no bracketed paste), and Home still edits the line."""
    s = session("-t", "0", "-n", "2", "--no-history")
    try:
        s.turn(b"ab" + b"\x1b[2~" + b"\x1b[5~" + b"\x1b[15~" + b"\x1bOP" + b"\x1b[1;2A" + b"\x1b[1;3D" + b"cd")
        assert s.save("unknown_keys.json")[1][0] == ("user", "abcd")
        assert s.end() == 0
    finally:
        s.kill()
    s = Session("-t", "0", "-n", "2", "--no-history", term="dumb")
    try:
        s.until(rb"> $")
        s.type(b"abc" + b"\x1b[H" + b"X\r", rb"\[prompt: .*> $")
        s.type(b"/save " + os.path.join(TMP, "dumb.json").encode() + b"\r", rb"saved to .*> $")
        assert json.load(open(os.path.join(TMP, "dumb.json")))[0]["content"] == "Xabc"
        assert s.end() == 0
        assert b"\x1b" not in s.screen, s.screen
    finally:
        s.kill()


@case(needs=[build])
def commands():
    """Each command: /help and /? list them all; /show; /set checked as the flags are; /system;
    /clear keeps the system prompt; /save and /load; /regen samples the last reply again; /undo
    drops the last exchange and the next turn reuses the cache up to it; /think on a format that
    does not think; an unknown command; // sends one slash; /bye, /exit and /quit with spaces
    around them end the session."""
    s = session("-t", "1", "-n", "6", "-y", "Be brief.", "--no-history")
    try:
        shown = s.type(b"/help\r")
        names = [b"/help", b"/?", b"/bye", b"/exit", b"/quit", b"/clear", b"/system", b"/set", b"/show", b"/save",
                 b"/load", b"/regen", b"/undo", b"/think", b"/no_think", b"//"]
        assert all(n in shown for n in names), shown
        shown = s.type(b"/?\r")
        assert all(n in shown for n in names), shown
        assert b"[max_tokens is 3]" in s.type(b"/set max_tokens 3\r")
        assert b"temperature 5000: expected a number in [0, 100]" in s.type(b"/set temperature 5000\r")
        assert b"NAME is temperature" in s.type(b"/set nonsense 1\r")
        shown = s.type(b"/show\r")
        for want in (b"model: " + MODEL.encode(), b"chat format: chatml", b"context: 4096 tokens, 0 used, 4096 left",
                     b"temperature 1", b"max_tokens 3", b"seed 7"):
            assert want in shown, (want, shown)
        assert re.search(rb"reply: 3 tok,", s.turn(b"Hello"))
        first = s.save("c1.json")[1]
        s.type(b"/regen\r", rb"\[prompt: .*" + PROMPT)
        again = s.save("c2.json")[1]
        assert again[:2] == first[:2] and again[2] != first[2] and len(again) == 3, (first, again)
        s.turn(b"//etc")
        c3, msgs = s.save("c3.json")
        assert msgs[3] == ("user", "/etc") and len(msgs) == 5, msgs
        used = lambda: int(re.search(rb"context: 4096 tokens, (\d+) used", s.type(b"/show\r")).group(1))
        before = used()
        assert b"[the last exchange is undone]" in s.type(b"/undo\r")
        assert s.save("c4.json")[1] == again
        after = used()
        assert after < before, "the cache did not rewind: %d used before /undo, %d after" % (before, after)
        assert stats(s.turn(b"//etc"))[0][1] == after, "the next turn did not reuse the cache up to the undo"
        assert b"unknown command; /help lists them" in s.type(b"/frob\r")
        assert b"only the qwen3 chat format thinks; this one is chatml" in s.type(b"/no_think\r")
        s.type(b"/system Answer in French.\r")
        assert s.save("c5.json")[1][0] == ("system", "Answer in French.")
        assert b"[a new conversation]" in s.type(b"/clear\r")
        assert s.save("c6.json")[1] == [("system", "Answer in French.")]
        loaded = s.type(b"/load " + os.path.join(TMP, "c3.json").encode() + b"\r")
        assert b"[5 messages loaded" in loaded, loaded
        assert s.save("c7.json")[0] == c3, "/load then /save changed the conversation"
        with open(os.path.join(TMP, "ask.json"), "w") as f:
            json.dump([{"role": "user", "content": "A question?"}], f)
        shown = s.type(b"/load " + os.path.join(TMP, "ask.json").encode() + b"\r", rb"\[prompt: .*" + PROMPT)
        assert [r for r, _ in s.save("c8.json")[1]] == ["user", "assistant"], "a loaded question was not answered"
        assert b"cannot read" in s.type(b"/load " + os.path.join(TMP, "nope.json").encode() + b"\r")
        assert s.end(b"  /bye  \r") == 0
    finally:
        s.kill()
    for quit in (b"/exit\r", b" /quit\r"):
        s = session("--no-history")
        try:
            assert s.end(quit) == 0
        finally:
            s.kill()


@case(needs=[build])
def system_prompt_commands():
    """/system alone shows the system prompt and keeps it; /show system prints it, /show says it is
    there; /set system TEXT (Ollama's spelling) sets it as /system TEXT does; /clear system removes it."""
    s = session("-y", "Be brief.", "--no-history")
    try:
        assert b"Be brief." in s.type(b"/system\r")
        assert s.save("system1.json")[1] == [("system", "Be brief.")], "/system alone removed the system prompt"
        assert re.search(rb"\r\n(\x1b\[\?2004l)?Be brief\.\r\n", s.type(b"/show system\r"))
        assert b"system prompt: 9 bytes" in s.type(b"/show\r")
        assert b"[the system prompt is set]" in s.type(b"/set system Answer in  French.\r")
        assert s.save("system2.json")[1] == [("system", "Answer in  French.")]
        assert b"[the system prompt is removed]" in s.type(b"/clear system\r")
        assert s.save("system3.json")[1] == []
        assert b"no system prompt" in s.type(b"/show system\r")
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build, build_sampled])
def sampling_defaults_of_the_model():
    """A model converted with generation_config.json's temperature 0.6, top_k 20, top_p 0.95 samples
    with them unless a flag says otherwise: the banner names them and their source, /show gives every
    setting's source (model, flag, /set, default), --export-hf writes them back to generation_config.json,
    and -m generate draws what the same weights draw with those flags. A model file without them keeps
    ./run's defaults."""
    s = session("-n", "2", "--no-history", model=SAMPLED)
    try:
        assert b"sampling: temperature 0.6 (model), top_p 0.95 (model), top_k 20 (model)\r\n" in s.screen, s.screen
        shown = s.type(b"/show\r")
        for want in (b"temperature 0.6 (model)", b"top_p 0.95 (model)", b"top_k 20 (model)", b"min_p 0 (default)",
                     b"repeat_penalty 1 (default)"):
            assert want in shown, (want, shown)
        assert b"[top_k is 5 (/set)]" in s.type(b"/set top_k 5\r")
        assert s.end() == 0
    finally:
        s.kill()
    s = session("-n", "2", "-t", "0.8", "--no-history", model=SAMPLED)
    try:
        assert b"sampling: temperature 0.8 (flag), top_p 0.95 (model)" in s.screen, s.screen
        assert b"temperature 0.8 (flag)" in s.type(b"/show\r")
        assert s.end() == 0
    finally:
        s.kill()
    s = session("-n", "2", "--no-history")
    try:
        assert b"sampling:" not in s.screen
        shown = s.type(b"/show\r")
        assert b"temperature 1 (default)" in shown and b"top_k 0 (default)" in shown, shown
        assert s.end() == 0
    finally:
        s.kill()
    run = lambda model, *flags: subprocess.run([RUN, model, "-j", "1", "-i", "Once", "-n", "12", "-s", "5", "-q"] +
                                               list(flags), capture_output=True).stdout
    exported = os.path.join(TMP, "sampled_hf")
    r = subprocess.run([PY, os.path.join(ROOT, "tools", "convert.py"), SAMPLED, exported, "--export-hf"],
                       capture_output=True, text=True)
    gen = json.load(open(os.path.join(exported, "generation_config.json")))
    assert r.returncode == 0 and {k: gen.get(k) for k in ("do_sample", "temperature", "top_k", "top_p")} == \
        dict(do_sample=True, temperature=0.6, top_k=20, top_p=0.95), (r.stderr, gen)
    own = run(SAMPLED)
    assert own == run(MODEL, "-t", "0.6", "-k", "20", "-p", "0.95"), "the model's defaults were not used"
    assert own != run(MODEL), "the defaults make no difference here: the check above proves nothing"


@case(needs=[build])
def smaller_things():
    """The smaller findings of issue 42: a command given an argument it does not take is refused in one
    line (and does nothing); /set NAME with no value says so; the model line shows at load, before the
    first prompt; each timing line fits 80 columns; /save ~/FILE writes under $HOME, private (0600); a
    refused message goes into the history, so that Up brings it back after a Ctrl-C dropped it from the
    line; Ctrl-D echoes no ^D. With -q and a seed from the clock, the seed shows before the first prompt,
    not inside the first reply."""
    home = os.path.join(TMP, "home_small")
    s = Session("-t", "0", "-n", "8", "-c", "100", home=home)
    try:
        shown = s.until(PROMPT)
        assert re.search(rb"smol\.bin: 1 layer, dim 64, .*loaded in", shown), shown
        for typed, said in ((b"/bye now", b"[/bye takes no argument; nothing was done]"),
                            (b"/clear x", b"[/clear takes no argument but system; nothing was done]"),
                            (b"/think extra", b"[/think takes no argument; nothing was done]"),
                            (b"/set temperature", b"[/set temperature needs a value]")):
            assert said in s.type(typed + b"\r"), (typed, s.screen[-300:])
        shown = s.turn(b"hi")
        assert all(len(line) <= 80 for line in re.findall(rb"\[prompt:[^\r]*", shown)), shown
        assert b"[1 message" not in s.type(b"/save ~/conv.json\r", rb"saved to .*" + PROMPT)
        saved = os.path.join(home, "conv.json")
        assert json.load(open(saved))[0]["content"] == "hi" and os.stat(saved).st_mode & 0o777 == 0o600
        s.type(b"word " * 200 + b"\r", rb"not sent: .*> .*word word")
        s.type(b"\x03", rb"Ctrl-D or /bye ends the conversation.*" + PROMPT)
        s.type(UP, rb"word word word")
        s.type(CTRL["U"], None)
        at = len(s.screen)
        assert s.end() == 0
        assert b"^D" not in s.screen[at:], s.screen[at:]
    finally:
        s.kill()
    s = Session("-t", "1", "-n", "2", "-q", "-s", "0", "--no-history")
    try:
        assert re.search(rb"seed \d+, from the clock", s.until(PROMPT))
        assert b"seed" not in s.type(b"hi\r", rb"\r\n\r\n.*" + PROMPT)
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def ctrl_d_in_a_block():
    """Ctrl-D in a triple-quote block does not end the session: the block comes back on the line, closed, and
    Enter sends its lines as one message; Ctrl-D on an empty line still ends with status 0."""
    s = session("-t", "0", "-n", "2", "--no-history")
    try:
        s.type(b'"""\r' + b"first line\r" + b"second line\r", rb"\.\.\. $")
        shown = s.type(CTRL["D"], rb"back on the line.*> .*second line")
        assert b"not closed" not in shown, shown
        s.turn(b"")
        _, msgs = s.save("block.json")
        assert msgs[0] == ("user", "first line\nsecond line"), msgs
        assert s.end() == 0
    finally:
        s.kill()


# Not in make test-asan: there, with another test running beside it, the key twice failed to stop
# the reply, though it does under ASan alone and in every plain run, where the case stays.
@(case(needs=[build]) if not os.environ.get("ATTN_ASAN_SUITE") else (lambda f: f))
def ctrl_c_mid_reply():
    """Ctrl-C while a long reply streams stops it; what was written stays in the conversation, and the
    next turn is answered. At the prompt, Ctrl-C drops the line and says how to end."""
    # 8000 tokens take seconds even on an idle machine (1000 took 0.3 s, which a busy one could
    # spend before the Ctrl-C is typed)
    s = session("-t", "0", "-n", "8000", "--no-history")
    try:
        s.type(b"Write a very long story.\r", rb"story\.\r\n.{200}")
        shown = s.type(b"\x03", rb"; Ctrl-C\].*" + PROMPT)
        assert b"context full" not in shown
        s.turn(b"And another?")
        # at the prompt Ctrl-C drops the line typed so far and says how to quit
        assert b"Ctrl-D or /bye ends the conversation" in s.type(b"half a line" + b"\x03")
        _, msgs = s.save("ctrl_c.json")
        assert [r for r, _ in msgs] == ["user", "assistant", "user", "assistant"] and msgs[1][1], msgs
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def refused_message_changes_nothing():
    """With -c 100, after two turns, a message too long for the context is refused: the conversation
    as /save writes it is byte for byte the same, no turn is dropped, the cache is kept (the next
    turn reuses all of it), and the refused text is back on the line to edit (here sent with an
    edit, now short enough)."""
    s = session("-t", "0", "-n", "8", "-c", "100", "--no-history")
    try:
        s.turn(b"hi")
        before_stats = stats(s.turn(b"ok"))
        before, _ = s.save("before.json")
        long = b"word " * 200
        shown = s.type(long + b"\r", rb"not sent: .*> .*word word")
        assert b"dropped" not in shown, shown
        s.type(CTRL["U"], None)  # the line, cut (it can be yanked back)
        after, _ = s.save("after.json")
        assert after == before, "the refused message changed the conversation"
        # yanked back and edited: a short message in place of its words
        shown = s.turn(CTRL["Y"] + CTRL["A"] + b"one more" + CTRL["K"])
        assert b"dropped" not in shown, shown
        ran, reused = stats(shown)[0]
        assert reused >= sum(before_stats[0]) - 4, (stats(shown), before_stats)
        _, msgs = s.save("after2.json")
        assert msgs[-2] == ("user", "one more"), msgs
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build_wide])
def ctrl_c_mid_prompt():
    """A pasted message of 7,000 tokens: its progress shows while the prompt runs ("prompt 512 / 7,0xx
    tokens"); Ctrl-C stops it within a batch, erases the progress, and leaves the conversation as /save
    writes it byte for byte the same, the message back on the line and the cache as before; Enter sends
    it again, and its prompt picks up where the Ctrl-C stopped it."""
    words = ("alpha beta gamma delta river stone cloud light " * 875).strip()
    s = session("-t", "0", "-n", "4", "--no-history", "-c", "8192", model=WIDE)  # above the default 4096
    try:
        before_stats = stats(s.turn(b"hi"))
        before, _ = s.save("before_prompt.json")
        s.type(PASTE_START + words.encode() + PASTE_END + b"\r", rb"prompt [1-9][\d,]* / 7,0\d\d tokens")
        t = time.time()
        shown = s.type(b"\x03", rb"stopped by Ctrl-C.*the message is back on the line\]\r\n.*> .*light")
        took = time.time() - t
        assert b"[prompt:" not in shown, "the prompt ran to the end and was answered: %r" % shown[-600:]
        assert re.search(rb"\r +\r\[stopped", shown), "the progress was not erased: %r" % shown[:300]
        assert took < 3, "Ctrl-C took %.1f s to stop the prompt" % took
        s.type(CTRL["U"], None)  # the line, cut (it can be yanked back)
        after, _ = s.save("after_prompt.json")
        assert after == before, "the stopped message changed the conversation"
        ran, reused = stats(s.turn(CTRL["Y"]))[0]
        assert reused > sum(before_stats[0]), "the prompt started again from %d, not where it stopped" % reused
        _, msgs = s.save("after_prompt2.json")
        assert msgs[-2] == ("user", words) and len(msgs) == 4, [(r, len(c)) for r, c in msgs]
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def stdout_redirected():
    """./run -m chat > out.txt on a terminal: the prompt, the echo of what is typed and the notes are
    on the terminal; out.txt holds the replies and nothing else (no escape codes)."""
    out = os.path.join(TMP, "replies.txt")
    s = session("-t", "0", "-n", "4", "--no-history", stdout=out)
    try:
        shown = s.turn(b"Hello there")
        assert b"Hello there" in shown, shown
        s.turn(b"again")
        assert s.end() == 0
    finally:
        s.kill()
    replies = open(out, "rb").read()
    assert b"\x1b" not in replies and b"> " not in replies and b"Hello" not in replies, replies
    assert re.fullmatch(rb"[^\n]+\n\n[^\n]+\n\n", replies), replies
    assert replies.split(b"\n\n")[0] not in s.screen, "a reply went to the terminal: %r" % s.screen


@case(needs=[build])
def ctrl_z_and_fg():
    """In bash, with job control: half a line typed, Ctrl-Z, fg. The line is drawn again, the editor's
    keys work as before (no key echoed twice, Ctrl-A moves, Ctrl-L clears rather than printing ^L),
    and the line sent is the one edited."""
    s = Session("-t", "0", "-n", "2", "--no-history", shell=True)
    try:
        s.until(rb"\$ $")
        s.type(" ".join(s.command).encode() + b"\r")
        s.type(b"partial", b"partial")
        s.type(b"\x1a", rb"Stopped.*\$ $")
        s.type(b"fg\r", rb"> partial")
        after_fg = len(s.screen)
        s.turn(b" more" + CTRL["A"] + b"<" + b"\x0c")
        shown = s.screen[after_fg:]
        assert b"^A" not in shown and b"^L" not in shown and b" more more" not in shown, shown
        _, msgs = s.save("ctrl_z.json")
        assert msgs[0] == ("user", "<partial more"), msgs
        s.type(CTRL["D"], rb"\$ $")
        assert s.end(b"exit\r") == 0
    finally:
        s.kill()


@case(needs=[build])
def resize_at_the_prompt():
    """A 100-character line typed in a window 120 wide; the window shrinks to 60; Home, "X", "Y", End,
    "Z": the screen, as a terminal emulator shows it, holds the prompt and the edited line across two
    rows, the cursor after the Z, and the line sent is the one edited."""
    line = b"abcdefghij" * 10
    s = session("-t", "0", "-n", "2", "--no-history", cols=120)
    try:
        s.type(line, line[-20:])
        s.resize(60)
        time.sleep(0.5)  # the signal delivered and the line drawn again, as a person's next key comes
        s.type(b"\x1b[H" + b"XY" + b"\x1b[F" + b"Z", b"Z")
        time.sleep(0.3)
        rows, cursor = s.rows()
        want = "> XY" + line.decode() + "Z"
        at = max(i for i, r in enumerate(rows) if r.startswith("> XY"))
        assert rows[at] + rows[at + 1] == want and rows[at + 1] == want[60:], rows
        assert cursor == (at + 1, len(want) - 60), (cursor, rows)
        s.turn(b"")
        _, msgs = s.save("resize.json")
        assert msgs[0] == ("user", want[2:]), msgs
        assert s.end() == 0
    finally:
        s.kill()


@case(needs=[build])
def speculating_on_a_terminal():
    """--lookup and --draft on a terminal: each reply's timing line gives its drafted and accepted
    counts and rate; the model as its own draft keeps every draft, turn after turn, and the
    replies are a plain session's."""
    replies = {}
    # the random model is unsure of every token: --draft-p-min 0 has it draft nonetheless
    for spec in ([], ["--lookup", "1"], ["--draft", MODEL, "--draft-p-min", "0"]):
        s = session("-t", "0", "-n", "24", "--no-history", *spec)
        try:
            shown = [s.turn(b"Hello there!"), s.turn(b"And then?")]
            counts = [re.findall(rb"; drafted (\d+), accepted (\d+) \((\d+\.\d)%\)", t) for t in shown]
            replies[tuple(spec)] = [re.sub(rb"\[prompt: [^\]]*\]", b"", t) for t in shown]
            assert s.end() == 0
        finally:
            s.kill()
        if not spec:
            assert counts == [[], []], counts
            continue
        assert all(len(c) == 1 for c in counts), shown
        for d, a, rate in (c[0] for c in counts):
            assert int(d) > 0 and abs(float(rate) - 100.0 * int(a) / int(d)) < 0.051, counts
            assert spec[0] != "--draft" or a == d, "the model drafting for itself: %s of %s kept" % (a, d)
        assert replies[tuple(spec)] == replies[()], (spec, replies[tuple(spec)], replies[()])


@case(needs=[build])
def generate_ends_its_line():
    """-m generate on a terminal ends its text with a newline (the shell's prompt on a line of its
    own); piped, stdout is exactly the text, with none added."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(RUN, [RUN, MODEL, "-j", "1", "-i", "Hello", "-n", "5", "-s", "3", "-q"])
    screen = b""
    try:
        while True:
            if not select.select([fd], [], [], 60)[0]:
                raise AssertionError("no end within 60 s: %r" % screen)
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert status == 0 and screen.startswith(b"Hello") and screen.endswith(b"\r\n"), (status, screen)
    piped = subprocess.run([RUN, MODEL, "-j", "1", "-i", "Hello", "-n", "5", "-s", "3", "-q"], capture_output=True)
    assert piped.stdout.replace(b"\n", b"\r\n") + b"\r\n" == screen, (piped.stdout, screen)


if __name__ == "__main__":
    sys.exit(case.main(TMP))
