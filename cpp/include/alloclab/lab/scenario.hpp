// Scenario: the contract between an experiment and the runner.
//
// A scenario declares its parameters (ScenarioDef), builds its state for a topology (prepare, untimed, on the
// controlling thread, so lock_stat does not count it), gives each worker its job (work, timed by the worker
// itself), says how many acquisitions each lock class must have made (lock_expectations: the runner compares them
// with lock_stat, once, for every scenario alike) and checks its invariants after the run (finish), where it also
// writes its headline figures.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/digest.hpp"
#include "alloclab/base/histogram.hpp"
#include "alloclab/base/rng.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/lab/params.hpp"
#include "alloclab/lab/result.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/topology/cost_model.hpp"
#include "alloclab/topology/host_load.hpp"
#include "alloclab/topology/host_memory.hpp"
#include "alloclab/topology/topology.hpp"

namespace alloclab {

// Thrown by RunEnv::interruption_point() when the run must stop during set-up or teardown, and by the runner when a
// run is stopped while it waits for its turn. The runner ends the run: an interrupted run propagates it (nothing is
// returned); a timeout or a stop from another thread during set-up gives a result with stopped=True and no worker
// figures.
struct RunInterrupted : std::runtime_error {
  enum class Cause : uint8_t {
    interrupted,  // Ctrl-C (the run's poll said stop), or a run abandoned by stop_all_runs: its result is not wanted
    timeout,      // its timeout_s, during set-up
    stopped,      // stop_all_runs (Ctrl-C in Python's main thread), during set-up
  };
  explicit RunInterrupted(Cause cause)
      : std::runtime_error(cause == Cause::timeout   ? "timeout during set-up"
                           : cause == Cause::stopped ? "stopped during set-up"
                                                     : "interrupted"),
        cause(cause) {}
  Cause cause;
};

struct RunEnv {
  const Machine& machine;
  LockDomain& locks;
  const std::vector<Slot>& slots;
  uint64_t seed;
  bool oversubscribed;
  const std::function<bool()>* poll = nullptr;  // RunOptions::poll (Ctrl-C), or none
  uint64_t deadline = 0;  // host_ticks() at which the run's timeout_s ends its set-up; 0: none (and in teardown)
  // Set by stop_all_runs from another thread: `stop` ends the set-up (none in teardown, which then completes),
  // `abandoned` the teardown too (nobody wants the result).
  const std::atomic<bool>* stop = nullptr;
  const std::atomic<bool>* abandoned = nullptr;
  // Ctrl-C was seen (by the runner while the workers ran, or here): every later interruption point throws, so the
  // teardown of a run whose result is thrown away ends at once.
  mutable bool interrupted = false;

  // For the loops of prepare() and finish() that may run for seconds (millions of pages, areas or folios), cheap
  // enough to call at every step: every 64 calls it looks at the stop flags, about every 50 ms of host time (in
  // either clock) it asks the run's poll and the deadline, and throws RunInterrupted when the run must stop. It acts
  // only on the thread that runs prepare() and finish(), outside the virtual CPUs; on a worker (model code shared
  // with work(), on a worker thread or a virtual CPU's fiber) it does nothing, workers stop through
  // WorkerCtx::stopped().
  void interruption_point() const {
    using Cause = RunInterrupted::Cause;
    if (std::this_thread::get_id() != controller_ || vt::current_cpu() >= 0) return;
    if (interrupted) throw RunInterrupted(Cause::interrupted);
    if (++calls_ % 64) return;
    if (abandoned && abandoned->load(std::memory_order_relaxed)) {
      interrupted = true;
      throw RunInterrupted(Cause::interrupted);
    }
    if (stop && stop->load(std::memory_order_relaxed)) throw RunInterrupted(Cause::stopped);
    const uint64_t now = host_ticks();
    if (now - last_poll_ < poll_ticks_) return;
    last_poll_ = now;
    if (deadline && now >= deadline) throw RunInterrupted(Cause::timeout);
    if (poll && *poll && (*poll)()) {
      interrupted = true;
      throw RunInterrupted(Cause::interrupted);
    }
  }
  // The same check as a callable, for model code below the lab layer (mm::InterruptionPoint). Model objects may
  // outlive the run (a scenario is destroyed after run_scenario() returns): then the callable does nothing.
  std::function<void()> interruption_points() const {
    return [this, alive = alive_] {
      if (*alive) interruption_point();
    };
  }
  ~RunEnv() { *alive_ = false; }
  // (interruption_point's state)
  mutable uint64_t calls_ = 0, last_poll_ = 0;
  uint64_t poll_ticks_ = uint64_t(50e6 * clock_calibration().ticks_per_ns);
  std::thread::id controller_ = std::this_thread::get_id();
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The phases of one run that every worker sees: released, every worker started, the first worker ended. Workers
// look at it once per add_ops() (one relaxed load of a line that changes three times per run), so each can count
// the operations it completed while *all* workers were running: the run's window of real concurrency.
struct RunPhase {
  enum : uint32_t { closed = 0, released = 1, all_started = 2, first_ended = 3 };
  std::atomic<uint32_t> phase{closed};
  std::atomic<int> started{0};
  int workers = 0;

