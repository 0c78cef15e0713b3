// The Hugging Face tokenizer oracle for tests/test_tokenizer_hf.py: encodes texts with
// @lenml/tokenizers (a transformers.js fork that runs offline on a tokenizer.json and its
// tokenizer_config.json). With "rust" its pre-tokenizers are made to follow Hugging Face
// `tokenizers` (Rust: Oniguruma regexes, char::is_numeric) where transformers.js departs from it
// (tests/oracle/rust_semantics.cjs: \s, case folding, Digits), the semantics tokenizer.c
// follows; without it, it is the oracle as published.
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
const { patchPreTokenizer } = createRequire(import.meta.url)("./rust_semantics.cjs");

const request = JSON.parse(readFileSync(requestPath, "utf8"));
const readJson = (name) => JSON.parse(readFileSync(join(request.dir, name), "utf8"));
const checks = [];

function fail(msg) {
  process.stderr.write(`hf_encode.mjs: ${request.dir}: ${msg}\n`);
  process.exit(1);
}

const loadStart = performance.now();
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson("tokenizer.json"),
  tokenizerConfig: readJson("tokenizer_config.json"),
});
const loadSeconds = (performance.now() - loadStart) / 1000;
if (request.rust) {
  try {
    patchPreTokenizer(tok.pre_tokenizer, checks);
  } catch (e) {
    fail(e.message);
  }
}

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
