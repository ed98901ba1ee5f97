// The runner: one run of one scenario on pinned worker threads.
//
// Starts the workers, binds each to its slot's host PU, and releases them together: every worker arrives at the
// start gate, then all spin on one shared flag that the controlling thread sets (no sleep/wake barrier, whose
// wake-ups would start the workers a scheduler tick apart). The run has one clock: each worker records the ticks
// at which its timed part starts and ends, and the run's elapsed time is the span from the release to the last
// end; `overlap` says how much of it every worker was running. Oversubscription is what happened, not what was
// configured: several workers on one host PU, other runs in this process, other runnable tasks on the host, and
// each worker's time waiting on a runqueue (schedstat). By default runs in one process are serialised. The
// controlling thread polls its stop condition every 50 ms (Ctrl-C, timeout); every worker thread is joined before
// the runner returns or unwinds (also on errors and on a forced unwind), and the RunResult is assembled.
// A virtual-clock run (clock = virtual) runs the same scenario on the virtual CPUs of a machine profile instead: the
// topology is the profile's, each worker is a fiber of the simulator (base/scheduler.hpp) on the calling thread, the
// release is at virtual time 0 and each worker leaves the gate within one spin-loop step of it, in an order the
// run's seed draws (so another seed is another interleaving), locks are VirtualLocks and time is charged by the cost
// model (topology/cost_model.hpp). A stop is soft first (the workers see stopped() and end their operation) and
// hard after a second of host time (every wait fails, the workers unwind mid-operation, and the model's state is
// not checked). Nothing about the host (binding, oversubscription, schedstat) applies.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "alloclab/base/enum_names.hpp"
#include "alloclab/lab/params.hpp"
#include "alloclab/lab/result.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock_class.hpp"
#include "alloclab/topology/cost_model.hpp"
#include "alloclab/topology/host_memory.hpp"
#include "alloclab/topology/machine_profile.hpp"
#include "alloclab/topology/topology.hpp"

namespace alloclab {

// The clock of a run: the host's, or the virtual time of a simulated machine.
enum class ClockKind : uint8_t { real, virtual_time };
inline constexpr EnumNames<ClockKind, 2> kClockKindNames{
    {{{ClockKind::real, "real"}, {ClockKind::virtual_time, "virtual"}}}};

struct RunOptions {
  std::shared_ptr<const Topology> model;  // null: the host
  Placement placement;
  bool lockstat = true;
  LockConfig locks;
  bool strict = false;  // a binding failure is an error instead of a recorded outcome
  uint64_t seed = 1;
  // 0: no limit; else the run is stopped this long (host time, in either clock) after it began, set-up included, and
  // says so: stopped, with the reason; a stop during set-up returns no worker figures. The checks and teardown after
  // the run always finish.
  double timeout_s = 0;
  // A real-clock run whose elapsed time is below this is flagged `short_run` (too short to measure: timer and
  // start-up effects dominate; a virtual clock has neither, so it is never short). With `grow`, run() repeats it with
  // the scenario's size parameter grown, as Google Benchmark grows iterations to reach its min_time, until it is not.
  double min_time_s = 0.02;
  bool grow = false;
  // With `grow`: parameters the grown size must also fit the host's memory with, over the run's own (e.g. threads=8:
  // the most workers the caller will run at the size it grows). A grown size whose run with them would not fit, with
  // a quarter to spare, is cut back by a quarter of its step at a time; growth stops where no larger size fits.
  std::map<std::string, Value> grow_fit;
  // Wait for every other run of this process to end, and keep others from starting, while this one runs. Without
  // it, concurrent runs share the host and each counts the others' workers towards oversubscription.
  bool exclusive = true;
  // Called every ~50 ms on the calling thread while the run waits for its turn and while the workers run, and from
  // the interruption points of prepare() and finish(); returning true stops the run (while waiting or from an
  // interruption point: run() throws RunInterrupted, after every thread it started has been joined).
  std::function<bool()> poll;
  // The clock (see the file comment). A virtual-clock run needs `machine` and takes `costs` (default table); it has
  // no `model` (the profile's topology is the model) and nothing to be `strict` about.
  ClockKind clock = ClockKind::real;
  std::shared_ptr<const MachineProfile> machine;
  std::optional<Costs> costs;

  // std::invalid_argument naming the option, its value and what is allowed, for options out of range or combined
  // with a clock they make no sense with.
  void validate() const;
};

// The parameters a run of `def` gets from `given` and the lock overrides `locks`: a parameter that picks a lock class's
// kind (ScenarioDef::lock_params) takes the override's kind when it is not given, so the result records the kind that
// ran. Throws std::invalid_argument when both are given and differ (lock=spin with locks={lock_zoo: ticket}): a
// conflict, never a run relabelled.
std::map<std::string, Value> with_lock_params(const ScenarioDef& def, std::map<std::string, Value> given,
                                              const LockConfig& locks);

// What run() checks before it builds anything, and run() starts with it: the scenario exists, the options are valid
// (RunOptions::validate, `grow` needs a size parameter), with_lock_params(), and the parameters fit the declaration
// (Params::resolve). Returns the resolved parameters; throws std::invalid_argument. What only building and placing
// the run finds (memory, combinations a scenario refuses, workers that do not fit the model) it leaves to run().
Params check_run(const std::string& scenario, const std::map<std::string, Value>& given, const RunOptions& opt);

// Looks the scenario up, validates `params` against its declaration, builds it and runs it.
RunResult run(const std::string& scenario, const std::map<std::string, Value>& params, const RunOptions& opt);

// Runs an already-built scenario (`name` and `params` are recorded in the result). run() ends here; tests use it to
// drive scenarios of their own.
RunResult run_scenario(Scenario& sc, const std::string& name, const Params& params, const RunOptions& opt);

std::string version();

// Stops every run in flight in this process (Ctrl-C in Python's main thread, interpreter exit); each returns
// stopped, with `reason` (a run in its set-up ends it at its next interruption point: "<reason>, during set-up (no
// worker ran)"), and a run still waiting for its turn throws RunInterrupted. With `abandon` (nobody will use the
// results: the interpreter is exiting) a run's teardown ends at its next interruption point too, and run() throws
// RunInterrupted. Returns how many it stopped.
int stop_all_runs(const std::string& reason, bool abandon = false);
// Runs in flight in this process right now.
int runs_in_flight();

}  // namespace alloclab
