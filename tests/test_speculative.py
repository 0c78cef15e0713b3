"""./run's speculative decoding (--lookup N, --draft MODEL; generate/speculative.h) against plain runs.

Greedy: 256 tokens and more of identical text with and without --lookup and --draft, on several
targets and prompts: stories260K (float32) with its own Q8_0 file and a random model of its tokenizer
as drafts, llama2xs (a context of 256, so generation runs past it), a random model with sliding-window
layers whose context is longer than their ring (a rejected draft's rows land in the ring), and a
GGUF file of Q4_0 blocks (a verification's products take the many-row kernels, a plain step the
one-row ones).

Sampling: over 1000 samples of one run (--samples), the first tokens a speculative run draws are
distributed as a plain run's:
a chi-square test of homogeneity of the two samples at significance 0.001 per comparison, with a
draft that agrees (the target itself), one that is badly wrong (a random model of another seed), the
wrong one stopped by --draft-p-min where it is unsure, lookup drafts, and both (lookup where the text
has a match, the wrong model elsewhere), under top-k, top-p and a repetition penalty. --draft-p-min: greedy text unchanged, fewer drafts the higher it is.

bench/speculative_projection.c: its stand-in drafter keeps every draft at --accept 1, about half at
0.5, and the text is the plain run's.

Run from the repository root after `make run`: /usr/bin/python3 tests/test_speculative.py [-k SUBSTRING]
"""
import collections
import math
import random
import os
import re
import subprocess
import sys
import tempfile

from pycase import ROOT
import pycase

TMP = tempfile.mkdtemp(prefix="attn-test-speculative-")
SHARED = os.path.join(ROOT, "..", "shared", "models")
RUN = os.path.join(ROOT, "run")
PY = sys.executable
SIGNIFICANCE = 0.001
FIRST = 3  # tokens drawn a run
SEEDS = int(os.environ.get("SPEC_SEEDS", "1000"))  # samples a distribution is drawn over
ASAN = bool(os.environ.get("ATTN_ASAN_SUITE"))
# processes that --samples is compared with, one sample each; under make test-asan fewer, each
# several times slower, where the point is the C code's memory, not the comparison's power
SEPARATE_RUNS = 40 if ASAN else 200
PLAIN_SEED, FAST_SEED = 0x5DEECE66D4511, 0x2545F4914F6CDD1D  # the two runs' seeds, their draws unrelated
ANY_DRAFT = ["--draft-p-min", "0"]  # the draft model drafts however unsure it is
STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside. "
         "One day, Lily saw a big red ball in the park. Once upon a time, there was a little")

case = pycase.Cases()


def path(name):
    return os.path.join(TMP, name)


def make(name, *args):
    """A model file in TMP from tools/convert.py (a ../shared file) or tools/make_random.py."""
    out = path(name)
    if not os.path.exists(out):
        tool = "convert.py" if args[0].startswith(SHARED) else "make_random.py"
        subprocess.run([PY, os.path.join(ROOT, "tools", tool), *args, out], check=True, capture_output=True)
    return out


def tok512():
    return os.path.join(SHARED, "tok512.bin")


def stories():
    return make("stories260K.bin", os.path.join(SHARED, "stories260K.bin"), "--tokenizer", tok512())


def stories_q80():
    return make("stories260K_q80.bin", os.path.join(SHARED, "stories260K_q80.bin"), "--tokenizer", tok512())


def random_draft(seq_len):
    """A one-layer random model of tok512's tokenizer: a draft that is mostly wrong. Its distributions
    are nearly flat, so that --draft-p-min's default would let it draft nothing: the specs that use
    it give --draft-p-min 0 (ANY_DRAFT) to have its wrong drafts judged."""
    return make("draft%d.bin" % seq_len, "--preset", "llama_gqa", "--set", "seq_len=%d" % seq_len, "--set", "n_layers=1",
                "--set", "dim=32", "--set", "hidden_dim=64", "--seed", "7", "--tokenizer", tok512())


def run(model, prompt, *args):
    """./run's text and its timing line."""
    r = subprocess.run([RUN, model, "-i", prompt, *args], capture_output=True, timeout=300)
    assert r.returncode == 0, "run %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.decode()[-300:])
    return r.stdout, r.stderr.decode()