  void worker_started() {
    if (started.fetch_add(1, std::memory_order_acq_rel) + 1 == workers) raise(all_started);
  }
  void raise(uint32_t to) {
    uint32_t p = phase.load(std::memory_order_relaxed);
    while (p < to && !phase.compare_exchange_weak(p, to, std::memory_order_acq_rel)) {
    }
  }
};

class WorkerCtx;
namespace detail {
extern thread_local WorkerCtx* tls_worker;                        // a real-clock worker thread's own
extern thread_local std::vector<WorkerCtx>* tls_virtual_workers;  // a virtual-clock run's, by virtual CPU
}  // namespace detail

// What a worker sees: its slot, its random stream, the stop flag, and where it records what it did.
class WorkerCtx {
 public:
  // The calling worker's context (its thread's, or its virtual CPU's), for model code that finds its worker the way
  // the kernel finds `current`; nullptr outside the run's workers.
  static WorkerCtx* current() {
    if (detail::tls_virtual_workers)
      if (const int c = vt::current_cpu(); c >= 0) return &(*detail::tls_virtual_workers)[size_t(c)];
    return detail::tls_worker;
  }

  WorkerCtx(const Slot& slot, uint64_t seed, const std::atomic<bool>& stop, RunPhase& phase)
      : slot(slot), rng(seed, uint64_t(slot.worker)), stop_(&stop), phase_(&phase) {}

  const Slot slot;
  Rng rng;

  // Loops check this every iteration (one relaxed load) so Ctrl-C and timeouts end a run promptly.
  bool stopped() const { return stop_->load(std::memory_order_relaxed); }
  // Counts completed operations (a sync point of a virtual-clock run: the end of an operation is where the other
  // virtual CPUs may catch up, and the simulator polls for a stop).
  void add_ops(uint64_t n = 1) {
    vcost::sync();
    const uint32_t p = phase_->phase.load(std::memory_order_relaxed);
    if (p != seen_) [[unlikely]]
      note_phase(p);
    ops_ += n;
  }
  void record_latency_ns(uint64_t ns) { latency_.record(ns); }
  // Ends the timed part (the runner calls it after work() if the scenario did not): what the worker does
  // afterwards (freeing what it allocated) is not in its span. The first call counts; later ones do nothing.
  void end_timed() {
    if (timed_end_) return;
    timed_end_ = clock_ticks();
    sched_end_ = read_thread_sched();
    note_phase(phase_->phase.load(std::memory_order_acquire));
    if (seen_ < RunPhase::all_started) window_begin_ = ops_;  // ended before everyone started: empty window
    if (seen_ < RunPhase::first_ended) window_end_ = ops_;    // the first to end closes the window at its end
    seen_ = RunPhase::first_ended;
    phase_->raise(RunPhase::first_ended);
  }
  void metric(const std::string& name, double value) { metrics_.emplace_back(name, value); }
  // Folds the address of something the worker allocated (a pfn, a vmalloc address) into its alloc_digest, in
  // order: two runs with the same seed whose workers got the same addresses in the same order have equal digests.
  void record_alloc(uint64_t addr) {
    alloc_digest_ = digest_step(alloc_digest_, addr);
    ++allocs_recorded_;
  }
  // A calibrated busy-wait (hold or think time) that ends early when the run is stopped, so that a run of long
  // holds behind a FIFO queue of many waiters still stops promptly.
  void spin_ticks(uint64_t ticks) const {
    spin_for_ticks(ticks, [this] { return stopped(); });
  }

  uint64_t ops() const { return ops_; }
  // Operations completed while every worker of the run was running (from the last start to the first end).
  uint64_t ops_window() const { return window_end_ - window_begin_; }
  const LatencyHistogram& latency() const { return latency_; }
  uint64_t timed_end() const { return timed_end_; }
  const ThreadSched& sched_at_end() const { return sched_end_; }
  uint64_t alloc_digest() const { return alloc_digest_; }
  uint64_t allocs_recorded() const { return allocs_recorded_; }
  std::vector<std::pair<std::string, double>>& metrics() { return metrics_; }

 private:
  void note_phase(uint32_t p) {
    if (seen_ < RunPhase::all_started && p >= RunPhase::all_started) window_begin_ = ops_;
    if (seen_ < RunPhase::first_ended && p >= RunPhase::first_ended) window_end_ = ops_;
    seen_ = p;
  }

