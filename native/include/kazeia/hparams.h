// Hyper-parameters of a Qwen3-TTS 12 Hz model, read once at load (or from the converter's
// metadata before a file exists) and never looked up again by graph code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kazeia {

// GGUF identity of every file Kazeia writes.
constexpr const char * k_architecture = "qwen3tts";
constexpr uint32_t k_format_version = 1;

// Reads typed metadata values by key; the GGUF loader and the converter (through Python)
// both provide one, so the same code derives hyper-parameters and the tensor list.
class kv_reader {
public:
    virtual ~kv_reader() = default;
    virtual bool has(const std::string & key) const = 0;
    virtual int64_t get_int(const std::string & key) const = 0;
    virtual double get_float(const std::string & key) const = 0;
    virtual std::string get_str(const std::string & key) const = 0;
    virtual std::vector<int64_t> get_int_array(const std::string & key) const = 0;
    virtual std::vector<std::string> get_str_array(const std::string & key) const = 0;
    virtual bool get_bool(const std::string & key) const = 0;
};

struct transformer_hparams {
    int hidden = 0;
    int intermediate = 0;
    int n_layers = 0;
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    float norm_eps = 0.0f;
    float rope_theta = 0.0f;
};

struct talker_hparams {
    transformer_hparams tfm;
    int codec_vocab = 0;      // 3072: audio codes, language tags, control and speaker tokens
    int text_vocab = 0;
    int text_hidden = 0;
    int n_code_groups = 0;    // 16 codebooks per frame
    int max_positions = 0;
    int codec_eos = 0;        // the codec token that ends speech
    int text_pad = 0;         // the text token fed beside frames once the text has run out (tts_pad)
};

struct code_predictor_hparams {
    transformer_hparams tfm;
    int vocab = 0;            // 2048 codes per codebook
    bool has_input_proj = false;  // talker width != code-predictor width (1.7B)
};

struct speech_decoder_hparams {
    transformer_hparams tfm;
    int codebook_size = 0;
    int codebook_dim = 0;     // the VQ output width; each codebook row has codebook_dim / 2 values
    int n_quantizers = 0;
    int n_semantic_quantizers = 0;
    int latent_dim = 0;
    int sliding_window = 0;
    int decoder_dim = 0;
    std::vector<int> upsample_rates;     // vocoder blocks, e.g. 8 5 4 3
    std::vector<int> upsampling_ratios;  // ConvNeXt upsampling stages, e.g. 2 2
    int sample_rate = 0;
    int samples_per_frame = 0;
};

struct audio_encoder_hparams {
    bool present = false;
    transformer_hparams tfm;
    int n_filters = 0;
    std::vector<int> upsampling_ratios;  // as stored; the encoder walks them in reverse
    int kernel_size = 0;
    int residual_kernel_size = 0;
    int last_kernel_size = 0;
    int n_residual_layers = 0;
    int dilation_growth_rate = 0;
    int compress = 0;
    int sliding_window = 0;
    int codebook_size = 0;
    int codebook_dim = 0;
    int n_quantizers = 0;            // codebooks kept in the file (the valid ones, 16)
    int n_semantic_quantizers = 0;
};

struct speaker_encoder_hparams {
    bool present = false;
    int enc_dim = 0;
    int mel_dim = 0;
    int sample_rate = 0;
    std::vector<int> channels;
    std::vector<int> kernel_sizes;
    std::vector<int> dilations;
    int attention_channels = 0;
    int res2net_scale = 0;
    int se_channels = 0;
};

struct model_hparams {
    std::string variant;      // custom_voice | voice_design | base
    std::string size;         // 0b6 | 1b7 | tiny ...
    talker_hparams talker;
    code_predictor_hparams code_predictor;
    speech_decoder_hparams decoder;
    audio_encoder_hparams audio_encoder;
    speaker_encoder_hparams speaker_encoder;
};

// Throws model_error naming the key when a required value is missing or malformed.
model_hparams hparams_read(const kv_reader & kv);

}  // namespace kazeia
