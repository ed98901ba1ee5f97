// pybind11 glue: converts arguments, releases the GIL around the whole run, polls for Ctrl-C, hands back plain
// Python containers (the alloclab package turns them into DataFrames). No model logic lives here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <span>
#include <stdexcept>

#include "alloclab/base/suggest.hpp"
#include "alloclab/lab/runner.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock_class.hpp"
#include "alloclab/mm/shmem.hpp"
#include "alloclab/mm/vmalloc/percpu.hpp"
#include "alloclab/topology/topology.hpp"
#include "gil_gate.hpp"
#include "register.hpp"

namespace py = pybind11;
using namespace alloclab;
using alloclab::bindings::gil_gate;
using alloclab::bindings::wait_for_process_exit;

namespace {

// The kind letter of a numpy scalar or 0-d array ('b' bool, 'i'/'u' integer, 'f' float, ...), 0 for anything else.
char numpy_kind(const py::handle& o) {
  const py::object dtype = py::getattr(o, "dtype", py::none());
  if (dtype.is_none() || py::getattr(o, "ndim", py::int_(1)).cast<int>() != 0) return 0;
  const std::string kind = py::str(py::getattr(dtype, "kind", py::str("")));
  return kind.size() == 1 ? kind[0] : 0;
}

// A parameter value as the engine's Value: Python and numpy bools, integers (anything with __index__), floats
// (np.float32 too) and strings. The engine then checks it against the parameter's type and range.
Value to_value(const std::string& name, const py::handle& o) {
  const auto unsupported = [&] {
    return std::invalid_argument(name + ": unsupported value " + py::repr(o).cast<std::string>() +
                                 " (expected a bool, an int, a float or a str)");
  };
  const char kind = numpy_kind(o);
  if (py::isinstance<py::bool_>(o) || kind == 'b') return PyObject_IsTrue(o.ptr()) == 1;
  if (py::isinstance<py::float_>(o) || kind == 'f') return PyFloat_AsDouble(o.ptr());
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (!py::hasattr(o, "__index__")) throw unsupported();
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()));
  if (!index) {
    PyErr_Clear();
    throw unsupported();  // e.g. a numpy array of more than one element
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow)
    throw std::invalid_argument(name + ": value out of range: " + py::str(index).cast<std::string>() +
                                " (allowed: -9223372036854775808..9223372036854775807)");
  return int64_t(v);
}

