// The oracle of tests/test_pretokenizer.c: @lenml/tokenizers' own pre-tokenizers and NFC
// normalizer, built from the tokenizer.json entries the families ship, the pre-tokenizers made
// to follow Hugging Face's Rust (tests/oracle/rust_semantics.cjs).
// usage: node tests/pretokenizer_oracle.js PACKAGE_DIR IN OUT
// IN: one case a line, "MODE HEX": MODE 0..3 a split (TOK_PRE_GPT2, _LLAMA3, _QWEN2,
// _DIGITS_GPT2), 4 NFC; HEX the text's UTF-8, in which the test has spelled each byte B that is
// not well-formed UTF-8 as U+E000 + B (private use: neither letter, number nor space, and inert
// under NFC, as such a byte is to tokenizer.c). OUT: a line per case: the chunks' end offsets
// in the test's bytes, or the NFC text's hex, each U+E000 + B turned back into B.
'use strict';
const fs = require('fs');
const { TokenizerLoader } = require(require('path').resolve(process.argv[2]));
const { patchPreTokenizer } = require('./oracle/rust_semantics.cjs');

function tokenizer(preTokenizer, normalizer) {
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: {
      normalizer, pre_tokenizer: preTokenizer, added_tokens: [], post_processor: null, decoder: null,
      model: { type: 'BPE', vocab: { a: 0 }, merges: [] },
    },
    tokenizerConfig: {},
  });
}

// As in Llama 3's and Qwen's tokenizer.json: the regex split, then bytes to characters.
const byteLevel = (useRegex) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
const split = (regex) => ({
  type: 'Sequence',
  pretokenizers: [{ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false }, byteLevel(false)],
});
const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2 = LLAMA3.replace('\\p{N}{1,3}', '\\p{N}');
const splits = [
  byteLevel(true),
  split(LLAMA3),
  split(QWEN2),
  { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] },
].map((p) => patchPreTokenizer(tokenizer(p, null).pre_tokenizer));
const nfc = tokenizer(null, { type: 'NFC' }).normalizer;

const isStandIn = (cp) => cp >= 0xE080 && cp <= 0xE0FF;
const utf8Len = (cp) => (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);

// The chunks (byte-level strings: a character per byte) as end offsets in the test's bytes.
function ends(text, chunks) {
  const at = new Map([[0, 0]]); // UTF-8 offset at a character boundary -> the test's offset
  let u = 0, o = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    u += utf8Len(cp);
    o += isStandIn(cp) ? 1 : utf8Len(cp);
    at.set(u, o);
  }
  let end = 0;
  return chunks.map((c) => at.get((end += c.length))).join(' ');
}

function bytesHex(text) {
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    out += isStandIn(cp) ? (cp - 0xE000).toString(16) : Buffer.from(ch, 'utf8').toString('hex');
  }
  return out;
}

const out = [];
for (const line of fs.readFileSync(process.argv[3], 'latin1').split('\n')) {
  if (!line) continue;
  const [mode, hex] = line.split(' ');
  const text = Buffer.from(hex, 'hex').toString('utf8');
  out.push(mode === '4' ? bytesHex(nfc.normalize(text)) : ends(text, splits[+mode].pre_tokenize(text)));
}
fs.writeFileSync(process.argv[4], out.join('\n') + '\n');
