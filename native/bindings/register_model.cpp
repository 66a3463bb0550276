#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <stdexcept>

#include "bindings.h"
#include "ggml.h"
#include "kazeia/errors.h"
#include "kazeia/model.h"
#include "kazeia/quantize.h"
#include "kazeia/tensor_table.h"

namespace py = pybind11;

namespace kazeia::bindings {
namespace {

// Metadata held in a Python dict (the converter's, before a file exists).
class dict_kv_reader final : public kv_reader {
public:
    explicit dict_kv_reader(py::dict d) : d_(std::move(d)) {}
    bool has(const std::string & key) const override { return d_.contains(key); }
    int64_t get_int(const std::string & key) const override {
        auto v = get(key);
        if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v)) throw model_error("metadata key " + key + " should be an integer");
        return v.cast<int64_t>();
    }
    double get_float(const std::string & key) const override {
        auto v = get(key);
        if (!py::isinstance<py::float_>(v) && !py::isinstance<py::int_>(v)) throw model_error("metadata key " + key + " should be a number");
        return v.cast<double>();
    }
    bool get_bool(const std::string & key) const override {
        auto v = get(key);
        if (!py::isinstance<py::bool_>(v)) throw model_error("metadata key " + key + " should be a boolean");
        return v.cast<bool>();
    }
    std::string get_str(const std::string & key) const override {
        auto v = get(key);
        if (!py::isinstance<py::str>(v)) throw model_error("metadata key " + key + " should be a string");
        return v.cast<std::string>();
    }
    std::vector<int64_t> get_int_array(const std::string & key) const override {
        try { return get(key).cast<std::vector<int64_t>>(); }
        catch (const py::cast_error &) { throw model_error("metadata key " + key + " should be an integer array"); }
    }
    std::vector<std::string> get_str_array(const std::string & key) const override {
        try { return get(key).cast<std::vector<std::string>>(); }
        catch (const py::cast_error &) { throw model_error("metadata key " + key + " should be a string array"); }
    }

private:
    py::object get(const std::string & key) const {
        if (!d_.contains(key)) throw model_error("missing metadata key " + key);
        return d_[py::str(key)];
    }
    py::dict d_;
};

py::dict transformer_dict(const transformer_hparams & t) {
    py::dict d;
    d["hidden_size"] = t.hidden;
    d["intermediate_size"] = t.intermediate;
    d["num_layers"] = t.n_layers;
    d["num_heads"] = t.n_heads;
    d["num_kv_heads"] = t.n_kv_heads;
    d["head_dim"] = t.head_dim;
    d["norm_eps"] = t.norm_eps;
    d["rope_theta"] = t.rope_theta;
    return d;
}

py::dict hparams_dict(const model_hparams & hp) {
    py::dict out;
    out["variant"] = hp.variant;
    out["size"] = hp.size;
    py::dict t = transformer_dict(hp.talker.tfm);
    t["codec_vocab_size"] = hp.talker.codec_vocab;
    t["text_vocab_size"] = hp.talker.text_vocab;
    t["text_hidden_size"] = hp.talker.text_hidden;
    t["num_code_groups"] = hp.talker.n_code_groups;
    t["max_position_embeddings"] = hp.talker.max_positions;
    out["talker"] = t;
    py::dict c = transformer_dict(hp.code_predictor.tfm);
    c["vocab_size"] = hp.code_predictor.vocab;
    c["has_input_proj"] = hp.code_predictor.has_input_proj;
    out["code_predictor"] = c;
    const auto & dh = hp.decoder;
    py::dict d = transformer_dict(dh.tfm);
    d["codebook_size"] = dh.codebook_size;
    d["codebook_dim"] = dh.codebook_dim;
    d["num_quantizers"] = dh.n_quantizers;
    d["num_semantic_quantizers"] = dh.n_semantic_quantizers;
    d["latent_dim"] = dh.latent_dim;
    d["sliding_window"] = dh.sliding_window;
    d["decoder_dim"] = dh.decoder_dim;
    d["upsample_rates"] = dh.upsample_rates;
    d["upsampling_ratios"] = dh.upsampling_ratios;
    d["sample_rate"] = dh.sample_rate;
    d["samples_per_frame"] = dh.samples_per_frame;
    out["decoder"] = d;
    if (hp.audio_encoder.present) {
        const auto & e = hp.audio_encoder;
        py::dict a = transformer_dict(e.tfm);
        a["num_filters"] = e.n_filters;
        a["upsampling_ratios"] = e.upsampling_ratios;
        a["codebook_size"] = e.codebook_size;
        a["codebook_dim"] = e.codebook_dim;
        a["num_quantizers"] = e.n_quantizers;
        a["sliding_window"] = e.sliding_window;
        out["audio_encoder"] = a;
    }
    if (hp.speaker_encoder.present) {
        const auto & s = hp.speaker_encoder;
        py::dict a;
        a["enc_dim"] = s.enc_dim;
        a["mel_dim"] = s.mel_dim;
        a["sample_rate"] = s.sample_rate;
        a["channels"] = s.channels;
        out["speaker_encoder"] = a;
    }
    return out;
}