py::object from_value(const Value& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

py::list named(const NamedValues& values) {
  py::list out;
  for (const auto& [k, v] : values) out.append(py::make_tuple(k, from_value(v)));
  return out;
}

// A table as columns of Python values, from the engine's column list (the row type declares its columns once).
template <class Row>
py::dict columns(const std::vector<Row>& rows, std::span<const Column<Row>> cols) {
  py::dict d;
  for (const Column<Row>& c : cols) {
    py::list l;
    for (const Row& r : rows) l.append(from_value(c.get(r)));
    d[c.name] = l;
  }
  return d;
}

py::dict workers_columns(const std::vector<WorkerRow>& rows) {
  py::dict d = columns(rows, worker_columns());
  if (std::none_of(rows.begin(), rows.end(), [](const WorkerRow& r) { return r.allocs_recorded > 0; })) {
    d.attr("pop")("allocs_recorded");  // a scenario that allocates nothing has no digest to show
    d.attr("pop")("alloc_digest");
  }
  std::vector<std::string> metric_names;  // union, in first-seen order
  std::set<std::string> seen;
  for (const auto& r : rows)
    for (const auto& [k, v] : r.metrics)
      if (seen.insert(k).second) metric_names.push_back(k);
  for (const auto& name : metric_names) {
    py::list l;
    for (const auto& r : rows) {
      py::object v = py::float_(std::numeric_limits<double>::quiet_NaN());
      for (const auto& [k, x] : r.metrics)
        if (k == name) v = py::float_(x);
      l.append(v);
    }
    d[py::str(name)] = l;
  }
  return d;
}

// Scenario parameters as the engine's values, by name.
std::map<std::string, Value> to_given(const py::dict& params) {
  std::map<std::string, Value> given;
  for (const auto& [k, v] : params) {
    const std::string name = py::str(k);
    given[name] = to_value(name, v);
  }
  return given;
}

// Lock class -> kind name overrides as a LockConfig (which checks the class and kind names).
LockConfig to_locks(const py::dict& locks) {
  LockConfig config;
  for (const auto& [k, v] : locks) {
    if (!py::isinstance<py::str>(v))
      throw std::invalid_argument("locks['" + py::str(k).cast<std::string>() + "']: expected a lock kind name, got " +
                                  py::repr(v).cast<std::string>());
    config.set(py::str(k).cast<std::string>(), v.cast<std::string>());
  }
  return config;
}

// run()'s options from the arguments that alloclab._core.run and check_run share.
RunOptions to_options(std::shared_ptr<const Topology> topology, const py::object& placement, bool lockstat,
                      const py::dict& locks, bool strict, int64_t seed, double timeout_s, double min_time_s, bool grow,
                      const py::dict& grow_fit, bool exclusive, const std::string& clock,
                      std::shared_ptr<const MachineProfile> machine, const py::object& costs) {
  RunOptions opt;
  opt.model = std::move(topology);
  if (py::isinstance<py::str>(placement)) {
    opt.placement = Placement::parse(placement.cast<std::string>());
  } else {
    opt.placement.policy = Placement::Policy::list;
    try {
      opt.placement.pus = placement.cast<std::vector<int>>();
    } catch (const py::cast_error&) {
      throw std::invalid_argument("placement: expected 'compact', 'scatter' or a list of model PUs, got " +
                                  py::repr(placement).cast<std::string>());
    }
  }
  opt.lockstat = lockstat;
  opt.locks = to_locks(locks);
  opt.strict = strict;
  opt.seed = uint64_t(seed);  // alloclab._run has checked it is in 0..2^63-1
  opt.timeout_s = timeout_s;
  opt.min_time_s = min_time_s;
  opt.grow = grow;
  opt.grow_fit = to_given(grow_fit);
  opt.exclusive = exclusive;
  opt.clock = kClockKindNames.parse(clock, "clock");
  opt.machine = std::move(machine);
  if (!costs.is_none()) {
    if (!py::isinstance<py::str>(costs))
      throw std::invalid_argument("costs: expected 'table' or 'measured', got " + py::repr(costs).cast<std::string>());
    opt.costs = kCostsNames.parse(costs.cast<std::string>(), "costs");
  }
  return opt;
}

// What run_py would check before building anything (check_run), without running; the resolved parameters.
py::list check_py(const std::string& scenario, const py::dict& params, std::shared_ptr<const Topology> topology,
                  const py::object& placement, bool lockstat, const py::dict& locks, bool strict, int64_t seed,
                  double timeout_s, double min_time_s, bool grow, const py::dict& grow_fit, bool exclusive,
                  const std::string& clock, std::shared_ptr<const MachineProfile> machine, const py::object& costs) {
  const Params resolved =
      check_run(scenario, to_given(params),
                to_options(std::move(topology), placement, lockstat, locks, strict, seed, timeout_s, min_time_s, grow,
                           grow_fit, exclusive, clock, std::move(machine), costs));
  return named(NamedValues(resolved.values().begin(), resolved.values().end()));
}

py::dict run_py(const std::string& scenario, const py::dict& params, std::shared_ptr<const Topology> topology,
                const py::object& placement, bool lockstat, const py::dict& locks, bool strict, int64_t seed,
                double timeout_s, double min_time_s, bool grow, const py::dict& grow_fit, bool exclusive,
                const std::string& clock, std::shared_ptr<const MachineProfile> machine, const py::object& costs) {
  const std::map<std::string, Value> given = to_given(params);
  RunOptions opt = to_options(std::move(topology), placement, lockstat, locks, strict, seed, timeout_s, min_time_s,
                              grow, grow_fit, exclusive, clock, std::move(machine), costs);

  // Ctrl-C: the controlling thread takes the GIL every 50 ms and runs Python's signal handlers; a raised exception
  // (KeyboardInterrupt) stops the run and is re-raised once every worker has been joined. At interpreter exit the
  // GIL is not taken again (GilGate): the poll then says stop.
  PyObject *etype = nullptr, *evalue = nullptr, *etb = nullptr;
  opt.poll = [&]() {
    if (!gil_gate().enter()) return true;
    py::gil_scoped_acquire gil;
    gil_gate().taken();
    if (PyErr_CheckSignals() == 0) return false;
    PyErr_Fetch(&etype, &evalue, &etb);
    return true;
  };
  RunResult r;
  std::exception_ptr error;
  PyThreadState* state = PyEval_SaveThread();
  gil_gate().left_python();
  try {
    r = run(scenario, given, opt);
  } catch (...) {
    error = std::current_exception();
  }
  if (!gil_gate().enter()) wait_for_process_exit();  // the interpreter is exiting; every worker has been joined
  PyEval_RestoreThread(state);
  gil_gate().taken();
  gil_gate().back_in_python();
  try {
    if (error) std::rethrow_exception(error);
  } catch (const RunInterrupted& e) {
    // Stopped by this thread's Ctrl-C during set-up or teardown (the poll fetched the KeyboardInterrupt, raised
    // below), by stop_all_runs while this run waited for its turn, or abandoned by it (interpreter exit).
    if (!etype) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
      throw py::error_already_set();
    }
  }
  if (etype) {
    PyErr_Restore(etype, evalue, etb);
    throw py::error_already_set();
  }
  py::dict out;
  out["scenario"] = r.scenario;
  out["params"] = named(r.params);
  out["workers"] = workers_columns(r.workers);
  out["lockstat"] = columns(r.lockstat, lockstat_columns());
  out["lockstat_text"] = LockDomain::format(r.lockstat);
  out["summary"] = named(r.summary);
  out["provenance"] = named(r.provenance);
  out["stopped"] = r.stopped;
  out["stop_reason"] = r.stop_reason;
  return out;
}

