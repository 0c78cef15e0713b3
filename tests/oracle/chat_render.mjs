// The chat template oracle for tests/test_chat_template.py: renders conversations with the real
// Jinja chat templates by @huggingface/jinja (which renders them as transformers'
// apply_chat_template does) and tokenizes the text with @lenml/tokenizers, the special tokens'
// spellings parsed as them and nothing added (add_special_tokens false), its pre-tokenizers
// following Hugging Face's Rust as in hf_encode.mjs.
//
// usage: node chat_render.mjs NODE_MODULES REQUEST.json > RESULT.json
// REQUEST: {"cases": [{"template": Jinja source, "messages": [{role, content}, ...],
//                      "bos_token": string or null, "eos_token": string or null,
//                      "dir": folder with tokenizer.json and tokenizer_config.json,
//                      "enable_thinking": true or false (optional: left undefined)}, ...]}
// RESULT:  {"results": [{"text": the rendered string, "ids": [...]} or {"error": message}, ...]}
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const [nodeModules, requestPath] = process.argv.slice(2);
const require = createRequire(join(resolve(nodeModules), "noop.js"));
const { Template } = require("@huggingface/jinja");
const { TokenizerLoader } = require("@lenml/tokenizers");
const { patchPreTokenizer } = createRequire(import.meta.url)("./rust_semantics.cjs");

const request = JSON.parse(readFileSync(requestPath, "utf8"));
const tokenizers = new Map(); // dir -> tokenizer, each loaded once
function tokenizer(dir) {
  if (!tokenizers.has(dir)) {
    const read = (name) => JSON.parse(readFileSync(join(dir, name), "utf8"));
    const tok = TokenizerLoader.fromPreTrained({
      tokenizerJSON: read("tokenizer.json"),
      tokenizerConfig: read("tokenizer_config.json"),
    });
    patchPreTokenizer(tok.pre_tokenizer, []);
    tokenizers.set(dir, tok);
  }
  return tokenizers.get(dir);
}

const results = request.cases.map((c) => {
  try {
    const context = {
      messages: c.messages,
      add_generation_prompt: true,
      bos_token: c.bos_token,
      eos_token: c.eos_token,
    };
    if ("enable_thinking" in c) context.enable_thinking = c.enable_thinking; // Qwen3's switch
    const text = new Template(c.template).render(context);
    return { text, ids: tokenizer(c.dir).encode(text, { add_special_tokens: false }) };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
});
process.stdout.write(JSON.stringify({ results }));