def same_greedy(model, prompt, spec, n=256, least_accepted=0):
    plain, _ = run(model, prompt, "-t", "0", "-n", str(n))
    fast, timing = run(model, prompt, "-t", "0", "-n", str(n), *spec)
    m = re.search(r"drafted (\d+), accepted (\d+) \(", timing)
    assert m, "no drafted/accepted counts in %r" % timing
    drafted, accepted = int(m.group(1)), int(m.group(2))
    assert fast == plain, "%s: the text differs from a plain run's at byte %d" % (
        " ".join(spec), next(i for i in range(min(len(fast), len(plain)) + 1) if fast[:i + 1] != plain[:i + 1]))
    assert len(plain) > len(prompt) + n // 4, "too little text to compare: %r" % plain
    assert drafted > 0 and accepted >= least_accepted, "%s: drafted %d, accepted %d" % (" ".join(spec), drafted,
                                                                                       accepted)
    return drafted, accepted


@case
def greedy_stories_lookup():
    for prompt in ["Once upon a time", STORY]:
        for spec in (["--lookup", "1"], ["--lookup", "2"], ["--lookup", "3", "--draft-max", "16"]):
            same_greedy(stories(), prompt, spec)


@case
def greedy_stories_drafts():
    # the target as its own draft keeps every draft; its Q8_0 file nearly every one
    d, a = same_greedy(stories(), "Once upon a time", ["--draft", stories()])
    assert a == d, "the target drafting for itself: %d of %d kept" % (a, d)
    for prompt in ["Once upon a time", STORY, "Tom had a dog"]:
        same_greedy(stories(), prompt, ["--draft", stories_q80()], least_accepted=1)
        same_greedy(stories(), prompt, ["--draft", random_draft(512), "--draft-max", "4", *ANY_DRAFT])


@case
def greedy_draft_p_min():
    # --draft-p-min P: no draft where the draft's most likely token is below P. The Q8_0 draft is
    # sure of most tokens, unsure of some: a higher P drafts fewer, each more often kept
    counts = {}
    for p_min in ("0", "0.75", "0.99"):
        counts[p_min] = same_greedy(stories(), STORY, ["--draft", stories_q80(), "--draft-p-min", p_min], n=300)
    (d0, a0), (d75, a75), (d99, a99) = counts.values()
    assert d0 > d75 > d99 > 0, "drafted at --draft-p-min 0, 0.75, 0.99: %d, %d, %d" % (d0, d75, d99)
    assert a0 / d0 < a75 / d75 <= a99 / d99, counts
    # --draft-p-min 1: only a draft whose softmax rounds to 1 drafts, and the text is the same
    plain, _ = run(stories(), STORY, "-t", "0", "-n", "100")
    fast, _ = run(stories(), STORY, "-t", "0", "-n", "100", "--draft", random_draft(512), "--draft-p-min", "1")
    assert fast == plain


@case
def greedy_lookup_and_draft():
    # both: the context's match drafts where it has one, the model elsewhere, its cache catching up
    # over the positions lookup drafted
    for prompt in ["Once upon a time", STORY]:
        # the Q8_0 draft, right nearly always, keeps more than lookup alone, right a fifth of the time
        _, a = same_greedy(stories(), prompt, ["--lookup", "2", "--draft", stories_q80()], n=300)
        _, lookup_a = same_greedy(stories(), prompt, ["--lookup", "2"], n=300)
        assert a > lookup_a, "--lookup 2 --draft: accepted %d, no more than lookup alone's %d" % (a, lookup_a)
        # at --draft-p-min 0 every round drafts 4, from the text or from the model, where lookup alone
        # drafts in far fewer (a round generates a token and the drafts it keeps, the first token
        # coming from the prompt's pass); the count is off by a few at the end: the last rounds cut
        # to the tokens left, or end-of-text with kept drafts after it
        spec = ["--lookup", "1", "--draft", random_draft(512), "--draft-max", "4", *ANY_DRAFT]
        d, a = same_greedy(stories(), prompt, spec, n=300)
        generated = int(re.search(r"generated: (\d+) tokens", run(stories(), prompt, "-t", "0", "-n", "300", *spec)[1])[1])
        rounds = generated - 1 - a
        assert abs(d - 4 * rounds) <= 10, "%s: drafted %d in %d rounds" % (" ".join(spec), d, rounds)


@case
def greedy_past_the_context():
    xs = make("llama2xs.bin", os.path.join(SHARED, "llama2xs_model.bin"), "--tokenizer", tok512())
    same_greedy(xs, STORY, ["--lookup", "2"], n=400)
    same_greedy(xs, "Once upon a time", ["--draft", random_draft(256), "--draft-max", "3", *ANY_DRAFT], n=400)


