// RunResult: what one run hands back — one row per worker, lock_stat rows per class, the scenario's headline
// figures and the run's provenance. Plain data: the bindings turn it into DataFrames.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "alloclab/lock_domain.hpp"
#include "alloclab/params.hpp"
#include "alloclab/topology.hpp"

namespace alloclab {

using NamedValues = std::vector<std::pair<std::string, Value>>;

struct WorkerRow {
  Slot slot;
  bool bind_ok = false;
  int cpu_used = -1;       // OS CPU the worker ran on after binding
  std::string bind_error;  // empty when bind_ok
  uint64_t ops = 0;
  double elapsed_s = 0;    // the worker's own timed part
  uint64_t lat_count = 0;  // latency samples recorded by the scenario (0: none)
  double lat_mean_ns = 0, lat_p50_ns = 0, lat_p99_ns = 0, lat_max_ns = 0;
  uint64_t allocs_recorded = 0, alloc_digest = 0;       // WorkerCtx::record_alloc (0, 0: the scenario records none)
  std::vector<std::pair<std::string, double>> metrics;  // the scenario's per-worker figures
};

struct RunResult {
  std::string scenario;
  NamedValues params;  // every parameter, given or defaulted
  std::vector<WorkerRow> workers;
  std::vector<LockStatRow> lockstat;
  NamedValues summary;     // headline figures, in the scenario's order
  NamedValues provenance;  // topology, placement, binding, oversubscription, lock kinds, seed, clock, ...
  bool stopped = false;    // interrupted or timed out: the figures cover the part that ran
  std::string stop_reason;
};

}  // namespace alloclab