  const std::atomic<bool>* stop_;
  RunPhase* phase_;
  uint32_t seen_ = RunPhase::released;
  uint64_t ops_ = 0;
  uint64_t window_begin_ = 0, window_end_ = 0;
  uint64_t timed_end_ = 0;
  ThreadSched sched_end_;
  uint64_t alloc_digest_ = 0, allocs_recorded_ = 0;
  LatencyHistogram latency_;
  std::vector<std::pair<std::string, double>> metrics_;
};

// One lock class's acquisitions as the scenario's formula gives them for the run that happened.
struct LockExpectation {
  std::string key;  // names the summary columns: <key>_acquisitions, <key>_expected, <key>_formula
  std::string cls;  // the lock class, e.g. "zone->lock"
  // What lock_stat must count; none when this configuration has no formula (the formula then says why), so that the
  // columns stay the same in every configuration and the count is still reported.
  std::optional<uint64_t> expected;
  std::string formula;  // the formula with this run's numbers, e.g. "threads x (R + F) = 2 x (17 + 17) = 68"
};

// Every counter of a stats struct (ALLOCLAB_COUNTERS, base/counters.hpp) as summary values, under its own name.
template <class Stats>
void emit_counters(const Stats& s, NamedValues& out) {
  s.for_each_counter([&](const char* name, uint64_t v, const char*) { out.emplace_back(name, int64_t(v)); });
}
// The same as one worker's metrics.
template <class Stats>
void emit_counters(const Stats& s, WorkerCtx& ctx) {
  s.for_each_counter([&](const char* name, uint64_t v, const char*) { ctx.metric(name, double(v)); });
}

class Scenario {
 public:
  virtual ~Scenario() = default;
  virtual int nr_workers() const = 0;
  // The memory prepare() will allocate. The runner refuses a run that needs more than the machine has available,
  // before prepare() allocates anything. Scenarios that allocate more than a few MiB must override it.
  virtual MemoryNeed memory_needed(const Machine&) const { return {}; }
  // Where the workers run. Default: the run's placement policy over the model topology.
  virtual std::vector<Slot> place(const Machine& m, const Placement& p) const { return m.place(nr_workers(), p); }
  // The scenario's own lock kinds (lock_zoo's `lock`); the user's `locks=` entries win over them.
  virtual void lock_defaults(LockConfig&) const {}
  // Builds the state, untimed. May throw std::invalid_argument for parameters that do not fit the topology.
  virtual void prepare(const RunEnv& env) = 0;
  // One worker's job. Runs between the start barrier and the worker's own end time.
  virtual void work(WorkerCtx& ctx) = 0;
  // The acquisitions each lock class must have made, from what the run did (its geometry, its parameters, the
  // model's own event counts). Called once the workers ended, before finish(), whether lock_stat was on or not;
  // return nothing for a run the formulas do not cover (stopped early, an allocation failed). The runner compares
  // them with lock_stat and raises std::runtime_error naming the class, both numbers and the formula on a mismatch.
  virtual std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult&) const { return {}; }
  // After all workers ended (or were stopped): check invariants (throw std::logic_error on a violation, which is a
  // bug in the model) and append headline figures to r.summary.
  virtual void finish(const RunEnv& env, RunResult& r) = 0;
};

// A scenario's size parameter (ScenarioDef::size).
struct SizeParam {
  std::string name;
  int64_t step = 1;
};

// The size of a scenario whose size is always parameter `name`, in multiples of `step`.
inline std::function<SizeParam(const Params&)> size_is(std::string name, int64_t step = 1) {
  return [name = std::move(name), step](const Params&) { return SizeParam{name, step}; };
}

struct ScenarioDef {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  // Builds the scenario from validated parameters; throws std::invalid_argument for invalid combinations.
  std::function<std::unique_ptr<Scenario>(const Params&)> make;
  // The parameter that sets how much work a run with these parameters does (RunOptions::grow scales it), and the
  // multiple its values must be (e.g. whole pageblocks); empty for a scenario without one. A function of the
  // parameters, since one parameter may decide which other sets the size (page_alloc's pattern).
  std::function<SizeParam(const Params&)> size;
  // The smallest valid parameters that still run every path of the scenario with two workers on two model nodes,
  // in under a second: what the C++ sweep over every scenario, the property tests and the Python tests start from.
  std::map<std::string, Value> small;
  // The kernel version whose code paths and rules (pcp batch/high, where check_new_pages runs, ...) the scenario
  // runs by default, and which rules those are; the runner records it in the provenance as `kernel`.
  std::string kernel;
  // Lock class -> the parameter that picks its kind (lock_zoo: class "lock_zoo", parameter "lock"). A run's lock
  // override of such a class and the parameter name one thing: see with_lock_params() (runner.hpp).
  std::map<std::string, std::string> lock_params = {};
};

const std::vector<ScenarioDef>& scenarios();
const ScenarioDef& find_scenario(const std::string& name);  // throws std::invalid_argument naming "scenario"

}  // namespace alloclab
