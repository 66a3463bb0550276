// A loaded model file: metadata, hyper-parameters and weights (immutable after load).
// Sessions (KV caches, decoder state, RNG) live elsewhere and borrow a model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kazeia/hparams.h"
#include "kazeia/tensor_table.h"

struct ggml_context;
struct ggml_tensor;
struct gguf_context;
struct ggml_backend_buffer;

namespace kazeia {

struct speaker_entry {
    std::string name;
    int32_t codec_id = 0;
    std::string dialect;   // empty when the speaker has no dialect override
};

struct language_entry {
    std::string name;
    int32_t codec_id = 0;
};

struct stage_summary {
    int64_t n_tensors = 0;
    int64_t n_params = 0;
    int64_t n_bytes = 0;
    std::map<std::string, int64_t> tensors_by_type;   // ggml type name -> count
};

struct model_info {
    std::string path;
    std::string name;
    std::string description;
    uint32_t format_version = 0;
    bool random_weights = false;
    int64_t file_size = 0;
    std::vector<speaker_entry> speakers;
    std::vector<language_entry> languages;
    std::map<std::string, stage_summary> stages;     // by tensor_stage_name
};

class model {
public:
    // Throws model_error with the file name and the reason; never aborts on bad input.
    static std::unique_ptr<model> load(const std::string & path);
    ~model();
    model(const model &) = delete;
    model & operator=(const model &) = delete;

    const model_hparams & hparams() const { return hparams_; }
    const model_info & info() const { return info_; }
    const std::vector<tensor_spec> & tensor_specs() const { return specs_; }

    // nullptr when the file has no tensor of that name
    ggml_tensor * tensor(const std::string & name) const;
    // The tensor a network binds (its shape was checked against the tensor table at load); a missing
    // one is a model_error naming the network and the tensor.
    ggml_tensor * require(const std::string & name, const std::string & network) const;
    // Copy of a tensor's values as f32 (dequantised), for inspection and tests.
    std::vector<float> tensor_to_f32(const std::string & name) const;

    // A network that keeps its own rearranged copy of a tensor lets the file's pages go (memory-mapped
    // weights only; the pages come back from the file if the tensor is read again).
    void release_pages(const ggml_tensor * t) const;

    bool has_key(const std::string & key) const;
    std::string get_string(const std::string & key) const;
    std::vector<std::string> get_string_array(const std::string & key) const;
    int64_t get_int(const std::string & key) const;
    double get_float(const std::string & key) const;
    bool get_bool(const std::string & key) const;
    std::vector<std::string> keys() const;

private:
    model() = default;
    void open_gguf(const std::string & path);
    void bind_tensors();
    void map_weights();
    void summarise();

    model_hparams hparams_;
    model_info info_;
    std::vector<tensor_spec> specs_;
    std::map<std::string, ggml_tensor *> tensors_;

    gguf_context * gguf_ = nullptr;
    ggml_context * meta_ = nullptr;
    ggml_backend_buffer * weights_ = nullptr;
    void * mapping_ = nullptr;
    size_t mapping_size_ = 0;
};

}  // namespace kazeia
