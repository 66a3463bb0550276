#include <pybind11/stl.h>

#include "bindings.h"
#include "kazeia/cpu_level.h"
#include "kazeia/devices.h"
#include "kazeia/launch_report.h"
#include "kazeia/thread_pool.h"

namespace py = pybind11;

namespace kazeia::bindings {

py::dict report_dict(const launch_report & r) {
    py::dict d;
    d["scheduled"] = r.scheduled;
    d["device"] = r.device;
    d["splits"] = r.splits;
    d["nodes"] = r.nodes;
    d["ops"] = r.ops;
    d["bytes_copied"] = r.bytes_copied;
    d["fallbacks"] = r.fallbacks;
    d["matmul_flops"] = r.matmul_flops;
    return d;
}

void register_devices(py::module_ & m) {
    py::class_<thread_pool, std::shared_ptr<thread_pool>>(m, "ThreadPool")
        .def(py::init<int>(), py::arg("n_threads"))
        .def_property_readonly("n_threads", &thread_pool::n_threads)
        .def_property("active", &thread_pool::active, &thread_pool::set_active,
                      "threads each launch uses (1..n_threads); the thread policy moves it between frames");

    m.def("devices", [] {
        py::list out;
        for (const auto & d : devices_list()) {
            py::dict e;
            e["name"] = d.name;
            e["description"] = d.description;
            e["type"] = d.type;
            e["backend"] = d.backend;
            e["memory_free"] = d.memory_free;
            e["memory_total"] = d.memory_total;
            e["async"] = d.async;
            e["host_buffer"] = d.host_buffer;
            e["host_buffer_type"] = d.host_buffer_type;
            py::list bufts;
            for (const auto & b : d.buffer_types) {
                py::dict bt;
                bt["name"] = b.name;
                bt["is_host"] = b.is_host;
                bufts.append(bt);
            }
            e["buffer_types"] = bufts;
            e["buffer_from_host_ptr"] = d.buffer_from_host_ptr;
            e["events"] = d.events;
            out.append(e);
        }
        return out;
    }, "ggml's devices: name, description, type, backend, memory and capabilities");

    m.def("cpu_level", [] {
        py::dict d;
        d["level"] = cpu_level_name(cpu_level_in_force());   // raises ValueError on a bad KAZEIA_CPU
        d["detected"] = cpu_level_name(cpu_level_detected());
        d["requested"] = cpu_level_requested();
        py::list levels;
        for (cpu_level l : cpu_levels_available()) levels.append(cpu_level_name(l));
        d["available"] = levels;
        py::list kernels;
        for (const kernel_status & k : kernel_statuses()) {
            py::dict e;
            e["id"] = k.id;
            e["name"] = k.name;
            e["needs"] = k.needs;
            e["active"] = k.active;
            e["otherwise"] = k.otherwise;
            kernels.append(e);
        }
        d["kernels"] = kernels;
        return d;
    }, "the CPU level Kazeia's kernels use (KAZEIA_CPU caps it), what the CPU has, the levels it can be capped to, and each kernel's state");

    m.def("cpu_level_names", [] {
        py::list names;
        for (cpu_level l : cpu_levels_of_architecture()) names.append(cpu_level_name(l));
        return names;
    }, "every CPU level of this architecture, highest first: the values KAZEIA_CPU takes besides auto");
}

}  // namespace kazeia::bindings
