#include <cmath>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "kazeia/audio_encoder.h"
#include "kazeia/model.h"
#include "kazeia/speaker_encoder.h"
#include "kazeia/thread_pool.h"
#include "kazeia/tts.h"

namespace py = pybind11;

namespace kazeia::bindings {
namespace {

using i32_array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using f32_array = py::array_t<float, py::array::c_style | py::array::forcecast>;

template <typename T, typename A>
std::vector<T> to_vector(const A & a) {
    return std::vector<T>(a.data(), a.data() + a.size());
}

prompt_rows rows_of(const i32_array & text_ids, const i32_array & codec_ids, const std::optional<i32_array> & frame_codes,
                    const std::optional<f32_array> & vectors) {
    prompt_rows r;
    r.n_rows = text_ids.size();
    r.text_ids = to_vector<int32_t>(text_ids);
    r.codec_ids = to_vector<int32_t>(codec_ids);
    if (frame_codes) r.frame_codes = to_vector<int32_t>(*frame_codes);
    if (vectors) r.vectors = to_vector<float>(*vectors);
    return r;
}

const char * reason_name(stop_reason r);

// codes [n, groups], per-frame talker / code-predictor ms [n, 2], prefill ms and the stop reason
py::dict result_dict(const generation_result & res, int groups) {
    py::array_t<int32_t> codes({res.n_frames, int64_t(groups)});
    std::copy(res.codes.begin(), res.codes.begin() + res.n_frames * groups, codes.mutable_data());
    py::array_t<double> timings({res.n_frames, int64_t(2)});
    for (int64_t i = 0; i < res.n_frames; ++i) {
        timings.mutable_at(i, 0) = res.timings[size_t(i)].talker_ms;
        timings.mutable_at(i, 1) = res.timings[size_t(i)].code_predictor_ms;
    }
    py::dict out;
    out["codes"] = codes;
    out["stop_reason"] = reason_name(res.reason);
    out["prefill_ms"] = res.prefill_ms;
    out["timings_ms"] = timings;
    return out;
}

const char * reason_name(stop_reason r) {
    switch (r) {
        case stop_reason::eos: return "eos";
        case stop_reason::limit: return "limit";
        case stop_reason::cancelled: return "cancelled";
    }
    return "?";
}

}  // namespace

void register_tts(py::module_ & m) {
    py::class_<audio_encoder>(m, "AudioEncoder")
        .def(py::init([](const model & mdl, std::shared_ptr<thread_pool> pool) {
                 return std::make_unique<audio_encoder>(mdl, std::move(pool));
             }),
             py::arg("model"), py::arg("pool"), py::keep_alive<1, 2>())
        .def("encode", [](audio_encoder & e, const f32_array & audio) {
            int64_t frames = 0;
            std::vector<int32_t> codes;
            {
                py::gil_scoped_release release;
                codes = e.encode(audio.data(), audio.size(), frames);
            }
            py::array_t<int32_t> out({frames, int64_t(e.n_quantizers())});
            std::copy(codes.begin(), codes.end(), out.mutable_data());
            return out;
        }, py::arg("audio"), "codes [frames, 16] of 24 kHz mono audio");

    py::class_<speaker_encoder>(m, "SpeakerEncoder")
        .def(py::init([](const model & mdl, std::shared_ptr<thread_pool> pool) {
                 return std::make_unique<speaker_encoder>(mdl, std::move(pool));
             }),
             py::arg("model"), py::arg("pool"), py::keep_alive<1, 2>())
        .def("embed", [](speaker_encoder & e, const f32_array & mel) {
            if (mel.ndim() != 2 || mel.shape(1) != e.mel_dim()) {
                throw std::invalid_argument("mel must have shape [frames, " + std::to_string(e.mel_dim()) + "]");
            }
            std::vector<float> v;
            {
                py::gil_scoped_release release;
                v = e.embed(mel.data(), mel.shape(0));
            }
            return py::array_t<float>(v.size(), v.data());
        }, py::arg("mel"), "x-vector of a log-mel spectrogram [frames, mel_dim]");

    py::class_<sampling_config>(m, "SamplingConfig")
        .def(py::init([](bool do_sample, float temperature, int top_k, float top_p) {
                 // written so NaN fails every test: no caller reaches the sampler with a value it cannot use
                 if (!(std::isfinite(temperature) && temperature > 0 && temperature <= 1000) || top_k < 0 ||
                     !(top_p > 0 && top_p <= 1)) {
                     throw std::invalid_argument("a finite temperature in (0, 1000], top_k >= 0 and top_p in (0, 1] "
                                                 "are required");
                 }
                 return sampling_config{do_sample, temperature, top_k, top_p};
             }),
             py::arg("do_sample") = true, py::arg("temperature") = 1.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f)
        .def_readonly("do_sample", &sampling_config::do_sample)
        .def_readonly("temperature", &sampling_config::temperature)
        .def_readonly("top_k", &sampling_config::top_k)
        .def_readonly("top_p", &sampling_config::top_p);

    py::class_<generation_request>(m, "GenerationRequest")
        .def(py::init([](const i32_array & text_ids, const i32_array & codec_ids, const i32_array & trailing_text_ids,
                         const sampling_config & talker, const sampling_config & code_predictor, int64_t max_frames,
                         const std::optional<i32_array> & frame_codes, const std::optional<f32_array> & vectors,
                         float repetition_penalty, int min_new_tokens, uint64_t seed, bool cp_single_launch,
                         bool talker_persistent, bool text_open) {
                 if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0 && repetition_penalty <= 1000)) {
                     throw std::invalid_argument("repetition_penalty must be finite, in (0, 1000]");
                 }
                 if (max_frames < 1) throw std::invalid_argument("max_frames must be at least 1");
                 generation_request req;
                 req.prompt = rows_of(text_ids, codec_ids, frame_codes, vectors);
                 req.trailing_text_ids = to_vector<int32_t>(trailing_text_ids);
                 req.talker = talker;
                 req.code_predictor = code_predictor;
                 req.repetition_penalty = repetition_penalty;
                 req.min_new_tokens = min_new_tokens;
                 req.max_frames = max_frames;
                 req.seed = seed;
                 req.cp_single_launch = cp_single_launch;
                 req.talker_persistent = talker_persistent;
                 req.text_open = text_open;
                 return req;
             }),
             py::arg("text_ids"), py::arg("codec_ids"), py::arg("trailing_text_ids"), py::arg("talker"),
             py::arg("code_predictor"), py::arg("max_frames"), py::arg("frame_codes") = py::none(),
             py::arg("vectors") = py::none(), py::arg("repetition_penalty") = 1.05f, py::arg("min_new_tokens") = 2,
             py::arg("seed") = 0, py::arg("cp_single_launch") = true, py::arg("talker_persistent") = true,
             py::arg("text_open") = false,
             "one utterance for TtsRunner.generate / open: prompt rows, trailing text ids, sampling per stage, limits; "
             "text_open: more trailing text comes by TtsSession.append_text")
        .def_property_readonly("prompt_rows", [](const generation_request & r) { return r.prompt.n_rows; })
        .def_readonly("talker", &generation_request::talker)
        .def_readonly("code_predictor", &generation_request::code_predictor)
        .def_readonly("max_frames", &generation_request::max_frames)
        .def_readonly("seed", &generation_request::seed);

    m.def("sample_tokens", [](const f32_array & logits, const sampling_config & c, uint64_t seed, int n) {
        const std::vector<int32_t> draws = sample_tokens(to_vector<float>(logits), c, seed, n);
        return py::array_t<int32_t>(draws.size(), draws.data());
    }, py::arg("logits"), py::arg("config"), py::arg("seed"), py::arg("n"),
       "n draws from one seeded generator (tests of the sampler itself)");

    py::class_<tts_session>(m, "TtsSession")
        .def_property_readonly("done", &tts_session::done)
        .def_property_readonly("n_frames", [](const tts_session & s) { return s.result().n_frames; })
        .def_property_readonly("cache_bytes", &tts_session::cache_bytes)
        .def_property_readonly("waiting", &tts_session::waiting,
                               "it has read all its text so far and more may come: steps leave it as it is")
        .def("append_text", [](tts_session & s, const i32_array & ids) { s.append_text(to_vector<int32_t>(ids)); },
             py::arg("ids"), "more trailing text ids (a request opened with text_open)")
        .def("close_text", &tts_session::close_text, py::arg("max_frames"),
             "no more text; max_frames: the whole text's frame limit (at most the request's)")
        .def("frame", [](const tts_session & s, int64_t t) {
            const generation_result & r = s.result();
            if (t < 0 || t >= r.n_frames) throw std::out_of_range("no frame " + std::to_string(t));
            const int64_t groups = int64_t(r.codes.size()) / r.n_frames;
            py::array_t<int32_t> a(groups);
            std::copy(r.codes.begin() + t * groups, r.codes.begin() + (t + 1) * groups, a.mutable_data());
            const frame_timing & tm = r.timings[size_t(t)];
            return py::make_tuple(a, tm.talker_ms, tm.code_predictor_ms);
        }, py::arg("t"), "frame t: (codes, talker ms, code-predictor ms)")
        .def("result", [](const tts_session & s) {
            const generation_result & r = s.result();
            return result_dict(r, r.n_frames ? int(r.codes.size() / size_t(r.n_frames)) : 16);
        }, "as generate returns (the stop reason is valid once done)");

    py::class_<tts_weights, std::shared_ptr<tts_weights>>(m, "TtsWeights")
        .def(py::init([](const model & mdl, bool talker_scheduled, bool code_predictor_scheduled,
                         const std::string & talker_weights_buffer, const std::string & code_predictor_weights_buffer,
                         const std::string & talker_device, const std::string & code_predictor_device) {
                 py::gil_scoped_release release;
                 return std::make_shared<tts_weights>(
                     mdl, stage_placement{talker_scheduled, talker_weights_buffer, talker_device},
                     stage_placement{code_predictor_scheduled, code_predictor_weights_buffer, code_predictor_device});
             }),
             py::arg("model"), py::arg("talker_scheduled") = false, py::arg("code_predictor_scheduled") = false,
             py::arg("talker_weights_buffer") = "", py::arg("code_predictor_weights_buffer") = "",
             py::arg("talker_device") = "", py::arg("code_predictor_device") = "", py::keep_alive<1, 2>(),
             "the talker's and code predictor's weights bound once for a placement, shared by runners; "
             "*_device: the accelerator a scheduled stage runs on (weights and cache in its memory)")
        .def_property_readonly("hidden_size", &tts_weights::hidden_size)
        .def_property_readonly("n_code_groups", &tts_weights::n_code_groups);

    py::class_<tts_runner>(m, "TtsRunner")
        .def(py::init([](std::shared_ptr<tts_weights> weights, std::shared_ptr<thread_pool> pool) {
                 py::gil_scoped_release release;
                 return std::make_unique<tts_runner>(std::move(weights), std::move(pool));
             }),
             py::arg("weights"), py::arg("pool"),
             "one thread of compute over shared weights (graphs, persistent steps); one caller at a time")
        .def("placement_report", [](const tts_runner & e) {
            py::list out;
            for (const auto & s : e.placement_report()) {
                py::dict d = report_dict(s.report);
                d["stage"] = s.stage;
                d["launch"] = s.launch;
                out.append(d);
            }
            return out;
        }, "where each launch kind run so far ran: stage, launch, splits, ops per device, bytes copied, CPU fallbacks")
        .def("generate", [](tts_runner & e, const generation_request & req,
                            const std::function<bool(int64_t, py::array_t<int32_t>, double, double, double)> & on_frame) {
            const int groups = e.weights()->n_code_groups();
            frame_callback cb;
            if (on_frame) {
                cb = [&on_frame, groups](int64_t t, const int32_t * codes, const frame_timing & tm) {
                    py::gil_scoped_acquire acquire;
                    py::array_t<int32_t> a(groups);
                    std::copy(codes, codes + groups, a.mutable_data());
                    return on_frame(t, a, tm.talker_ms, tm.code_predictor_ms, tm.prefill_ms);
                };
            }
            generation_result res;
            {
                py::gil_scoped_release release;
                res = e.generate(req, cb);
            }
            return result_dict(res, groups);
        }, py::arg("request"), py::arg("on_frame"),
           "generate a request frame by frame; on_frame(t, codes, talker ms, code-predictor ms, prefill ms) -> keep going")
        .def("open", [](tts_runner & e, const generation_request & req) {
            py::gil_scoped_release release;
            return e.open(req);
        }, py::arg("request"), py::keep_alive<0, 1>(), "a session for this request, its prompt prefilled")
        .def("step", [](tts_runner & e, const std::vector<tts_session *> & sessions) {
            py::gil_scoped_release release;
            e.step(sessions);
        }, py::arg("sessions"), "advance every session that is not done by one frame, in one talker and one "
                                "code-predictor launch")
        .def("embed", [](tts_runner & e, const i32_array & text_ids, const i32_array & codec_ids,
                         const std::optional<i32_array> & frame_codes, const std::optional<f32_array> & vectors) {
            prompt_rows r = rows_of(text_ids, codec_ids, frame_codes, vectors);
            std::vector<float> v;
            {
                py::gil_scoped_release release;
                v = e.embed(r);
            }
            py::array_t<float> out({r.n_rows, int64_t(e.weights()->hidden_size())});
            std::copy(v.begin(), v.end(), out.mutable_data());
            return out;
        }, py::arg("text_ids"), py::arg("codec_ids"), py::arg("frame_codes") = py::none(), py::arg("vectors") = py::none())
        .def("prefill", [](tts_runner & e, const i32_array & text_ids, const i32_array & codec_ids,
                           const std::optional<i32_array> & frame_codes, const std::optional<f32_array> & vectors) {
            prompt_rows r = rows_of(text_ids, codec_ids, frame_codes, vectors);
            std::vector<float> logits, hidden;
            {
                py::gil_scoped_release release;
                e.prefill(r, logits, hidden);
            }
            return py::make_tuple(py::array_t<float>(logits.size(), logits.data()),
                                  py::array_t<float>(hidden.size(), hidden.data()));
        }, py::arg("text_ids"), py::arg("codec_ids"), py::arg("frame_codes") = py::none(), py::arg("vectors") = py::none())
        .def("teacher_forced", [](tts_runner & e, const i32_array & text_ids, const i32_array & codec_ids,
                                  const std::optional<i32_array> & frame_codes, const std::optional<f32_array> & vectors,
                                  const i32_array & trailing, const i32_array & codes, int64_t max_frames,
                                  bool talker_persistent) {
            generation_request req;
            req.prompt = rows_of(text_ids, codec_ids, frame_codes, vectors);
            req.trailing_text_ids = to_vector<int32_t>(trailing);
            req.max_frames = max_frames;
            req.talker_persistent = talker_persistent;
            const int64_t n = codes.size() / e.weights()->n_code_groups();
            std::vector<float> logits, hidden;
            {
                py::gil_scoped_release release;
                e.teacher_forced(req, codes.data(), n, logits, hidden);
            }
            py::array_t<float> l({n + 1, int64_t(logits.size()) / (n + 1)});
            py::array_t<float> h({n + 1, int64_t(e.weights()->hidden_size())});
            std::copy(logits.begin(), logits.end(), l.mutable_data());
            std::copy(hidden.begin(), hidden.end(), h.mutable_data());
            return py::make_tuple(l, h);
        }, py::arg("text_ids"), py::arg("codec_ids"), py::arg("frame_codes"), py::arg("vectors"), py::arg("trailing_text_ids"),
           py::arg("codes"), py::arg("max_frames") = 0, py::arg("talker_persistent") = true)
        .def("code_predictor_frames", [](tts_runner & e, const f32_array & hidden, const i32_array & c0) {
            const int64_t n = c0.size(), steps = e.weights()->n_code_groups() - 1, vocab = e.weights()->code_predictor_vocab();
            if (hidden.size() != n * e.weights()->hidden_size()) throw std::invalid_argument("hidden must be [n, hidden_size]");
            py::array_t<int32_t> codes({n, steps});
            py::array_t<float> logits({n, steps, vocab});
            int32_t * c = codes.mutable_data();
            float * l = logits.mutable_data();
            {
                py::gil_scoped_release release;
                sampling_config greedy;
                greedy.do_sample = false;
                e.code_predictor_frames(hidden.data(), c0.data(), int(n), greedy, nullptr, c, l);
            }
            return py::make_tuple(codes, logits);
        }, py::arg("hidden"), py::arg("c0"), "greedy one-launch code-predictor frames for n sequences as one batch: "
                                             "(codes [n, 15], logits [n, 15, vocab])")
        .def("code_predictor_logits", [](tts_runner & e, const f32_array & hidden, const i32_array & codes) {
            if (hidden.size() != e.weights()->hidden_size() || codes.size() != e.weights()->n_code_groups()) {
                throw std::invalid_argument("hidden must have hidden_size values and codes one frame");
            }
            std::vector<float> v;
            {
                py::gil_scoped_release release;
                v = e.code_predictor_logits(hidden.data(), codes.data());
            }
            const int64_t rows = e.weights()->n_code_groups() - 1;
            py::array_t<float> out({rows, int64_t(v.size()) / rows});
            std::copy(v.begin(), v.end(), out.mutable_data());
            return out;
        }, py::arg("hidden"), py::arg("codes"));
}

}  // namespace kazeia::bindings