py::list scenarios_py() {
  py::list out;
  for (const auto& d : scenarios()) {
    py::list params;
    for (const auto& p : d.params) {
      py::dict pd;
      pd["name"] = p.name;
      pd["type"] = std::string(to_string(p.type));
      pd["default"] = from_value(p.def);
      pd["allowed"] = p.allowed();
      pd["min"] = p.min;
      pd["max"] = p.max;
      pd["choices"] = p.choices;
      pd["doc"] = p.doc;
      params.append(pd);
    }
    py::dict sd;
    sd["name"] = d.name;
    sd["doc"] = d.doc;
    sd["kernel"] = d.kernel;
    sd["params"] = params;
    py::dict small;
    for (const auto& [k, v] : d.small) small[py::str(k)] = from_value(v);
    sd["small"] = small;
    out.append(sd);
  }
  return out;
}

// (name, doc) of each column the engine declares for a row type.
template <class Row>
py::list column_docs(std::span<const Column<Row>> cols) {
  py::list l;
  for (const Column<Row>& c : cols) l.append(py::make_tuple(std::string(c.name), std::string(c.doc)));
  return l;
}

// (name, doc) of each counter of a stats struct's list (ALLOCLAB_COUNTERS), as emit_counters names them.
template <class Stats>
py::list counter_docs() {
  py::list l;
  Stats{}.for_each_counter([&](const char* name, uint64_t, const char* doc) {
    l.append(py::make_tuple(std::string(name), std::string(doc)));
  });
  return l;
}

