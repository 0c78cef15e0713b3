"""The library under the commands in tools/ (convert.py, reference.py, make_random.py, plot.py,
gen_unicode_tables.py), which the tests import too. It only reads and writes files. The modules,
lowest first: each imports only modules above it (tests/test_tools_layout.py holds that, and
that none is over 600 lines).

Files and formats
  errors           Bad, the one error a reader raises for a bad input file; listing and Terms
                   (a source's own names for its settings and tensors) for messages
  outfile          output files written through a synced temporary file, folders beside their
                   place; ./train's --force rule and what is a tool's own; "-" as stdout and
                   stdin; devices, FIFOs refused
  cli_main         a command's ending: one line for Ctrl-C (exit 130) or a missing numpy/torch
                                                                                  <- outfile
  progress         the progress line on a terminal: tensor k of n, MB/s, ETA
  safe_pickle      pickles read without running code: only tensors, dicts, numbers and dtypes
  storage          how a model file stores each tensor: the weight types, padding, Q8_0,
                   bfloat16 and float16, GGML types per matrix          <- gguf_file, quantize
  tokenizer_pack   the model file's tokenizer blob packed and parsed
  modelfile        the attn.c model file (docs/FORMAT.md): header, config (version 8's
                   experts among it), tokenizer section, the tensors laid out
                                              <- outfile, progress, storage, tokenizer_pack
  generation       generation_config.json's sampling defaults as the header's version 7 fields,
                   and back                                                      <- modelfile
  chat_template    the chat section: a template's family recognised, its ids, its text
                   kept and written back by the exports                          <- modelfile
  tokenizer_blob   the tokenizer section from llama2.c, GPT-2 and Hugging Face files <- modelfile
  tokenizer_gguf   the tokenizer section from a GGUF file's tokenizer.ggml.*
                                                    <- modelfile, tokenizer_blob, gguf_file
  gguf_file        the GGUF reader (llama.cpp's format), dequantising its weight types
  gguf_write       a GGUF writer, for the tests                          <- gguf_file, storage
  tensors          what a source hands convert.py: Source, Stored, Weight, Tensors, stack
                                                             <- errors, modelfile, storage
  weights          the weight type to store (--weights, --group-size); Q8_0 kept as it is
                                                            <- tensors, modelfile, storage
  safetensors      .safetensors read and written       <- errors, tensors, outfile, storage
  archs            the model families, one class per Hugging Face model_type: config keys,
                   tensor names (Hugging Face, GGUF), the reference's quirks
                                          <- errors, modelfile, tensors, sources.gpt2
Sources (convert.py SRC), one module per format
  sources.attn     an attn.c model file, and --export-torch's output
                                                       <- tensors, weights, chat_template
  sources.llama2c  llama2.c's .bin (legacy, ak42) and train.py's .pt    <- tensors, weights
  sources.gpt2     GPT-2's tensor names, shared by nanoGPT and Hugging Face gpt2
  sources.nanogpt  nanoGPT's ckpt.pt                                    <- tensors, sources.gpt2
  torchfile        every pickle, through safe_pickle: a .pt goes to its source module,
                   pytorch_model.bin, nanoGPT's meta.pkl
                                         <- safe_pickle, sources.attn, .llama2c, .nanogpt
  sources.hf       Hugging Face directories, config.json family by family
                                        <- archs, sources.gpt2, safetensors, torchfile
  sources.gguf     GGUF files, their tensors mapped onto sources.hf's readers
                                   <- archs, gguf_file, sources.hf, tokenizer_gguf, weights
  sources.tokenizer  the files --tokenizer names  <- tokenizer_blob, tokenizer_gguf, torchfile
Exports (convert.py --export-*)
  exports.torch    --export-torch: a PyTorch state dict, the chat section's fields
                                                              <- sources.attn, chat_template
  exports.hf       --export-hf: a Hugging Face directory
                                              <- safetensors, tokenizer_blob, chat_template
The PyTorch reference (reference.py), independent of convert.py's readers
  reference.model  the Transformer of a model file, RoPE frequencies     <- modelfile
  reference.hf     a Hugging Face directory run as transformers runs it, each family's
                   quirks its archs class's ref_* attributes         <- archs, reference.model
Test models (make_random.py)
  random_models    presets, random weights, synthetic vocabularies       <- modelfile, tokenizer_blob
  fake_hf          fake Hugging Face directories                 <- random_models, safetensors
  families         today's families: published configs, real tokenizers  <- fake_hf
"""