@case
def greedy_sliding_window_ring():
    # context 512 > the ring of 5 - 1 + 256 positions: drafts rejected past the ring's rows
    sw = make("sliding.bin", "--preset", "sliding_window", "--set", "seq_len=512", "--set", "vocab_size=512",
              "--tokenizer", tok512())
    for spec in (["--lookup", "1", "--draft-max", "64"], ["--draft", random_draft(512), *ANY_DRAFT]):
        same_greedy(sw, STORY, spec, n=480)


@case
def samples_keep_the_prompt():
    # at -t 0 every one of --samples 3 is the plain run's text: the prompt's cache rows and logits
    # kept between samples, and run again where the window moved on past the context (llama2xs)
    # or a local layer's ring went round (the sliding-window model)
    xs = make("llama2xs.bin", os.path.join(SHARED, "llama2xs_model.bin"), "--tokenizer", tok512())
    # a context of 1024 keeps a ring of 5 - 1 + 256 positions, which 400 new tokens go round
    sw = make("sliding1024.bin", "--preset", "sliding_window", "--set", "seq_len=1024", "--set", "vocab_size=512",
              "--tokenizer", tok512())
    for model, n, specs in ((stories(), 100, ([], ["--lookup", "1"], ["--draft", stories_q80()])),
                            (xs, 400, ([], ["--lookup", "2"])),
                            (sw, 400, ([], ["--draft", random_draft(1024), *ANY_DRAFT]))):
        plain, plain_err = run(model, STORY, "-t", "0", "-n", str(n))
        generated = int(re.search(r"generated: (\d+) tokens", plain_err)[1])
        for spec in specs:
            out, err = run(model, STORY, "-t", "0", "-n", str(n), "--samples", "3", *spec)
            assert out.split(b"\n---------------\n") == [plain] * 3, "--samples 3 %s: %r" % (" ".join(spec), out)
            assert "generated: %d tokens" % (3 * generated) in err and "; 3 samples" in err, err
    # sampled, the target drafting for itself keeps every draft only if the draft's cache kept the
    # prompt's rows and no stale row after them, or (its ring gone round) ran the prompt again
    for model, n in ((stories(), 100), (sw, 400)):
        _, err = run(model, "Once upon a time", "-t", "1", "-n", str(n), "--samples", "4", "--draft", model, *ANY_DRAFT)
        drafted, accepted = re.search(r"drafted (\d+), accepted (\d+)", err).groups()
        assert drafted == accepted, "--samples 4, the target its own draft: %s" % err


@case
def greedy_block_types():
    q40 = make("q4_0.bin", os.path.join(SHARED, "gguf", "rand256-Q4_0.gguf"))
    for prompt in [STORY[:60], "Lily and Lily and Lily"]:
        same_greedy(q40, prompt, ["--lookup", "1"], n=100)


@case
def greedy_lookup_repeating():
    # the model repeats ` after ab``: a match that reaches the end of the text goes on with its own
    # drafts, so a round drafts --draft-max tokens, not one, and nearly all 40 are accepted
    d, a = same_greedy(vocab99(1), "ab``", ["--lookup", "1"], n=40)
    assert a >= 30, "drafted %d, accepted %d: a repeating text should be drafted 8 tokens a round" % (d, a)


@case
def greedy_cache_and_compute_flags():
    # --compute bf16 rounds a prompt's products, not generation's: a verification is generation
    for prompt in ["Once upon a time", "The dog"]:
        same_greedy(stories(), prompt, ["--compute", "bf16", "--lookup", "1"])
        same_greedy(stories(), prompt, ["--kv-cache", "f16", "--draft", stories_q80()])