// alloclab._core.run and check_run take the same arguments, declared here once.
template <class F>
void def_run_arguments(py::module_& m, const char* name, F f, const char* doc) {
  m.def(name, f, py::arg("scenario"), py::arg("params"), py::arg("topology") = nullptr,
        py::arg("placement") = "compact", py::arg("lockstat") = true, py::arg("locks") = py::dict(),
        py::arg("strict") = false, py::arg("seed") = 1, py::arg("timeout_s") = 0.0, py::arg("min_time_s") = 0.02,
        py::arg("grow") = false, py::arg("grow_fit") = py::dict(), py::arg("exclusive") = true,
        py::arg("clock") = "real", py::arg("machine") = nullptr, py::arg("costs") = py::none(), doc);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "alloclab engine (C++20): topology, locks with lock_stat, allocator models, scenarios, runner";
  m.attr("__version__") = version();

  py::class_<Topology, std::shared_ptr<Topology>>(m, "Topology")
      .def_static("host", [] { return std::const_pointer_cast<Topology>(Topology::host()); })
      // hwloc parses and builds without the GIL: other Python threads run meanwhile.
      .def_static(
          "synthetic", [](const std::string& s) { return std::const_pointer_cast<Topology>(Topology::synthetic(s)); },
          py::call_guard<py::gil_scoped_release>())
      .def_static(
          "from_xml", [](const std::string& p) { return std::const_pointer_cast<Topology>(Topology::from_xml(p)); },
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("nodes", &Topology::nr_nodes)
      .def_property_readonly("pus", &Topology::nr_pus)
      .def_property_readonly("cores", &Topology::nr_cores)
      .def_property_readonly("description", &Topology::description)
      .def_property_readonly("source", [](const Topology& t) { return std::string(to_string(t.source())); })
      .def("pus_of_node", &Topology::pus_of_node, py::arg("node"))
      .def("node_of_pu", &Topology::node_of_pu, py::arg("pu"))
      .def("synthetic_string", &Topology::synthetic_string)
      .def("tree", &Topology::tree)
      .def("__repr__", &Topology::tree);

  def_run_arguments(m, "run", &run_py, "Runs a scenario once (alloclab.run).");
  def_run_arguments(m, "check_run", &check_py,
                    "What run checks before it builds anything (scenario, parameters, options, lock overrides and "
                    "their conflicts with parameters), without running; the resolved parameters as (name, value) "
                    "pairs.");
  register_machine_profile(m);
  register_calibration(m);
  m.def("stop_all_runs", &stop_all_runs, py::arg("reason"), py::arg("abandon") = false,
        py::call_guard<py::gil_scoped_release>(),
        "Stops every run in flight in this process (each returns stopped, with `reason`; with `abandon` a run in its "
        "teardown ends it and raises KeyboardInterrupt instead); returns how many.");
  m.def("runs_in_flight", &runs_in_flight, py::call_guard<py::gil_scoped_release>());
  m.def(
      "runs_outside_python", [] { return gil_gate().runs_outside(); }, py::call_guard<py::gil_scoped_release>(),
      "alloclab.run calls that released the GIL and have not taken it back.");
  m.def(
      "close_gil_gate", [] { gil_gate().close(); }, py::call_guard<py::gil_scoped_release>(),
      "From here on no run's thread takes the GIL again (interpreter exit; see _lifecycle).");
  m.def(
      "did_you_mean",
      [](const std::string& name, const std::vector<std::string>& candidates) {
        return did_you_mean(name, candidates);
      },
      py::arg("name"), py::arg("candidates"),
      "The tail of an error message naming the candidates closest to a mistyped name (\"; did you mean 'x'?\"), or "
      "\"\".");
  m.def("scenarios", &scenarios_py);
  m.def(
      "worker_columns", [] { return column_docs(worker_columns()); },
      "(name, doc) of every column of a run's per-worker table that comes before the scenario's own figures.");
  m.def(
      "counters",
      [] {
        py::dict d;  // the stats structs whose counters scenarios emit whole (emit_counters), by struct name
        d["ShmemStats"] = counter_docs<mm::ShmemStats>();
        d["VmallocStats"] = counter_docs<vmalloc::VmallocStats>();
        return d;
      },
      "(name, doc) of every counter of the stats structs that scenarios emit as figures, by struct name.");
  m.def("lock_kinds", [] {
    py::list l;
    for (const auto& k : lock_kinds())
      l.append(py::make_tuple(std::string(k.name), std::string(k.doc), k.fifo, k.numa_aware, std::string(k.base),
                              k.read_side, k.lock.rmws, k.lock.accesses, k.unlock.rmws, k.unlock.accesses));
    return l;
  });
  m.def("lock_classes", [] {
    py::list l;
    for (const auto& c : lock_class_catalogue()) {
      l.append(py::make_tuple(std::string(c.name), std::string(to_string(c.nature)),
                              std::string(to_string(LockConfig().kind_for(c.name))), std::string(c.where)));
    }
    return l;
  });
}
