#include "kazeia/tensor_table.h"

#include <stdexcept>

#include "kazeia/errors.h"

namespace kazeia {
namespace {

using shape_t = std::vector<int64_t>;
using S = tensor_storage;

std::string idx(const std::string & a, int i, const std::string & b) {
    return a + std::to_string(i) + b;
}

class table_builder {
public:
    explicit table_builder(tensor_stage stage) : stage_(stage) {}

    void add(const std::string & name, const std::string & source, shape_t shape, S storage) {
        out.push_back({name, {source}, std::move(shape), stage_, storage, tensor_transform::copy});
    }
    // weight + bias pair of a linear or convolution layer
    // (ConvTranspose1d weights are [in, out, k]: pass the output count as n_out)
    void add_wb(const std::string & name, const std::string & source, shape_t w, S storage, int64_t n_out = 0) {
        if (n_out == 0) n_out = w[0];
        add(name + ".weight", source + ".weight", std::move(w), storage);
        add(name + ".bias", source + ".bias", {n_out}, S::f32);
    }
    void add_codebook(const std::string & name, const std::string & sum, const std::string & usage, shape_t shape) {
        out.push_back({name, {sum, usage}, std::move(shape), stage_, S::f32, tensor_transform::codebook});
    }

    std::vector<tensor_spec> out;

private:
    tensor_stage stage_;
};

// Qwen3 decoder layers shared by talker and code predictor (q/k norm, GQA, SwiGLU).
void add_qwen3_layers(table_builder & t, const std::string & gguf_prefix, const std::string & hf_prefix,
                      const transformer_hparams & h) {
    const int64_t q_dim = int64_t(h.n_heads) * h.head_dim;
    const int64_t kv_dim = int64_t(h.n_kv_heads) * h.head_dim;
    auto shape_of = [&](qwen3_dims d) -> shape_t {
        switch (d) {
            case qwen3_dims::hidden: return {h.hidden};
            case qwen3_dims::head_dim: return {h.head_dim};
            case qwen3_dims::q_by_hidden: return {q_dim, h.hidden};
            case qwen3_dims::kv_by_hidden: return {kv_dim, h.hidden};
            case qwen3_dims::hidden_by_q: return {h.hidden, q_dim};
            case qwen3_dims::ffn_by_hidden: return {h.intermediate, h.hidden};
            case qwen3_dims::hidden_by_ffn: return {h.hidden, h.intermediate};
        }
        throw std::logic_error("unknown Qwen3 tensor shape");
    };
    for (int i = 0; i < h.n_layers; ++i) {
        const std::string g = idx(gguf_prefix + "blk.", i, ".");
        const std::string s = idx(hf_prefix + "layers.", i, ".");
        for (const qwen3_tensor & q : k_qwen3_layer_tensors) {
            const bool vector = q.dims == qwen3_dims::hidden || q.dims == qwen3_dims::head_dim;
            t.add(g + q.gguf, s + q.source, shape_of(q.dims), vector ? S::f32 : S::quantizable);
        }
    }
}

void add_talker(std::vector<tensor_spec> & out, const talker_hparams & h) {
    table_builder t(tensor_stage::talker);
    const int64_t d = h.tfm.hidden;
    t.add("talker.text_embd.weight", "talker.model.text_embedding.weight", {h.text_vocab, h.text_hidden}, S::quantizable);
    t.add_wb("talker.text_proj.fc1", "talker.text_projection.linear_fc1", {h.text_hidden, h.text_hidden}, S::quantizable);
    t.add_wb("talker.text_proj.fc2", "talker.text_projection.linear_fc2", {d, h.text_hidden}, S::quantizable);
    t.add("talker.codec_embd.weight", "talker.model.codec_embedding.weight", {h.codec_vocab, d}, S::quantizable);
    add_qwen3_layers(t, "talker.", "talker.model.", h.tfm);
    t.add("talker.output_norm.weight", "talker.model.norm.weight", {d}, S::f32);
    t.add("talker.codec_head.weight", "talker.codec_head.weight", {h.codec_vocab, d}, S::quantizable);
    out.insert(out.end(), t.out.begin(), t.out.end());
}

void add_code_predictor(std::vector<tensor_spec> & out, const model_hparams & hp) {
    const auto & h = hp.code_predictor;
    const int64_t d_talker = hp.talker.tfm.hidden;
    table_builder t(tensor_stage::code_predictor);
    const std::string hf = "talker.code_predictor.";
    if (h.has_input_proj) {
        t.add_wb("cp.input_proj", hf + "small_to_mtp_projection", {h.tfm.hidden, d_talker}, S::quantizable);
    }
    // Embeddings of codebooks 1..15 have the talker's width; they are projected like the hidden state.
    for (int j = 0; j + 1 < hp.talker.n_code_groups; ++j) {
        t.add(idx("cp.codec_embd.", j, ".weight"), idx(hf + "model.codec_embedding.", j, ".weight"),
              {h.vocab, d_talker}, S::quantizable);
    }
    add_qwen3_layers(t, "cp.", hf + "model.", h.tfm);
    t.add("cp.output_norm.weight", hf + "model.norm.weight", {h.tfm.hidden}, S::f32);
    for (int j = 0; j + 1 < hp.talker.n_code_groups; ++j) {
        t.add(idx("cp.head.", j, ".weight"), idx(hf + "lm_head.", j, ".weight"), {h.vocab, h.tfm.hidden},
              S::quantizable);
    }
    out.insert(out.end(), t.out.begin(), t.out.end());
}

void add_snake(table_builder & t, const std::string & name, const std::string & source, int64_t channels) {
    t.add(name + ".alpha", source + ".alpha", {channels}, S::f32);
    t.add(name + ".beta", source + ".beta", {channels}, S::f32);
}

void add_speech_decoder(std::vector<tensor_spec> & out, const speech_decoder_hparams & h) {
    table_builder t(tensor_stage::speech_decoder);
    const int64_t vq_dim = h.codebook_dim / 2;
    const std::string q = "decoder.quantizer.";
    for (int k = 0; k < h.n_quantizers; ++k) {
        const bool first = k < h.n_semantic_quantizers;
        const int layer = first ? k : k - h.n_semantic_quantizers;
        const std::string cb = q + (first ? "rvq_first" : "rvq_rest") + ".vq.layers." + std::to_string(layer) + "._codebook.";
        t.add_codebook(idx("dec.vq.codebook.", k, ""), cb + "embedding_sum", cb + "cluster_usage", {h.codebook_size, vq_dim});
    }
    t.add("dec.vq.first_output_proj.weight", q + "rvq_first.output_proj.weight", {h.codebook_dim, vq_dim, 1}, S::f32);
    t.add("dec.vq.rest_output_proj.weight", q + "rvq_rest.output_proj.weight", {h.codebook_dim, vq_dim, 1}, S::f32);
    t.add_wb("dec.pre_conv", "decoder.pre_conv.conv", {h.latent_dim, h.codebook_dim, 3}, S::half_or_f32);

    const auto & a = h.tfm;
    const int64_t attn_dim = int64_t(a.n_heads) * a.head_dim;
    const int64_t kv_dim = int64_t(a.n_kv_heads) * a.head_dim;
    const std::string p = "decoder.pre_transformer.";
    t.add_wb("dec.tfm.input_proj", p + "input_proj", {a.hidden, h.latent_dim}, S::half_or_f32);
    for (int i = 0; i < a.n_layers; ++i) {
        const std::string g = idx("dec.tfm.blk.", i, ".");
        const std::string s = idx(p + "layers.", i, ".");
        t.add(g + "attn_norm.weight", s + "input_layernorm.weight", {a.hidden}, S::f32);
        t.add(g + "attn_q.weight", s + "self_attn.q_proj.weight", {attn_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_k.weight", s + "self_attn.k_proj.weight", {kv_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_v.weight", s + "self_attn.v_proj.weight", {kv_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_output.weight", s + "self_attn.o_proj.weight", {a.hidden, attn_dim}, S::half_or_f32);
        t.add(g + "attn_scale", s + "self_attn_layer_scale.scale", {a.hidden}, S::f32);
        t.add(g + "ffn_norm.weight", s + "post_attention_layernorm.weight", {a.hidden}, S::f32);
        t.add(g + "ffn_gate.weight", s + "mlp.gate_proj.weight", {a.intermediate, a.hidden}, S::half_or_f32);
        t.add(g + "ffn_up.weight", s + "mlp.up_proj.weight", {a.intermediate, a.hidden}, S::half_or_f32);
        t.add(g + "ffn_down.weight", s + "mlp.down_proj.weight", {a.hidden, a.intermediate}, S::half_or_f32);
        t.add(g + "ffn_scale", s + "mlp_layer_scale.scale", {a.hidden}, S::f32);
    }
    t.add("dec.tfm.output_norm.weight", p + "norm.weight", {a.hidden}, S::f32);
    t.add_wb("dec.tfm.output_proj", p + "output_proj", {h.latent_dim, a.hidden}, S::half_or_f32);

    const int64_t c = h.latent_dim;
    for (size_t u = 0; u < h.upsampling_ratios.size(); ++u) {
        const std::string g = idx("dec.up.", int(u), ".");
        const std::string s = idx("decoder.upsample.", int(u), ".");
        // ConvTranspose1d weights are [in, out, k]
        t.add_wb(g + "tconv", s + "0.conv", {c, c, h.upsampling_ratios[u]}, S::half_or_f32, c);
        t.add_wb(g + "dwconv", s + "1.dwconv.conv", {c, 1, 7}, S::f32);
        t.add(g + "norm.weight", s + "1.norm.weight", {c}, S::f32);
        t.add(g + "norm.bias", s + "1.norm.bias", {c}, S::f32);
        t.add_wb(g + "pwconv1", s + "1.pwconv1", {4 * c, c}, S::half_or_f32);
        t.add_wb(g + "pwconv2", s + "1.pwconv2", {c, 4 * c}, S::half_or_f32);
        t.add(g + "gamma", s + "1.gamma", {c}, S::f32);
    }

    t.add_wb("dec.voc.conv_in", "decoder.decoder.0.conv", {h.decoder_dim, c, 7}, S::half_or_f32);
    int64_t ch = h.decoder_dim;
    const int n_blocks = int(h.upsample_rates.size());
    for (int b = 0; b < n_blocks; ++b) {
        const std::string g = idx("dec.voc.blk.", b, ".");
        const std::string s = idx("decoder.decoder.", b + 1, ".block.");
        const int64_t ch_out = ch / 2;
        const int rate = h.upsample_rates[b];
        add_snake(t, g + "snake", s + "0", ch);
        t.add_wb(g + "tconv", s + "1.conv", {ch, ch_out, 2 * rate}, S::half_or_f32, ch_out);
        for (int r = 0; r < 3; ++r) {
            const std::string gr = idx(g + "res.", r, ".");
            const std::string sr = idx(s, r + 2, ".");
            add_snake(t, gr + "snake1", sr + "act1", ch_out);
            t.add_wb(gr + "conv1", sr + "conv1.conv", {ch_out, ch_out, 7}, S::half_or_f32);
            add_snake(t, gr + "snake2", sr + "act2", ch_out);
            t.add_wb(gr + "conv2", sr + "conv2.conv", {ch_out, ch_out, 1}, S::half_or_f32);
        }
        ch = ch_out;
    }
    add_snake(t, "dec.voc.snake_out", idx("decoder.decoder.", n_blocks + 1, ""), ch);
    t.add_wb("dec.voc.conv_out", idx("decoder.decoder.", n_blocks + 2, ".conv"), {1, ch, 7}, S::f32);
    out.insert(out.end(), t.out.begin(), t.out.end());
}

// Mimi encoder: SEANet convs, transformer, downsampling conv and the first valid codebooks.
void add_audio_encoder(std::vector<tensor_spec> & out, const audio_encoder_hparams & h) {
    table_builder t(tensor_stage::audio_encoder);
    const std::string s = "encoder.encoder.layers.";
    int layer = 0;
    int64_t ch = h.n_filters;
    t.add_wb("enc.conv_in", idx(s, layer++, ".conv"), {ch, 1, h.kernel_size}, S::half_or_f32);
    const int n_down = int(h.upsampling_ratios.size());
    for (int r = 0; r < n_down; ++r) {
        const int stride = h.upsampling_ratios[n_down - 1 - r];
        const std::string g = idx("enc.down.", r, ".");
        for (int k = 0; k < h.n_residual_layers; ++k) {
            const std::string gr = idx(g + "res.", k, ".");
            const std::string sr = idx(s, layer++, ".block.");
            t.add_wb(gr + "conv1", sr + "1.conv", {ch / h.compress, ch, h.residual_kernel_size}, S::half_or_f32);
            t.add_wb(gr + "conv2", sr + "3.conv", {ch, ch / h.compress, 1}, S::half_or_f32);
        }
        ++layer;  // ELU
        t.add_wb(g + "conv", idx(s, layer++, ".conv"), {2 * ch, ch, 2 * stride}, S::half_or_f32);
        ch *= 2;
    }
    ++layer;  // ELU
    const auto & a = h.tfm;
    t.add_wb("enc.conv_out", idx(s, layer, ".conv"), {a.hidden, ch, h.last_kernel_size}, S::half_or_f32);

    const int64_t attn_dim = int64_t(a.n_heads) * a.head_dim;
    const int64_t kv_dim = int64_t(a.n_kv_heads) * a.head_dim;
    for (int i = 0; i < a.n_layers; ++i) {
        const std::string g = idx("enc.tfm.blk.", i, ".");
        const std::string l = idx("encoder.encoder_transformer.layers.", i, ".");
        t.add(g + "attn_norm.weight", l + "input_layernorm.weight", {a.hidden}, S::f32);
        t.add(g + "attn_norm.bias", l + "input_layernorm.bias", {a.hidden}, S::f32);
        t.add(g + "attn_q.weight", l + "self_attn.q_proj.weight", {attn_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_k.weight", l + "self_attn.k_proj.weight", {kv_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_v.weight", l + "self_attn.v_proj.weight", {kv_dim, a.hidden}, S::half_or_f32);
        t.add(g + "attn_output.weight", l + "self_attn.o_proj.weight", {a.hidden, attn_dim}, S::half_or_f32);
        t.add(g + "attn_scale", l + "self_attn_layer_scale.scale", {a.hidden}, S::f32);
        t.add(g + "ffn_norm.weight", l + "post_attention_layernorm.weight", {a.hidden}, S::f32);
        t.add(g + "ffn_norm.bias", l + "post_attention_layernorm.bias", {a.hidden}, S::f32);
        t.add(g + "ffn_up.weight", l + "mlp.fc1.weight", {a.intermediate, a.hidden}, S::half_or_f32);
        t.add(g + "ffn_down.weight", l + "mlp.fc2.weight", {a.hidden, a.intermediate}, S::half_or_f32);
        t.add(g + "ffn_scale", l + "mlp_layer_scale.scale", {a.hidden}, S::f32);
    }
    t.add("enc.downsample.weight", "encoder.downsample.conv.weight", {a.hidden, a.hidden, 2 * h.compress}, S::half_or_f32);

    const std::string q = "encoder.quantizer.";
    for (const char * group : {"semantic", "acoustic"}) {
        const std::string src = q + group + "_residual_vector_quantizer.";
        const std::string g = std::string("enc.vq.") + group + "_";
        t.add(g + "input_proj.weight", src + "input_proj.weight", {h.codebook_dim, a.hidden, 1}, S::f32);
        t.add(g + "output_proj.weight", src + "output_proj.weight", {a.hidden, h.codebook_dim, 1}, S::f32);
    }
    for (int k = 0; k < h.n_quantizers; ++k) {
        const bool semantic = k < h.n_semantic_quantizers;
        const int layer_k = semantic ? k : k - h.n_semantic_quantizers;
        const std::string cb = q + (semantic ? "semantic" : "acoustic") + "_residual_vector_quantizer.layers." +
                               std::to_string(layer_k) + ".codebook.";
        t.add_codebook(idx("enc.vq.codebook.", k, ""), cb + "embed_sum", cb + "cluster_usage",
                       {h.codebook_size, h.codebook_dim});
    }
    out.insert(out.end(), t.out.begin(), t.out.end());
}

// ECAPA-TDNN speaker encoder; every conv has a bias.
void add_speaker_encoder(std::vector<tensor_spec> & out, const speaker_encoder_hparams & h) {
    table_builder t(tensor_stage::speaker_encoder);
    const std::string s = "speaker_encoder.";
    const auto & ch = h.channels;
    const size_t n = ch.size();
    t.add_wb("spk.blk.0.conv", s + "blocks.0.conv", {ch[0], h.mel_dim, h.kernel_sizes[0]}, S::f32);
    int64_t mfa_in = 0;
    for (size_t b = 1; b + 1 < n; ++b) {
        const std::string g = idx("spk.blk.", int(b), ".");
        const std::string sb = idx(s + "blocks.", int(b), ".");
        const int64_t c = ch[b];
        const int64_t sub = c / h.res2net_scale;
        t.add_wb(g + "tdnn1", sb + "tdnn1.conv", {c, ch[b - 1], 1}, S::f32);
        for (int k = 0; k + 1 < h.res2net_scale; ++k) {
            t.add_wb(idx(g + "res2net.", k, ""), idx(sb + "res2net_block.blocks.", k, ".conv"),
                     {sub, sub, h.kernel_sizes[b]}, S::f32);
        }
        t.add_wb(g + "tdnn2", sb + "tdnn2.conv", {c, c, 1}, S::f32);
        t.add_wb(g + "se.conv1", sb + "se_block.conv1", {h.se_channels, c, 1}, S::f32);
        t.add_wb(g + "se.conv2", sb + "se_block.conv2", {c, h.se_channels, 1}, S::f32);
        mfa_in += c;
    }
    const int64_t c_out = ch[n - 1];
    t.add_wb("spk.mfa", s + "mfa.conv", {c_out, mfa_in, h.kernel_sizes[n - 1]}, S::f32);
    t.add_wb("spk.asp.tdnn", s + "asp.tdnn.conv", {h.attention_channels, 3 * c_out, 1}, S::f32);
    t.add_wb("spk.asp.conv", s + "asp.conv", {c_out, h.attention_channels, 1}, S::f32);
    t.add_wb("spk.fc", s + "fc", {h.enc_dim, 2 * c_out, 1}, S::f32);
    out.insert(out.end(), t.out.begin(), t.out.end());
}

}  // namespace

std::vector<tensor_spec> tensor_table_expand(const model_hparams & hp) {
    std::vector<tensor_spec> out;
    add_talker(out, hp.talker);
    add_code_predictor(out, hp);
    add_speech_decoder(out, hp.decoder);
    if (hp.audio_encoder.present) add_audio_encoder(out, hp.audio_encoder);
    if (hp.speaker_encoder.present) add_speaker_encoder(out, hp.speaker_encoder);
    for (const auto & spec : out) {
        if (spec.name.size() > 63) throw model_error("internal: GGUF tensor name too long: " + spec.name);
    }
    return out;
}

std::vector<ignored_source> tensor_table_ignored(const model_hparams & hp) {
    std::vector<ignored_source> ignored = {
        {R"(^decoder\.quantizer\.rvq_(first|rest)\.input_proj\.weight$)",
         "the decoder's quantizer input projections are only used for encoding, which the audio encoder does"},
        {R"(^encoder\.quantizer\.[a-z]+_residual_vector_quantizer\.layers\.\d+\.codebook\.initialized$)",
         "a training-time flag of the codebook, always 1 in released checkpoints"},
        {R"(^encoder\.quantizer\.acoustic_residual_vector_quantizer\.layers\.\d+\.codebook\.(embed_sum|cluster_usage)$)",
         "acoustic codebooks beyond encoder_valid_num_quantizers are never used (Qwen3-TTS keeps 16)"},
    };
    if (!hp.audio_encoder.present) {
        ignored.push_back({R"(^encoder\.)",
                           "the speech tokenizer's audio encoder only serves voice cloning, which needs a Base model"});
    }
    return ignored;
}

const char * tensor_stage_name(tensor_stage s) {
    switch (s) {
        case tensor_stage::talker: return "talker";
        case tensor_stage::code_predictor: return "code_predictor";
        case tensor_stage::speech_decoder: return "decoder";
        case tensor_stage::audio_encoder: return "audio_encoder";
        case tensor_stage::speaker_encoder: return "speaker_encoder";
    }
    return "?";
}

const char * tensor_storage_name(tensor_storage s) {
    switch (s) {
        case tensor_storage::quantizable: return "quantizable";
        case tensor_storage::half_or_f32: return "half_or_f32";
        case tensor_storage::f32: return "f32";
    }
    return "?";
}

const char * tensor_transform_name(tensor_transform t) {
    switch (t) {
        case tensor_transform::copy: return "copy";
        case tensor_transform::codebook: return "codebook";
    }
    return "?";
}

}  // namespace kazeia
