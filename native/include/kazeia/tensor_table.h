// The one table of model tensors: source (Hugging Face checkpoint) names, GGUF names, shapes
// and storage policy. The converter (through the bindings) and the loader both expand it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kazeia/hparams.h"

namespace kazeia {

enum class tensor_stage { talker, code_predictor, speech_decoder, audio_encoder, speaker_encoder };

// How a tensor may be stored.
enum class tensor_storage {
    quantizable,   // large matrices of talker / code predictor: follow the requested type
    half_or_f32,   // decoder / encoder weights: f16 when the file is not f32, never quantised
    f32,           // norms, biases, codebooks, Snake parameters, layer scales: always f32
};

// How the converter derives the GGUF tensor from its sources.
enum class tensor_transform {
    copy,          // one source, same values and shape
    codebook,      // sources [embedding_sum, cluster_usage] -> sum / max(usage, 1e-5)
};

// One Qwen3 layer's tensors (talker and code predictor), in the order the stack binds them
// (graphs/qwen3_stack.h): the GGUF name after "<prefix>blk.N.", the checkpoint name after
// "<prefix>layers.N.", and what its dimensions are. The converter's table and the stack read this one list.
enum class qwen3_dims { hidden, head_dim, q_by_hidden, kv_by_hidden, hidden_by_q, ffn_by_hidden, hidden_by_ffn };
struct qwen3_tensor {
    const char * gguf;
    const char * source;
    qwen3_dims dims;
};
inline constexpr qwen3_tensor k_qwen3_layer_tensors[] = {
    {"attn_norm.weight", "input_layernorm.weight", qwen3_dims::hidden},
    {"attn_q.weight", "self_attn.q_proj.weight", qwen3_dims::q_by_hidden},
    {"attn_k.weight", "self_attn.k_proj.weight", qwen3_dims::kv_by_hidden},
    {"attn_v.weight", "self_attn.v_proj.weight", qwen3_dims::kv_by_hidden},
    {"attn_output.weight", "self_attn.o_proj.weight", qwen3_dims::hidden_by_q},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", qwen3_dims::head_dim},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", qwen3_dims::head_dim},
    {"ffn_norm.weight", "post_attention_layernorm.weight", qwen3_dims::hidden},
    {"ffn_gate.weight", "mlp.gate_proj.weight", qwen3_dims::ffn_by_hidden},
    {"ffn_up.weight", "mlp.up_proj.weight", qwen3_dims::ffn_by_hidden},
    {"ffn_down.weight", "mlp.down_proj.weight", qwen3_dims::hidden_by_ffn},
};

struct tensor_spec {
    std::string name;                   // GGUF name, <= 63 characters
    std::vector<std::string> sources;   // checkpoint names (paths as in the safetensors files)
    std::vector<int64_t> shape;         // PyTorch order (outermost first); ggml ne is reversed
    tensor_stage stage;
    tensor_storage storage;
    tensor_transform transform;
};

// Source tensors a converter reads and deliberately drops, with the reason.
struct ignored_source {
    std::string pattern;   // regular expression over checkpoint names
    std::string reason;
};

std::vector<tensor_spec> tensor_table_expand(const model_hparams & hp);
std::vector<ignored_source> tensor_table_ignored(const model_hparams & hp);
const char * tensor_stage_name(tensor_stage s);
const char * tensor_storage_name(tensor_storage s);
const char * tensor_transform_name(tensor_transform t);

}  // namespace kazeia
