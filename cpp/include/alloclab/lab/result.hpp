// RunResult: what one run hands back — one row per worker, lock_stat rows per class, the scenario's headline
// figures and the run's provenance. Plain data: the bindings turn it into DataFrames.
#pragma once

#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alloclab/lab/params.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/topology/topology.hpp"

namespace alloclab {

using NamedValues = std::vector<std::pair<std::string, Value>>;

struct WorkerRow {
  Slot slot;
  bool bind_ok = false;
  int cpu_used = -1;       // OS CPU the worker ran on after binding
  std::string bind_error;  // empty when bind_ok
  uint64_t ops = 0;
  uint64_t ops_window = 0;   // ops completed while every worker was running (RunPhase)
  double start_s = 0;        // the worker's timed part began this long after the run's release ...
  double end_s = 0;          // ... and ended this long after it
  double elapsed_s = 0;      // its own span, end_s - start_s
  double cpu_s = NAN;        // time it spent on a CPU during its span (schedstat; NaN where unknown)
  double runq_wait_s = NAN;  // time it was runnable but waited for a CPU (schedstat run delay; NaN where unknown)
  uint64_t lat_count = 0;    // latency samples recorded by the scenario (0: none, and the lat_* figures are NaN)
  double lat_mean_ns = NAN, lat_p50_ns = NAN, lat_p99_ns = NAN, lat_max_ns = NAN;
  uint64_t allocs_recorded = 0, alloc_digest = 0;       // WorkerCtx::record_alloc (0, 0: the scenario records none)
  std::vector<std::pair<std::string, double>> metrics;  // the scenario's per-worker figures
};

// WorkerRow's columns, in order (the scenario's own per-worker metrics follow them).
std::span<const Column<WorkerRow>> worker_columns();

struct RunResult {
  std::string scenario;
  NamedValues params;  // every parameter, given or defaulted
  std::vector<WorkerRow> workers;
  std::vector<LockStatRow> lockstat;  // empty when lock_stat was off
  bool lockstat_on = false;           // lock_stat was collected (rows absent for a class: never acquired)
  // The run's one clock: from the common release of the workers to the end of the last one's timed part.
  double elapsed_s = 0;
  double overlap = 0;      // share of elapsed_s during which every worker was running (last start to first end)
  double start_lag = 0;    // share of elapsed_s that passed before the last worker started
  NamedValues summary;     // headline figures, in the scenario's order
  NamedValues provenance;  // topology, placement, binding, oversubscription, lock kinds, seed, clock, ...
  bool stopped = false;    // interrupted or timed out: the figures cover the part that ran
  std::string stop_reason;

  // lock_stat's row of a class; nullptr when lock_stat was off or the class was never acquired.
  const LockStatRow* lock_row(std::string_view cls) const {
    for (const auto& row : lockstat)
      if (row.cls == cls) return &row;
    return nullptr;
  }
  // A lock_stat figure of a class: NaN when lock_stat was off (not measured), 0 when the class was never acquired.
  double lock_figure(std::string_view cls, double LockStatRow::*field) const {
    if (!lockstat_on) return NAN;
    const LockStatRow* row = lock_row(cls);
    return row ? row->*field : 0.0;
  }
  // A lock_stat count of a class: not measured when lock_stat was off, 0 when the class was never acquired.
  Value lock_count(std::string_view cls, uint64_t LockStatRow::*field) const {
    if (!lockstat_on) return kNotMeasured;
    const LockStatRow* row = lock_row(cls);
    return int64_t(row ? row->*field : 0);
  }
};

}  // namespace alloclab
