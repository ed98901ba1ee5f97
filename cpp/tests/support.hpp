// Shared set-up for the C++ tests: the message of a rejected call, look-ups in a RunResult, and a fixture holding a
// synthetic machine, a lock domain with lock_stat on and a MemorySystem (the fixtures of the mm tests build on it).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/topology/topology.hpp"

namespace support {

// The message of the std::invalid_argument that f() throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The value named `key` in `values` (a run's summary or provenance, called `what` in the message); throws
// std::out_of_range when there is none.
inline const alloclab::Value& named_value(const alloclab::NamedValues& values, const std::string& key,
                                          const std::string& what) {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  throw std::out_of_range(what + " has no '" + key + "'");
}
// The summary value `key` of a run; throws std::out_of_range when the run has none.
inline const alloclab::Value& summary_value(const alloclab::RunResult& r, const std::string& key) {
  return named_value(r.summary, key, "summary");
}
// The provenance value `key` of a run; throws std::out_of_range when the run has none.
inline const alloclab::Value& provenance_value(const alloclab::RunResult& r, const std::string& key) {
  return named_value(r.provenance, key, "provenance");
}
// The integer summary value `key` (the engine's int64_t), as `Int` (uint64_t for tests that count in unsigned);
// throws std::bad_variant_access when the value is not an integer.
template <typename Int = int64_t>
Int summary_int(const alloclab::RunResult& r, const std::string& key) {
  return Int(std::get<int64_t>(summary_value(r, key)));
}
// The boolean summary value `key`; throws std::bad_variant_access when the value is not a bool.
inline bool summary_bool(const alloclab::RunResult& r, const std::string& key) {
  return std::get<bool>(summary_value(r, key));
}
// A run's lock_stat acquisitions of class `cls` (0 when the class has no row).
inline uint64_t lockstat_acquisitions(const alloclab::RunResult& r, const std::string& cls) {
  const alloclab::LockStatRow* row = r.lock_row(cls);
  return row ? row->acquisitions : 0;
}
// The per-worker figure `key` of worker row `w`, as `T` (the engine's double by default); throws
// std::out_of_range when the worker has none.
template <typename T = double>
T worker_metric(const alloclab::WorkerRow& w, const std::string& key) {
  for (const auto& [k, v] : w.metrics)
    if (k == key) return T(v);
  throw std::out_of_range("worker has no metric '" + key + "'");
}

// A synthetic machine, a lock domain with lock_stat on, and (after build_memory) a MemorySystem on them. Nothing is
// attached: each fixture says which thread counts as which worker.
class MemoryTest : public ::testing::Test {
 protected:
  // The machine `topo` and its lock domain (`lc`; `spin_yield`: spinning waiters yield, for tests that run more
  // threads than the host has PUs) with lock_stat counters for `workers` workers.
  void build_machine(const std::string& topo, const alloclab::LockConfig& lc = {}, bool spin_yield = false,
                     int workers = 1) {
    machine = std::make_unique<alloclab::Machine>(alloclab::Topology::synthetic(topo), alloclab::Topology::host());
    locks = std::make_unique<alloclab::LockDomain>(lc, true, spin_yield);
    locks->reset_stats(workers);
  }
  void build_memory(const alloclab::mm::MemoryConfig& cfg) {
    ms = std::make_unique<alloclab::mm::MemorySystem>(*machine, *locks, cfg);
  }
  // The domain's lock_stat acquisitions of class `cls` so far (0 when the class has no row).
  uint64_t acquisitions(const std::string& cls) const {
    for (const auto& row : locks->rows())
      if (row.cls == cls) return row.acquisitions;
    return 0;
  }

  std::unique_ptr<alloclab::Machine> machine;
  std::unique_ptr<alloclab::LockDomain> locks;
  std::unique_ptr<alloclab::mm::MemorySystem> ms;
};

}  // namespace support
