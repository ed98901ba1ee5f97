// pybind11 glue for the calibration measurements: each call pins its own threads and runs without the GIL.
#include <pybind11/stl.h>

#include "alloclab/lab/calibrate.hpp"
#include "register.hpp"

namespace py = pybind11;
using namespace alloclab;

void register_calibration(py::module_& m) {
  auto c = m.def_submodule("calibration", "Measurements of the host for `alloclab calibrate` (see calibrate.hpp)");
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  c.def("host_synthetic", &calibration::host_synthetic, nogil);
  c.def(
      "host_transfer_pairs",
      [](size_t max_pairs) {
        std::vector<std::pair<std::string, std::vector<std::pair<int, int>>>> out;
        for (auto& [cls, pairs] : calibration::host_transfer_pairs(max_pairs))
          out.emplace_back(std::string(to_string(cls)), std::move(pairs));
        return out;
      },
      py::arg("max_pairs"), nogil);
  c.def("node_core_pus", &calibration::node_core_pus, py::arg("node"), nogil);
  c.def("host_cache_bytes", &calibration::host_cache_bytes, py::arg("level"), nogil);
  c.def("host_llc_bytes", &calibration::host_llc_bytes, nogil);
  c.def("transfer_ns", &calibration::transfer_ns, py::arg("pu_a"), py::arg("pu_b"), py::arg("samples"),
        py::arg("round_trips"), nogil);
  c.def("futex_wake_ns", &calibration::futex_wake_ns, py::arg("waker_pu"), py::arg("wakee_pu"), py::arg("samples"),
        py::arg("sleep_us"), nogil);
  c.def(
      "bandwidth_gbs",
      [](const std::string& kind, const std::vector<int>& pus, size_t bytes_per_thread, int trials) {
        const Stream k = kStreamNames.parse(kind, "kind");
        py::gil_scoped_release nogil;
        return calibration::bandwidth_gbs(k, pus, bytes_per_thread, trials);
      },
      py::arg("kind"), py::arg("pus"), py::arg("bytes_per_thread"), py::arg("trials"));
  c.def(
      "misses_in_flight",
      [](int pu, size_t bytes, int trials, size_t misses) {
        const auto r = calibration::misses_in_flight(pu, bytes, trials, misses);
        return std::tuple(r.lines, r.latency_ns, r.best_k);
      },
      py::arg("pu"), py::arg("bytes"), py::arg("trials"), py::arg("misses"), nogil,
      "(misses in flight, latency ns, best K): see calibrate.hpp");
  c.def(
      "page_op_ns",
      [](const std::string& op, int pu, size_t bytes, int trials, bool ascending) {
        const PageOp o = kPageOpNames.parse(op, "op");
        py::gil_scoped_release nogil;
        return calibration::page_op_ns(o, ascending, pu, bytes, trials);
      },
      py::arg("op"), py::arg("pu"), py::arg("bytes"), py::arg("trials"), py::arg("ascending") = false);
  c.def("core_ghz", &calibration::core_ghz, py::arg("pu"), py::arg("trials"), nogil);
  c.def("op_ns", &calibration::op_ns, py::arg("pu"), py::arg("trials"), py::arg("ops"), nogil);
}
