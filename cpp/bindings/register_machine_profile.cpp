// pybind11 glue for MachineProfile: Python hands over a profile's flattened fields, the engine validates them.
#include <pybind11/stl.h>

#include "alloclab/topology/machine_profile.hpp"
#include "register.hpp"

namespace py = pybind11;
using namespace alloclab;

void register_machine_profile(py::module_& m) {
  m.def(
      "op_names", [] { return std::vector<std::string>(std::begin(kOpNames), std::end(kOpNames)); },
      "The model operations a profile costs in cycles (the fields of its op_cycles table), in ALLOCLAB_OPS order.");
  m.def(
      "private_cache_levels",
      [] {
        std::vector<std::tuple<std::string, int, std::string, std::string, std::string>> v;
        for (const auto& l : kPrivateCacheLevels)
          v.emplace_back(l.name, l.hwloc_level, l.below, l.size_field(), l.latency_field());
        return v;
      },
      "The private cache levels a profile can describe, innermost first (kPrivateCacheLevels): (name, hwloc level, "
      "below, size field, latency field): its size is the profile's size field (cache_kib.<name>), the latency of a "
      "line that has left it the latency field (cache_ns.<below>).");
  py::class_<MachineProfile, std::shared_ptr<MachineProfile>>(m, "MachineProfile")
      .def(py::init([](std::map<std::string, std::string> text, std::map<std::string, double> numbers,
                       std::vector<std::string> seeds) {
             return std::make_shared<MachineProfile>(
                 ProfileFields{std::move(text), std::move(numbers), std::move(seeds)});
           }),
           py::arg("text"), py::arg("numbers"), py::arg("seeds"),
           "Validates a profile's fields (dotted keys: text and numbers apart) or raises ValueError naming the field.")
      .def_property_readonly("name", &MachineProfile::name)
      .def_property_readonly("description", &MachineProfile::description)
      .def_property_readonly("seeds", &MachineProfile::seeds)
      .def_property_readonly("topology_source", &MachineProfile::topology_source)
      .def_property_readonly("topology",
                             [](const MachineProfile& p) { return std::const_pointer_cast<Topology>(p.topology()); })
      .def_property_readonly("values", &MachineProfile::values)
      .def_property_readonly("sources", &MachineProfile::sources)
      .def_property_readonly("hash", &MachineProfile::hash)
      .def_property_readonly("classes",
                             [](const MachineProfile& p) {
                               std::vector<std::string> out;
                               for (const auto c : p.distances().present()) out.emplace_back(to_string(c));
                               return out;
                             })
      .def("value", &MachineProfile::value, py::arg("key"))
      .def(
          "distance", [](const MachineProfile& p, int a, int b) { return std::string(to_string(p.distance(a, b))); },
          py::arg("a"), py::arg("b"))
      .def("transfer_ns", &MachineProfile::transfer_ns, py::arg("a"), py::arg("b"));
}
