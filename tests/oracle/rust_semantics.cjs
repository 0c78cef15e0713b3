// Hugging Face `tokenizers` (Rust) where the npm oracles, which run JavaScript regexes, part from
// it: the rewrites that make their pre-tokenizers follow it, for tests/oracle/hf_encode.mjs,
// tests/pretokenizer_oracle.js and tests/test_tokenizer_gpt2.py (docs/TOKENIZER.md, "Where
// Hugging Face's Rust and the npm oracle differ"). Each rule is spelled with JavaScript's own
// Unicode data, so no code point is listed here:
// - \s and \S: Rust's regexes run on Oniguruma, whose \s is Unicode's White_Space property:
//   U+0085 is a space there and U+FEFF is not, the other way round from JavaScript's \s.
// - (?i:'s|'t|...): transformers.js spells it '([sS]|[tT]|...), ASCII case only; Oniguruma folds
//   Unicode case, so each [xX] also takes what case-insensitive /u matching takes for x (U+017F
//   for s; U+212A for k, which no contraction has).
// - Digits: Rust splits at char::is_numeric, which is \p{N} (Nd, Nl, No); transformers.js at \d,
//   ASCII 0-9 only.
'use strict';

let asciiFolds = null; // letter -> the non-ASCII characters that case-fold to it

// The non-ASCII characters that case-insensitive /u matching (simple case folding, what a single
// character folds to under Oniguruma's full folding too) takes for the ASCII letter x.
function foldsTo(x) {
  if (!asciiFolds) {
    asciiFolds = {};
    const any = /^[a-z]$/iu;
    for (let cp = 0x80; cp < 0x110000; cp++) {
      const c = String.fromCodePoint(cp);
      if (!any.test(c)) continue;
      const x = [..."abcdefghijklmnopqrstuvwxyz"].find((l) => new RegExp(`^${l}$`, "iu").test(c));
      asciiFolds[x] = (asciiFolds[x] ?? "") + `\\u{${cp.toString(16)}}`;
    }
  }
  return asciiFolds[x] ?? "";
}

// A JavaScript regex source (u flag) with \s and \S as Oniguruma means them and, if foldCase
// (the source is transformers.js's spelling of (?i:...)), each [xX] as Oniguruma folds x.
function onigurumaSource(src, foldCase) {
  let out = "";
  for (let i = 0; i < src.length; i++) {
    if (src[i] !== "\\") {
      out += src[i];
      continue;
    }
    const e = src[++i]; // an escape: \s and \S rewritten, any other kept as it is
    out += e === "s" ? "\\p{White_Space}" : e === "S" ? "\\P{White_Space}" : "\\" + e;
  }
  if (!foldCase) return out;
  return out.replace(/\[([a-z])([A-Z])\]/g, (all, x, X) => (X === x.toUpperCase() ? `[${x}${X}${foldsTo(x)}]` : all));
}

// Makes transformers.js pre-tokenizer p (and those of a Sequence) follow Rust; returns p, and
// pushes a line per rewrite to checks. Throws on a pattern it does not know.
function patchPreTokenizer(p, checks = []) {
  if (!p) return p;
  for (const sub of p.tokenizers ?? []) patchPreTokenizer(sub, checks);
  const name = p.constructor.name;
  if (name === "DigitsPreTokenizer") {
    const want = p.config.individual_digits ? "[^\\d]+|\\d" : "[^\\d]+|\\d+";
    if (p.pattern.source !== want) throw new Error(`Digits pattern ${p.pattern.source}, not ${want}`);
    p.pattern = new RegExp(want.replaceAll("\\d", "\\p{N}"), p.pattern.flags);
    checks.push(`Digits: char::is_numeric (${p.pattern.source})`);
  } else if (name === "SplitPreTokenizer" || name === "ByteLevelPreTokenizer") {
    const regex = name === "ByteLevelPreTokenizer" ? p.use_regex : p.config.pattern.Regex !== undefined;
    if (!regex) return p;
    const foldCase = name === "SplitPreTokenizer" && p.config.pattern.Regex.includes("(?i:");
    p.pattern = new RegExp(onigurumaSource(p.pattern.source, foldCase), p.pattern.flags);
    const folded = p.pattern.source.match(/\[[a-z][A-Z]\\u[^\]]*\]/g) ?? [];
    checks.push(`${name}: Oniguruma's \\s${foldCase ? ` and case folding (${folded.join(" ")})` : ""}`);
  } else if (p.pattern) {
    throw new Error(`pre_tokenizer ${name} has a pattern with no known Rust semantics`);
  }
  return p;
}

module.exports = { onigurumaSource, patchPreTokenizer };
