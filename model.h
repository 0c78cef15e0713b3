// model.h: the one header a front door (run.c, train.c) includes for the model. Data flows
// through its parts in this order:
//   model/header.h           the model file's header, its checks, and the Config read from it
//   model/file.h             the model file: weight tensors, mapping and saving
//   model/threads.h          splitting work across threads; the barrier; the wait policy
//   model/matmul.h           linear layers' products, float32 and Q8_0, forward and backward
//   model/level.h            the name of the build's kernel level, which ./run prints
//   model/bf16_gemm.h        bfloat16 inputs, float32 sums (training, --compute bf16)
//   model/layers.h           norms, activations, RoPE, embedding, softmax and the loss
//   model/causal.h           the attention's products under a causal mask, in register tiles
//   model/attention.h        masked multi-head attention, forward and backward
//   model/attention_token.h  one generated token's attention, split across threads
//   model/forward.h          one forward pass over T tokens with its KV cache (./run, samples)
//   model/sampler.h          logits to the next token
// Header-only: every function is static, so each program compiles the same code. Nothing here
// parses a command line, trains or prints; docs/FORMAT.md is the file format's spec.
#ifndef ATTN_MODEL_H
#define ATTN_MODEL_H

#include "model/file.h"
#include "model/threads.h"
#include "model/matmul.h"
#include "model/level.h"
#include "model/bf16_gemm.h"
#include "model/layers.h"
#include "model/attention.h"
#include "model/attention_token.h"
#include "model/forward.h"
#include "model/sampler.h"

#endif
