// The Hugging Face tokenizer oracle for tests/test_tokenizer_hf.py: encodes texts with
// @lenml/tokenizers (a transformers.js fork that runs offline on a tokenizer.json and its
// tokenizer_config.json). With "rust" it is made to follow Hugging Face `tokenizers` (Rust,
// Oniguruma regexes) where transformers.js departs from it on these files; without it, it is
// the oracle as published (the semantics docs/TOKENIZER.md says tokenizer.c follows).
//
// usage: node hf_encode.mjs NODE_MODULES REQUEST.json > RESULT.json
// REQUEST: {"dir": folder with tokenizer.json and tokenizer_config.json,
//           "texts": path of a JSON array of strings,
//           "special_texts": optional path of a JSON array of strings to encode with the
//                            spelling of special tokens parsed as them (split_special_tokens off),
//           "bench": optional path of a text file to time encoding on,
//           "rust": optional, true for Hugging Face Rust's \s, case folding and Digits}
// RESULT:  {"ids": [[id, ...] per text], "special_ids": the same for special_texts,
//           "checks": [one line per verified patch],
//           "load_s": seconds to load, "bench_s": best of 3 encodings of the bench text,
//           "bench_ids": its ids}
// Encoding is Hugging Face's encode(text, add_special_tokens=False) with split_special_tokens on:
// no BOS, and a special token's spelling in the text is text. Non-special added tokens are still
// matched, as Hugging Face does.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const [nodeModules, requestPath] = process.argv.slice(2);
const require = createRequire(join(resolve(nodeModules), "noop.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");

const request = JSON.parse(readFileSync(requestPath, "utf8"));
const readJson = (name) => JSON.parse(readFileSync(join(request.dir, name), "utf8"));
const checks = [];

function fail(msg) {
  process.stderr.write(`hf_encode.mjs: ${request.dir}: ${msg}\n`);
  process.exit(1);
}

// Oniguruma's \s (which Hugging Face's regexes run on) is Unicode's White_Space: it has U+0085
// and not U+FEFF, where JavaScript's \s is the other way round.
const WHITE_SPACE = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

// A JavaScript regex source with \s and \S as Oniguruma means them, and the case-insensitive
// contraction s as Oniguruma folds it (U+017F LONG S folds to s; transformers.js spells (?i:'s)
// out as [sS]).
function onigSource(src) {
  let out = "", inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === "\\") {
      const e = src[i + 1];
      i++;
      if (e === "s") out += inClass ? WHITE_SPACE : `[${WHITE_SPACE}]`;
      else if (e === "S" && !inClass) out += `[^${WHITE_SPACE}]`;
      else if (e === "S") fail(`cannot rewrite \\S inside a class in ${src}`);
      else out += "\\" + e;
      continue;
    }
    if (c === "[" && !inClass) inClass = true;
    else if (c === "]" && inClass) inClass = false;
    out += c;
  }
  return out.replaceAll("[sS]", "[sS\\u017f]");
}

function patchPreTokenizer(p) {
  if (!p) return;
  for (const sub of p.tokenizers ?? []) patchPreTokenizer(sub);
  const name = p.constructor.name;
  if (name === "DigitsPreTokenizer") {
    // Rust's Digits splits at char::is_numeric (\p{N}); transformers.js at \d (ASCII only).
    p.pattern = new RegExp(p.config.individual_digits ? "[^\\p{N}]+|\\p{N}" : "[^\\p{N}]+|\\p{N}+", "gu");
    checks.push(`Digits: \\p{N} (${p.pattern.source})`);
  } else if (name === "SplitPreTokenizer" || name === "ByteLevelPreTokenizer") {
    if (name === "ByteLevelPreTokenizer" ? !p.use_regex : p.config.pattern.Regex === undefined) return;
    p.pattern = new RegExp(onigSource(p.pattern.source), p.pattern.flags);
    checks.push(`${name}: Oniguruma's \\s and case folding`);
  } else if (p.pattern) {
    fail(`pre_tokenizer ${name} has a pattern this oracle does not know how to check`);
  }
}

const loadStart = performance.now();
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson("tokenizer.json"),
  tokenizerConfig: readJson("tokenizer_config.json"),
});
const loadSeconds = (performance.now() - loadStart) / 1000;
if (request.rust) patchPreTokenizer(tok.pre_tokenizer);

// split_special_tokens: this transformers.js has no such option (it matches every added token),
// so the added-token splitter and map are rebuilt from the non-special added tokens only.
const allSplitter = tok.added_tokens_splitter, allMap = tok.added_tokens_map;
const ordinary = tok.added_tokens.filter((t) => !t.special);
const special = tok.added_tokens.filter((t) => t.special);
tok.added_tokens_splitter = new tok.added_tokens_splitter.constructor(ordinary.map((t) => t.content));
tok.added_tokens_map = new Map(ordinary.map((t) => [t.content, t]));
const ordinarySplitter = tok.added_tokens_splitter, ordinaryMap = tok.added_tokens_map;
const encode = (text) => tok.encode(text, { add_special_tokens: false });
function encodeSpecial(text) {
  [tok.added_tokens_splitter, tok.added_tokens_map] = [allSplitter, allMap];
  const ids = encode(text);
  [tok.added_tokens_splitter, tok.added_tokens_map] = [ordinarySplitter, ordinaryMap];
  return ids;
}

// Verify it: a special token's spelling alone is not that token, an ordinary added token's is.
for (const t of special) {
  const ids = encode(t.content);
  if (ids.includes(t.id)) fail(`special token ${JSON.stringify(t.content)} still matched in text: ${ids}`);
}
for (const t of ordinary) {
  const ids = encode(t.content);
  if (ids.length !== 1 || ids[0] !== t.id) fail(`added token ${JSON.stringify(t.content)} encodes as ${ids}`);
}
checks.push(`split_special_tokens: ${special.length} special tokens are text, ` +
  `${ordinary.length} ordinary added tokens match`);

const texts = JSON.parse(readFileSync(request.texts, "utf8"));
const result = { ids: texts.map(encode), checks, load_s: loadSeconds };
if (request.special_texts) {
  for (const t of special) {
    const ids = encodeSpecial(t.content);
    if (ids.length !== 1 || ids[0] !== t.id) fail(`special token ${JSON.stringify(t.content)} parsed as ${ids}`);
  }
  result.special_ids = JSON.parse(readFileSync(request.special_texts, "utf8")).map(encodeSpecial);
}
if (request.bench) {
  const text = readFileSync(request.bench, "utf8");
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    tok.model.clear_cache?.();
    const t0 = performance.now();
    result.bench_ids = encode(text);
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  result.bench_s = best;
}
process.stdout.write(JSON.stringify(result));
