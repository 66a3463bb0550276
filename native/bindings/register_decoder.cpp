#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "kazeia/launch_report.h"
#include "kazeia/model.h"
#include "kazeia/speech_decoder.h"
#include "kazeia/thread_pool.h"

namespace py = pybind11;

namespace kazeia::bindings {
namespace {

using codes_array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

const int32_t * frames_of(const codes_array & codes, int n_quantizers, int64_t & n_frames) {
    if (codes.ndim() != 2 || codes.shape(1) != n_quantizers) {
        throw std::invalid_argument("codes must have shape [frames, " + std::to_string(n_quantizers) + "]");
    }
    n_frames = codes.shape(0);
    return codes.data();
}

speech_decoder_options options_of(bool reference_chunking, int chunk_frames, int left_context, int max_graph_frames,
                                  bool profile, bool scheduled) {
    return {reference_chunking, chunk_frames, left_context, max_graph_frames, profile, scheduled};
}

}  // namespace

void register_decoder(py::module_ & m) {
    py::class_<speech_decoder, std::shared_ptr<speech_decoder>>(m, "SpeechDecoder")
        .def(py::init([](const model & mdl, const std::string & weights_buffer, const std::string & device) {
                 py::gil_scoped_release release;
                 return std::make_shared<speech_decoder>(mdl, weights_buffer, device);
             }),
             py::arg("model"), py::arg("weights_buffer") = "", py::arg("device") = "", py::keep_alive<1, 2>(),
             "The model's decoder weights, prepared once (kernels rearranged, Snake exponentials); "
             "weights_buffer: a host-visible buffer type to keep them in (placement accel-weights); "
             "device: an accelerator whose memory holds them, for scheduled sessions (accel-sched)")
        .def_property_readonly("bf16_relaid", &speech_decoder::bf16_relaid,
                               "bf16 matrices re-laid as f16 at load (a CPU without Kazeia's bf16 kernels)");

    py::class_<speech_decoder_runner, std::shared_ptr<speech_decoder_runner>>(m, "SpeechDecoderRunner")
        .def(py::init([](std::shared_ptr<speech_decoder> decoder, std::shared_ptr<thread_pool> pool, bool scheduled) {
                 py::gil_scoped_release release;
                 return std::make_shared<speech_decoder_runner>(std::move(decoder), std::move(pool), scheduled);
             }),
             py::arg("decoder"), py::arg("pool"), py::arg("scheduled") = false,
             "compute (a graph runner and its buffer) that sessions may share; they take turns")
        .def_property_readonly("scheduled", &speech_decoder_runner::scheduled);

    py::class_<speech_decoder_session>(m, "SpeechDecoderSession")
        .def(py::init([](std::shared_ptr<speech_decoder> decoder, std::shared_ptr<thread_pool> pool, bool reference_chunking,
                         int chunk_frames, int left_context, int max_graph_frames, bool profile, bool scheduled) {
                 const speech_decoder_options o = options_of(reference_chunking, chunk_frames, left_context,
                                                             max_graph_frames, profile, scheduled);
                 py::gil_scoped_release release;
                 return std::make_unique<speech_decoder_session>(std::move(decoder), std::move(pool), o);
             }),
             py::arg("decoder"), py::arg("pool"), py::arg("reference_chunking") = true, py::arg("chunk_frames") = 300,
             py::arg("left_context") = 25, py::arg("max_graph_frames") = 8, py::arg("profile") = false,
             py::arg("scheduled") = false, "a session with a runner of its own")
        .def(py::init([](std::shared_ptr<speech_decoder_runner> runner, bool reference_chunking, int chunk_frames,
                         int left_context, int max_graph_frames, bool profile) {
                 const bool scheduled = runner && runner->scheduled();
                 const speech_decoder_options o = options_of(reference_chunking, chunk_frames, left_context,
                                                             max_graph_frames, profile, scheduled);
                 py::gil_scoped_release release;
                 return std::make_unique<speech_decoder_session>(std::move(runner), o);
             }),
             py::arg("runner"), py::arg("reference_chunking") = true, py::arg("chunk_frames") = 300,
             py::arg("left_context") = 25, py::arg("max_graph_frames") = 8, py::arg("profile") = false,
             "a session on a runner shared with others")
        .def("push", [](speech_decoder_session & s, const codes_array & codes) {
            int64_t n = 0;
            const int32_t * data = frames_of(codes, s.n_quantizers(), n);
            std::vector<float> audio;
            {
                py::gil_scoped_release release;
                audio = s.push(data, n);
            }
            py::array_t<float> out(audio.size());
            std::copy(audio.begin(), audio.end(), out.mutable_data());
            return out;
        }, py::arg("codes"), "Decode frames [n, 16]; returns the n * samples_per_frame samples they determine")
        .def("reset", &speech_decoder_session::reset)
        .def("profile", &speech_decoder_session::profile, "seconds per <stage>/<op> (profile=True)")
        .def("profile_flops", &speech_decoder_session::profile_flops,
             "matrix-product flops per <stage>/<op>, the keys of profile() (profile=True)")
        .def("placement_report", [](const speech_decoder_session & s) { return report_dict(s.placement_report()); },
             "where the last launch ran: splits, ops per device, bytes copied, CPU fallbacks")
        .def_property_readonly("frames_decoded", &speech_decoder_session::frames_decoded)
        .def_property_readonly("samples_per_frame", &speech_decoder_session::samples_per_frame)
        .def_property_readonly("n_quantizers", &speech_decoder_session::n_quantizers)
        .def("decode_stages", [](speech_decoder_session & s, const codes_array & codes) {
            int64_t n = 0;
            const int32_t * data = frames_of(codes, s.n_quantizers(), n);
            std::map<std::string, speech_decoder_session::stage_output> stages;
            {
                py::gil_scoped_release release;
                stages = s.decode_stages(data, n);
            }
            py::dict out;
            for (auto & [name, so] : stages) {
                const int64_t rows = int64_t(so.values.size()) / so.channels;
                py::array_t<float> a({rows, so.channels});
                std::copy(so.values.begin(), so.values.end(), a.mutable_data());
                out[py::str(name)] = a;
            }
            return out;
        }, py::arg("codes"), "Every stage's output, [time, channels], decoding from a fresh state");
}

}  // namespace kazeia::bindings