@case
def greedy_draft_trained_on_the_targets_tokenizer():
    # how a user makes a draft for their own model: ./train --tokenizer-from TARGET, at the target's
    # context; --draft then finds the same pieces, special tokens and context
    draft = path("trained_draft.bin")
    r = subprocess.run([os.path.join(ROOT, "train"), "-d", os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
                        "-o", draft, "--tokenizer-from", stories(), "--arch", "llama", "--n-layer", "1", "--n-head",
                        "2", "--n-embd", "32", "--block-size", "512", "--batch-size", "1", "--max-iters", "3",
                        "--eval-interval", "100", "--eval-iters", "1", "--no-final-eval", "--force"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, "train --tokenizer-from: %s" % r.stderr.decode()[-300:]
    for prompt in ["Once upon a time", STORY]:
        same_greedy(stories(), prompt, ["--draft", draft, "--draft-max", "4", *ANY_DRAFT])


def first_tokens(model, prompt, args, seed):
    """{text of the first tokens: count} over SEEDS samples of one run (--samples), whose draws
    follow one another from one seed: a plain run and a speculative one are given seeds far apart,
    so that their draws are independent."""
    out, _ = run(model, prompt, "-n", str(FIRST), "-s", str(seed), "--samples", str(SEEDS), "-q", *args)
    texts = out.split(b"\n---------------\n")
    assert len(texts) == SEEDS, "%d samples, not %d (a separator line inside a text?)" % (len(texts), SEEDS)
    return collections.Counter(texts)


def chi_square_p(a, b):
    """The p-value of a chi-square test that samples a and b ({outcome: count}) come from one
    distribution, outcomes expected fewer than 5 times pooled; Wilson-Hilferty's approximation."""
    na, nb = sum(a.values()), sum(b.values())
    keys, rare = [], [0, 0]
    for k in set(a) | set(b):
        x, y = a.get(k, 0), b.get(k, 0)
        if (x + y) * min(na, nb) / (na + nb) < 5:
            rare[0] += x
            rare[1] += y
        else:
            keys.append((x, y))
    if sum(rare):
        keys.append(tuple(rare))
    stat = 0.0
    for x, y in keys:
        ex, ey = (x + y) * na / (na + nb), (x + y) * nb / (na + nb)
        stat += (x - ex) ** 2 / ex + (y - ey) ** 2 / ey
    dof = len(keys) - 1
    if dof < 1:
        return 1.0
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def same_distribution(model, prompt, sampling, spec):
    plain = first_tokens(model, prompt, sampling, PLAIN_SEED)
    fast = first_tokens(model, prompt, sampling + spec, FAST_SEED)
    p = chi_square_p(plain, fast)
    assert len(plain) > 3, "too few outcomes to compare: %r" % plain
    assert p > SIGNIFICANCE, "%s %s: the first tokens' distribution differs from a plain run's (p = %.2g)" % (
        " ".join(sampling), " ".join(spec), p)


@case
def sampling_samples_as_separate_runs():
    # the cases below draw with --samples: its samples are distributed as separate runs' are, each
    # of a seed of its own (fewer of them: a process each)
    seeds = random.Random(45)
    for model, prompt, sampling in ((vocab99(1), "ab``", ["-t", "1", "-p", "1"]),
                                    (stories(), "Lily", ["-t", "1.3", "-k", "8", "-r", "1.3"])):
        separate = collections.Counter(
            run(model, prompt, "-n", str(FIRST), "-s", str(seeds.getrandbits(63) + 1), "-q", *sampling)[0]
            for _ in range(SEPARATE_RUNS))
        p = chi_square_p(separate, first_tokens(model, prompt, sampling, PLAIN_SEED))
        assert p > SIGNIFICANCE, "%s --samples: the first tokens' distribution differs from separate runs' (p = " \
                                 "%.2g)" % (" ".join(sampling), p)


@case
def sampling_agreeing_draft():
    same_distribution(stories(), "Lily", ["-t", "1.3", "-k", "8"], ["--draft", stories()])


def vocab99(seed):
    return make("vocab99_%d.bin" % seed, "--preset", "llama_gqa", "--set", "vocab_size=99", "--set", "seq_len=64",
                "--seed", str(seed))


@case
def sampling_wrong_draft():
    # two random models of one synthetic tokenizer: their distributions overlap, and differ by a
    # total variation of about 0.65 at the first token, so that the draw after a rejection matters
    same_distribution(vocab99(1), "ab", ["-t", "1", "-p", "1"], ["--draft", vocab99(2), *ANY_DRAFT])
    same_distribution(vocab99(1), "ab", ["-t", "0.8", "-k", "5", "-r", "1.2"], ["--draft", vocab99(2), *ANY_DRAFT])


@case
def sampling_draft_p_min():
    # vocab99(2)'s most likely first token has 0.62 of its probability, its next ones 0.16 to 0.94
    # after the first draw: at --draft-p-min 0.5 whether the second and third tokens are drafted
    # depends on the draws before them. A rule on the drawn token's own probability would skew them
    same_distribution(vocab99(1), "ab", ["-t", "1", "-p", "1"], ["--draft", vocab99(2), "--draft-p-min", "0.5"])
    same_distribution(vocab99(1), "ab", ["-t", "0.8", "-k", "5", "-r", "1.2"],
                      ["--draft", vocab99(2), "--draft-p-min", "0.5"])


@case
def sampling_lookup_and_draft():
    # ab`` has an earlier match of ` that lookup drafts from; once the target draws something else
    # the drafts come from the wrong model, judged against its q, not a point mass
    same_distribution(vocab99(1), "ab``", ["-t", "1", "-p", "1"], ["--lookup", "1", "--draft", vocab99(2), *ANY_DRAFT])


@case
def sampling_lookup():
    # lookup drafts ` after ab``, which the target draws about half the time: a point mass there
    same_distribution(vocab99(1), "ab``", ["-t", "1", "-p", "1"], ["--lookup", "1"])
    same_distribution(stories(), "Lily saw Lily and Lily saw", ["-t", "1.5", "-p", "0.8", "-r", "1.3", "-k", "6"],
                      ["--lookup", "1"])


# piped -m chat turns: a reply undone, one sampled again, and (at -c 200, -n 60) the oldest turns
# dropped when the context fills, so that the cache is rewound every way the conversation does it
CHAT_TURNS = "Once upon a time\nLily saw a ball\n/undo\nThe dog ran\n/regen\nTom had a cat\nThe end\n"
REPLY_LINE = re.compile(r"^\[prompt: \d+ tok .*; reply: (\d+) tok, [\d.]+ tok/s(; drafted (\d+), accepted (\d+) "
                        r"\(([\d.]+)%\))?.*\]$", re.M)


def chat(model, turns, *args):
    """Piped ./run -m chat in Llama 2's format (tok512 has its <s> and </s>): its replies, and
    (reply tokens, drafted, accepted, the rate shown) of each timing line."""
    r = subprocess.run([RUN, model, "-m", "chat", "--chat-template", "llama2", *args], input=turns.encode(),
                       capture_output=True, timeout=300)
    assert r.returncode == 0, "run -m chat %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                              r.stderr.decode()[-300:])
    err = r.stderr.decode()
    lines = [(int(m.group(1)), m.group(2) and int(m.group(3)), m.group(2) and int(m.group(4)),
              m.group(2) and float(m.group(5))) for m in REPLY_LINE.finditer(err)]
    return r.stdout, lines, err


def same_chat(model, spec, *args, self_draft=False):
    plain, plain_lines, err = chat(model, CHAT_TURNS, "-t", "0", *args)
    fast, lines, _ = chat(model, CHAT_TURNS, "-t", "0", *args, *spec)
    assert "the context is full: the oldest" in err and "[the last exchange is undone]" in err, err
    # /regen at -t 0 writes the same reply again, unless the rewind it makes read stale rows
    replies = plain.split(b"\n\n")
    assert replies[2] == replies[3], "/regen at -t 0 wrote another reply: %r, then %r" % (replies[2], replies[3])
    assert fast == plain, "-m chat %s: the replies differ from a plain chat's at byte %d" % (
        " ".join(spec), next(i for i in range(min(len(fast), len(plain)) + 1) if fast[:i + 1] != plain[:i + 1]))
    assert len(lines) == len(plain_lines) == 6, "a timing line per reply: %r" % lines
    for (tokens, drafted, accepted, rate), plain_line in zip(lines, plain_lines):
        assert plain_line[1] is None, "a plain chat's timing line tells of drafts: %r" % (plain_line,)
        assert drafted is not None, "no drafted/accepted counts after a reply: %r" % lines
        assert tokens == plain_line[0] and 0 < drafted and accepted <= drafted, lines
        assert abs(rate - 100.0 * accepted / drafted) < 0.051, lines
        # the target drafting for itself keeps every draft only if the draft's cache followed the
        # conversation's through each rewind (a stale row drafts another token)
        assert not self_draft or accepted == drafted, "%s: %d of %d kept: %r" % (" ".join(spec), accepted, drafted,
                                                                                  lines)


@case
def chat_greedy_same_replies():
    for spec in (["--lookup", "2"], ["--lookup", "1", "--draft-max", "16"], ["--draft", stories_q80()],
                 ["--lookup", "2", "--draft", stories_q80()],
                 ["--draft", random_draft(512), "--draft-max", "4", *ANY_DRAFT]):
        same_chat(stories(), spec, "-n", "60", "-c", "200")
    same_chat(stories(), ["--draft", stories()], "-n", "60", "-c", "200", self_draft=True)
    # -n 0: each reply runs until the context is full, a round's drafts cut short by its end
    plain, _, err = chat(stories(), "Once upon a time\nLily\n", "-t", "0", "-n", "0", "-c", "120")
    assert err.count("; context full]") == 2, err
    for spec in (["--lookup", "1"], ["--draft", stories_q80()]):
        fast, lines, _ = chat(stories(), "Once upon a time\nLily\n", "-t", "0", "-n", "0", "-c", "120", *spec)
        assert fast == plain and len(lines) == 2 and all(d for _, d, _, _ in lines), (spec, lines)


@case
def chat_greedy_sliding_window_ring():
    # a context of 1024 keeps a ring of 5 - 1 + 256 positions; replies of 250 tokens rewind by
    # about as much: after /undo from past the cached positions, and with a round's drafts
    # written past them
    sw = make("sliding1024.bin", "--preset", "sliding_window", "--set", "seq_len=1024", "--set", "vocab_size=512",
              "--tokenizer", tok512())
    for spec in (["--lookup", "1", "--draft-max", "64"], ["--draft", random_draft(1024), *ANY_DRAFT]):
        same_chat(sw, spec, "-n", "250", "-c", "1024")


def chat_second_replies(model, sampling, seed):
    """{the second reply: count} over SEEDS draws of it in one chat whose first reply is greedy
    (-t 0, 40 tokens, drafted too) and whose second is sampled (/set), FIRST tokens long, and
    drawn again by /regen, which rewinds the cache (and the draft's) to the end of the first."""
    turns = "Once upon a time\n/set temperature %s\n/set max_tokens %d\nLily saw a ball\n%s" % (
        sampling[0], FIRST, "/regen\n" * (SEEDS - 1))
    out, _, _ = chat(model, turns, "-t", "0", "-n", "40", "-q", "-s", str(seed), *sampling[1:])
    replies = out.split(b"\n\n")
    assert len(replies) == SEEDS + 2 and not replies[-1], "%d replies, not 1 + %d (an empty line inside one?)" % (
        len(replies) - 1, SEEDS)
    return collections.Counter(replies[1:-1])


@case
def chat_sampling_same_distribution():
    for sampling, spec in ((["1.3", "-k", "8"], ["--draft", random_draft(512), *ANY_DRAFT]),
                           (["1.5", "-k", "6", "-r", "1.3"], ["--lookup", "1"])):
        plain = chat_second_replies(stories(), sampling, PLAIN_SEED)
        fast = chat_second_replies(stories(), sampling + spec, FAST_SEED)
        p = chi_square_p(plain, fast)
        assert len(plain) > 3, "too few outcomes to compare: %r" % plain
        assert p > SIGNIFICANCE, "-m chat -t %s %s: the second reply's distribution differs from a plain chat's " \
                                 "(p = %.2g)" % (" ".join(sampling), " ".join(spec), p)


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "print-" + name], cwd=ROOT, capture_output=True,
                       text=True, check=True)
    return r.stdout.split()


