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
