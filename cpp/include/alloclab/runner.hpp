// The runner: one run of one scenario on pinned worker threads.
//
// Starts the workers, binds each to its slot's host PU, releases them together from one start gate, lets each
// time its own work, polls the controlling thread's stop condition every 50 ms (Ctrl-C, timeout), joins every
// thread before returning (none is left behind, also on errors), and assembles the RunResult.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "alloclab/host_memory.hpp"
#include "alloclab/lock_class.hpp"
#include "alloclab/params.hpp"
#include "alloclab/result.hpp"
#include "alloclab/scenario.hpp"
#include "alloclab/topology.hpp"

namespace alloclab {

struct RunOptions {
  std::shared_ptr<const Topology> model;  // null: the host
  Placement placement;
  bool lockstat = true;
  LockConfig locks;
  bool strict = false;  // a binding failure is an error instead of a recorded outcome
  uint64_t seed = 1;
  // 0: no limit; else the run is stopped this long after it began (set-up included) and says so: stopped, with the
  // reason; a stop during set-up returns no worker figures. The checks and teardown after the run always finish.
  double timeout_s = 0;
  // Called every ~50 ms on the calling thread while the workers run, and from the interruption points of prepare()
  // and finish(); returning true stops the run (from an interruption point: run() throws RunInterrupted, after
  // every thread it started has been joined).
  std::function<bool()> poll;
};

// Looks the scenario up, validates `params` against its declaration, builds it and runs it.
RunResult run(const std::string& scenario, const std::map<std::string, Value>& params, const RunOptions& opt);

// Runs an already-built scenario (`name` and `params` are recorded in the result). run() ends here; tests use it to
// drive scenarios of their own.
RunResult run_scenario(Scenario& sc, const std::string& name, const Params& params, const RunOptions& opt);

std::string version();

}  // namespace alloclab