# not under make test-asan: speculate() runs sanitized in every case above, and the rest of the
# program is a benchmark's, whose sanitized build alone took a minute
@(case if not ASAN else (lambda f: f))
def projection_stand_in_draft():
    # bench/speculative_projection.c's stand-in drafter (Speculator.propose) through speculate(): at
    # --accept 1 every draft is kept, at 0.5 about half; the program exits 1 if a text differs from
    # the plain run's
    exe = path("speculative_projection")
    # -O1 builds in a quarter of -O3's time (11 s, not 43): the case checks the program's logic
    subprocess.run([*make_var("CC"), *make_var("ALL_CFLAGS"), "-O1", "-I.", "-o", exe, "bench/speculative_projection.c",
                    *make_var("LDLIBS")], cwd=ROOT, check=True, capture_output=True)
    for rate, lo, hi in ((1, 1.0, 1.0), (0.5, 0.25, 0.75)):
        r = subprocess.run([exe, stories(), "--accept", str(rate), "-j", "1", "-p", "8", "-n", "160", "-r", "2"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        accepted = float(re.search(r"^accepted_median (\S+)$", r.stdout, re.M).group(1))
        assert lo <= accepted <= hi, "--accept %s: accepted %s" % (rate, accepted)


if __name__ == "__main__":
    sys.exit(case.main(TMP))
