#include "kazeia/hparams.h"

#include "kazeia/errors.h"

namespace kazeia {
namespace {

int read_int(const kv_reader & kv, const std::string & key, int64_t lo = 1, int64_t hi = 1 << 24) {
    const int64_t v = kv.get_int(key);
    if (v < lo || v > hi) {
        throw model_error("metadata " + key + " = " + std::to_string(v) + " is outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<int>(v);
}

float read_float(const kv_reader & kv, const std::string & key) {
    const double v = kv.get_float(key);
    if (!(v > 0.0) || v > 1e12) {
        throw model_error("metadata " + key + " must be a positive number");
    }
    return static_cast<float>(v);
}

std::vector<int> read_ints(const kv_reader & kv, const std::string & key, size_t min_len = 1) {
    std::vector<int> out;
    for (int64_t v : kv.get_int_array(key)) {
        if (v < 1 || v > (1 << 24)) {
            throw model_error("metadata " + key + " holds an out-of-range value " + std::to_string(v));
        }
        out.push_back(static_cast<int>(v));
    }
    if (out.size() < min_len || out.size() > 64) {
        throw model_error("metadata " + key + " has " + std::to_string(out.size()) + " entries");
    }
    return out;
}

transformer_hparams read_transformer(const kv_reader & kv, const std::string & p, const char * eps_key) {
    transformer_hparams t;
    t.hidden = read_int(kv, p + "hidden_size");
    t.intermediate = read_int(kv, p + "intermediate_size");
    t.n_layers = read_int(kv, p + "num_layers", 1, 1024);
    t.n_heads = read_int(kv, p + "num_heads", 1, 1024);
    t.n_kv_heads = read_int(kv, p + "num_kv_heads", 1, 1024);
    t.head_dim = read_int(kv, p + "head_dim", 1, 4096);
    t.norm_eps = read_float(kv, p + eps_key);
    t.rope_theta = read_float(kv, p + "rope_theta");
    if (t.n_heads % t.n_kv_heads != 0) {
        throw model_error("metadata " + p + "num_heads must be a multiple of num_kv_heads");
    }
    return t;
}

}  // namespace

model_hparams hparams_read(const kv_reader & kv) {
    model_hparams hp;
    hp.variant = kv.get_str("qwen3tts.variant");
    if (hp.variant != "custom_voice" && hp.variant != "voice_design" && hp.variant != "base") {
        throw model_error("metadata qwen3tts.variant = '" + hp.variant +
                          "' (expected custom_voice, voice_design or base)");
    }
    hp.size = kv.get_str("qwen3tts.size");

    auto & t = hp.talker;
    t.tfm = read_transformer(kv, "qwen3tts.talker.", "rms_norm_eps");
    t.codec_vocab = read_int(kv, "qwen3tts.talker.codec_vocab_size");
    t.text_vocab = read_int(kv, "qwen3tts.talker.text_vocab_size");
    t.text_hidden = read_int(kv, "qwen3tts.talker.text_hidden_size");
    t.n_code_groups = read_int(kv, "qwen3tts.talker.num_code_groups", 2, 64);
    t.max_positions = read_int(kv, "qwen3tts.talker.max_position_embeddings");
    t.codec_eos = read_int(kv, "qwen3tts.codec.eos", 0, t.codec_vocab - 1);
    t.text_pad = read_int(kv, "qwen3tts.token.tts_pad", 0, t.text_vocab - 1);

    auto & c = hp.code_predictor;
    c.tfm = read_transformer(kv, "qwen3tts.code_predictor.", "rms_norm_eps");
    c.vocab = read_int(kv, "qwen3tts.code_predictor.vocab_size");
    c.has_input_proj = c.tfm.hidden != t.tfm.hidden;

    auto & d = hp.decoder;
    d.tfm = read_transformer(kv, "qwen3tts.decoder.", "rms_norm_eps");
    d.codebook_size = read_int(kv, "qwen3tts.decoder.codebook_size");
    d.codebook_dim = read_int(kv, "qwen3tts.decoder.codebook_dim", 2);
    d.n_quantizers = read_int(kv, "qwen3tts.decoder.num_quantizers", 2, 64);
    d.n_semantic_quantizers = read_int(kv, "qwen3tts.decoder.num_semantic_quantizers", 1, 64);
    d.latent_dim = read_int(kv, "qwen3tts.decoder.latent_dim");
    d.sliding_window = read_int(kv, "qwen3tts.decoder.sliding_window");
    d.decoder_dim = read_int(kv, "qwen3tts.decoder.decoder_dim");
    d.upsample_rates = read_ints(kv, "qwen3tts.decoder.upsample_rates");
    d.upsampling_ratios = read_ints(kv, "qwen3tts.decoder.upsampling_ratios");
    d.sample_rate = read_int(kv, "qwen3tts.decoder.sample_rate");
    if (d.codebook_dim % 2 != 0 || d.n_semantic_quantizers >= d.n_quantizers ||
        d.n_quantizers != t.n_code_groups) {
        throw model_error("metadata qwen3tts.decoder quantizer settings are inconsistent with the talker");
    }
    if (d.decoder_dim >> d.upsample_rates.size() < 1) {
        throw model_error("metadata qwen3tts.decoder.decoder_dim is too small for its vocoder blocks");
    }
    d.samples_per_frame = 1;
    for (int r : d.upsample_rates) d.samples_per_frame *= r;
    for (int r : d.upsampling_ratios) d.samples_per_frame *= r;

    if (hp.variant == "base") {
        auto & e = hp.audio_encoder;
        e.present = true;
        e.tfm = read_transformer(kv, "qwen3tts.audio_encoder.", "norm_eps");
        e.n_filters = read_int(kv, "qwen3tts.audio_encoder.num_filters");
        e.upsampling_ratios = read_ints(kv, "qwen3tts.audio_encoder.upsampling_ratios");
        e.kernel_size = read_int(kv, "qwen3tts.audio_encoder.kernel_size");
        e.residual_kernel_size = read_int(kv, "qwen3tts.audio_encoder.residual_kernel_size");
        e.last_kernel_size = read_int(kv, "qwen3tts.audio_encoder.last_kernel_size");
        e.n_residual_layers = read_int(kv, "qwen3tts.audio_encoder.num_residual_layers", 1, 16);
        e.dilation_growth_rate = read_int(kv, "qwen3tts.audio_encoder.dilation_growth_rate");
        e.compress = read_int(kv, "qwen3tts.audio_encoder.compress");
        e.sliding_window = read_int(kv, "qwen3tts.audio_encoder.sliding_window");
        e.codebook_size = read_int(kv, "qwen3tts.audio_encoder.codebook_size");
        e.codebook_dim = read_int(kv, "qwen3tts.audio_encoder.codebook_dim");
        e.n_quantizers = read_int(kv, "qwen3tts.audio_encoder.num_quantizers", 2, 64);
        e.n_semantic_quantizers = read_int(kv, "qwen3tts.audio_encoder.num_semantic_quantizers", 1, 64);
        if (e.n_semantic_quantizers >= e.n_quantizers || e.n_filters % e.compress != 0) {
            throw model_error("metadata qwen3tts.audio_encoder quantizer or filter settings are inconsistent");
        }

        auto & s = hp.speaker_encoder;
        s.present = true;
        s.enc_dim = read_int(kv, "qwen3tts.speaker_encoder.enc_dim");
        s.mel_dim = read_int(kv, "qwen3tts.speaker_encoder.mel_dim");
        s.sample_rate = read_int(kv, "qwen3tts.speaker_encoder.sample_rate");
        s.channels = read_ints(kv, "qwen3tts.speaker_encoder.channels", 3);
        s.kernel_sizes = read_ints(kv, "qwen3tts.speaker_encoder.kernel_sizes", 3);
        s.dilations = read_ints(kv, "qwen3tts.speaker_encoder.dilations", 3);
        s.attention_channels = read_int(kv, "qwen3tts.speaker_encoder.attention_channels");
        s.res2net_scale = read_int(kv, "qwen3tts.speaker_encoder.res2net_scale", 2, 64);
        s.se_channels = read_int(kv, "qwen3tts.speaker_encoder.se_channels");
        if (s.kernel_sizes.size() != s.channels.size() || s.dilations.size() != s.channels.size()) {
            throw model_error("metadata qwen3tts.speaker_encoder channels, kernel_sizes and dilations differ in length");
        }
        for (size_t i = 1; i + 1 < s.channels.size(); ++i) {
            if (s.channels[i] % s.res2net_scale != 0) {
                throw model_error("metadata qwen3tts.speaker_encoder.channels must divide by res2net_scale");
            }
        }
    }
    return hp;
}

}  // namespace kazeia
