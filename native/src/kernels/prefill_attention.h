// A prompt's attention on the CPU in one op: softmax(q k / sqrt(head_dim) + mask) v for every head
// and prompt row. ggml's two f32 products took it through its generic dot-product path (about 40
// GFLOP/s here; the value cache is kept transposed for the steps, which rules out ggml's flash
// attention), so a 163-row prompt spent 150 ms in attention against 340 ms in all its weight
// products. Here each kv head's keys and values are transposed once into a scratch buffer, and then
// both products are plain multiply-adds over 16 keys or 16 value dimensions at a time.
#pragma once

#include "ggml.h"

namespace kazeia {

// q: f32 [hd, H, n] contiguous; keys: [hd, n_kv, Hkv] and values: [n_kv, hd, Hkv] (views of a KV
// cache, rows contiguous); mask: f32 [n_kv, n] -> f32 [hd * H, n], as blocks.h's attention gives
// it. nullptr where it does not apply (not f32, head_dim not a multiple of 16, H not a multiple of
// Hkv, a CPU without AVX-512): use attention().
ggml_tensor * prefill_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * keys, ggml_tensor * values,
                                ggml_tensor * mask);

}  // namespace kazeia
