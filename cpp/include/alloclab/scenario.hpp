// Scenario: the contract between an experiment and the runner.
//
// A scenario declares its parameters (ScenarioDef), builds its state for a topology (prepare, untimed, on the
// controlling thread, so lock_stat does not count it), gives each worker its job (work, timed by the worker
// itself) and checks its invariants after the run (finish), where it also writes its headline figures.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloclab/clock.hpp"
#include "alloclab/histogram.hpp"
#include "alloclab/host_memory.hpp"
#include "alloclab/lock_domain.hpp"
#include "alloclab/params.hpp"
#include "alloclab/result.hpp"
#include "alloclab/rng.hpp"
#include "alloclab/topology.hpp"

namespace alloclab {

// Thrown by RunEnv::interruption_point() when the run must stop during set-up or teardown: Ctrl-C (the run's poll
// said stop) or, during set-up, its timeout. The runner ends the run: a Ctrl-C propagates (nothing is returned), a
// timeout during set-up gives a result with stopped=True and no worker figures.
struct RunInterrupted : std::runtime_error {
  explicit RunInterrupted(bool timed_out)
      : std::runtime_error(timed_out ? "timeout during set-up" : "interrupted"), timed_out(timed_out) {}
  bool timed_out;
};

struct RunEnv {
  const Machine& machine;
  LockDomain& locks;
  const std::vector<Slot>& slots;
  uint64_t seed;
  bool oversubscribed;
  const std::function<bool()>* poll = nullptr;  // RunOptions::poll (Ctrl-C), or none
  uint64_t deadline = 0;  // clock_ticks() at which the run's timeout_s ends its set-up; 0: none (and in teardown)
  // Ctrl-C was seen (by the runner while the workers ran, or here): every later interruption point throws, so the
  // teardown of a run whose result is thrown away ends at once.
  mutable bool interrupted = false;

  // For the loops of prepare() and finish() that may run for seconds (millions of pages, areas or folios), cheap
  // enough to call at every step: about every 50 ms it asks the run's poll and clock, and throws RunInterrupted when
  // the run must stop. It acts only on the thread that runs prepare() and finish(); on a worker (model code shared
  // with work()) it does nothing, workers stop through WorkerCtx::stopped().
  void interruption_point() const {
    if (std::this_thread::get_id() != controller_) return;
    if (interrupted) throw RunInterrupted(false);
    if (++calls_ % 64) return;
    const uint64_t now = clock_ticks();
    if (now - last_poll_ < poll_ticks_) return;
    last_poll_ = now;
    if (deadline && now >= deadline) throw RunInterrupted(true);
    if (poll && *poll && (*poll)()) {
      interrupted = true;
      throw RunInterrupted(false);
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
  uint64_t poll_ticks_ = ns_to_ticks(50'000'000);
  std::thread::id controller_ = std::this_thread::get_id();
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// One step of an order-sensitive digest of addresses (WorkerCtx::record_alloc, hugetlb_boot's pool_digest).
inline uint64_t digest_step(uint64_t digest, uint64_t addr) {
  digest = (digest ^ addr) * 0x9e3779b97f4a7c15ull;
  return digest ^ (digest >> 29);
}

// What a worker sees: its slot, its random stream, the stop flag, and where it records what it did.
class WorkerCtx {
 public:
  WorkerCtx(const Slot& slot, uint64_t seed, const std::atomic<bool>& stop)
      : slot(slot), rng(seed, uint64_t(slot.worker)), stop_(&stop) {}

  const Slot slot;
  Rng rng;

  // Loops check this every iteration (one relaxed load) so Ctrl-C and timeouts end a run promptly.
  bool stopped() const { return stop_->load(std::memory_order_relaxed); }
  void add_ops(uint64_t n = 1) { ops_ += n; }
  void record_latency_ns(uint64_t ns) { latency_.record(ns); }
  // Ends the timed part early: what the worker does afterwards (freeing what it allocated) is not in elapsed_s.
  void end_timed() { timed_end_ = clock_ticks(); }
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
  const LatencyHistogram& latency() const { return latency_; }
  uint64_t timed_end() const { return timed_end_; }
  uint64_t alloc_digest() const { return alloc_digest_; }
  uint64_t allocs_recorded() const { return allocs_recorded_; }
  std::vector<std::pair<std::string, double>>& metrics() { return metrics_; }

 private:
  const std::atomic<bool>* stop_;
  uint64_t ops_ = 0;
  uint64_t timed_end_ = 0;
  uint64_t alloc_digest_ = 0, allocs_recorded_ = 0;
  LatencyHistogram latency_;
  std::vector<std::pair<std::string, double>> metrics_;
};

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
  // After all workers ended (or were stopped): check invariants (throw std::logic_error on a violation, which is a
  // bug in the model) and append headline figures to r.summary.
  virtual void finish(const RunEnv& env, RunResult& r) = 0;
};

struct ScenarioDef {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  // Builds the scenario from validated parameters; throws std::invalid_argument for invalid combinations.
  std::function<std::unique_ptr<Scenario>(const Params&)> make;
};

const std::vector<ScenarioDef>& scenarios();
const ScenarioDef& find_scenario(const std::string& name);  // throws std::invalid_argument naming "scenario"

}  // namespace alloclab