py::list specs_list(const std::vector<tensor_spec> & specs) {
    py::list out;
    for (const auto & s : specs) {
        py::dict e;
        e["name"] = s.name;
        e["sources"] = s.sources;
        e["shape"] = s.shape;
        e["stage"] = tensor_stage_name(s.stage);
        e["storage"] = tensor_storage_name(s.storage);
        e["transform"] = tensor_transform_name(s.transform);
        out.append(e);
    }
    return out;
}

py::dict info_dict(const model & m) {
    const auto & i = m.info();
    py::dict out;
    out["path"] = i.path;
    out["name"] = i.name;
    out["description"] = i.description;
    out["format_version"] = i.format_version;
    out["random_weights"] = i.random_weights;
    out["file_size"] = i.file_size;
    py::list speakers;
    for (const auto & s : i.speakers) speakers.append(py::make_tuple(s.name, s.codec_id, s.dialect));
    out["speakers"] = speakers;
    py::list languages;
    for (const auto & l : i.languages) languages.append(py::make_tuple(l.name, l.codec_id));
    out["languages"] = languages;
    py::dict stages;
    for (const auto & [name, s] : i.stages) {
        py::dict e;
        e["n_tensors"] = s.n_tensors;
        e["n_params"] = s.n_params;
        e["n_bytes"] = s.n_bytes;
        e["tensors_by_type"] = s.tensors_by_type;
        stages[py::str(name)] = e;
    }
    out["stages"] = stages;
    out["hparams"] = hparams_dict(m.hparams());
    return out;
}

}  // namespace

void register_model(py::module_ & m) {
    static py::exception<model_error> model_load_error(m, "ModelLoadError", PyExc_ValueError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const model_error & e) {
            py::set_error(model_load_error, e.what());
        } catch (const device_error & e) {
            py::set_error(PyExc_RuntimeError, e.what());
        }
    });

    m.attr("ARCHITECTURE") = k_architecture;
    m.attr("FORMAT_VERSION") = k_format_version;

    m.def("hparams_from_metadata", [](py::dict kv) { return hparams_dict(hparams_read(dict_kv_reader(kv))); },
          "Hyper-parameters derived from a metadata dict, exactly as the loader derives them");
    m.def("expected_tensors", [](py::dict kv) { return specs_list(tensor_table_expand(hparams_read(dict_kv_reader(kv)))); },
          "The model's tensor table expanded for the hyper-parameters in a metadata dict");
    m.def("ignored_sources", [](py::dict kv) {
        py::list out;
        for (const auto & i : tensor_table_ignored(hparams_read(dict_kv_reader(kv)))) out.append(py::make_tuple(i.pattern, i.reason));
        return out;
    }, "Checkpoint tensors a converter drops on purpose: (regex, reason)");

    m.def("type_block_size", &type_block_size, py::arg("type"));
    m.def("quantize", [](py::array_t<float, py::array::c_style | py::array::forcecast> data, const std::string & type) {
        if (data.ndim() != 2) throw std::invalid_argument("quantize expects a 2-D array [rows, values]");
        const int64_t rows = data.shape(0), cols = data.shape(1);
        std::vector<uint8_t> bytes;
        {
            py::gil_scoped_release release;
            bytes = quantize_rows(data.data(), rows, cols, type);
        }
        const int64_t row_bytes = rows ? int64_t(bytes.size()) / rows : 0;
        py::array_t<uint8_t> out({rows, row_bytes});
        std::copy(bytes.begin(), bytes.end(), out.mutable_data());
        return out;
    }, py::arg("data"), py::arg("type"), "f32 rows -> bytes of a ggml type, shape [rows, bytes per row]");

    py::class_<model>(m, "Model")
        .def_static("load", [](const std::string & path) {
            py::gil_scoped_release release;
            return model::load(path);
        }, py::arg("path"))
        .def("info", &info_dict)
        .def("tensor_specs", [](const model & self) { return specs_list(self.tensor_specs()); })
        .def("tensor_type", [](const model & self, const std::string & name) {
            const ggml_tensor * t = self.tensor(name);
            if (!t) throw model_error("no tensor named " + name);
            return std::string(ggml_type_name(t->type));
        })
        .def("tensor_nbytes", [](const model & self, const std::string & name) {
            const ggml_tensor * t = self.tensor(name);
            if (!t) throw model_error("no tensor named " + name);
            return int64_t(ggml_nbytes(t));
        })
        .def("tensor_f32", [](const model & self, const std::string & name) {
            std::vector<float> values = self.tensor_to_f32(name);
            std::vector<int64_t> shape;
            for (const auto & s : self.tensor_specs()) if (s.name == name) shape = s.shape;
            py::array_t<float> out(shape);
            std::copy(values.begin(), values.end(), out.mutable_data());
            return out;
        }, py::arg("name"), "A tensor's values as float32 in PyTorch shape order (dequantised)")
        .def("has_key", &model::has_key)
        .def("keys", &model::keys)
        .def("get_string", &model::get_string)
        .def("get_string_array", &model::get_string_array)
        .def("get_int", &model::get_int)
        .def("get_float", &model::get_float)
        .def("get_bool", &model::get_bool);
}

}  // namespace kazeia::bindings
