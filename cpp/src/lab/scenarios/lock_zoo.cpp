// lock_zoo: the lock microbenchmark (libslock / LiTL / lockhammer style) on alloclab's own Lock.
//
// Each worker performs `iterations` acquisitions of one of `locks_n` locks (chosen with the worker's seeded
// stream; with one lock every worker hammers the same one). Its critical section writes `lines` cache lines of the
// lock's protected data (one increment per line: the data a lock really protects moves with the lock, so a
// hand-off to another node also moves the data) and then holds the lock `hold_ns` more (a calibrated busy-wait);
// it thinks `think_ns` between acquisitions. In virtual time each of those lines is a tracked line (the profile's
// transfer from its last writer; the lines' misses overlap, up to the core's misses in flight), so `lines` is the
// knob of how much a hand-off's distance costs. Per worker:
// acquisitions, elapsed time, acquire-latency percentiles (from the call to lock() to owning it, over every
// acquisition up to kLatencySamples per worker and evenly spaced ones beyond: the two clock reads of a sample cost
// about as much as an uncontended acquisition on real threads, so timing every one would double what is measured).
// Summary:
// acquisitions/s over the run's one clock, fairness (Jain's index and max/min of the acquisitions each worker made
// while every worker was running; NaN when some worker made none in that window), wait and hold from lock_stat, and
// the share of contended hand-offs that stayed on the previous holder's node (`handoff_local_share`; NaN without
// lock_stat or without contention). Placement (compact or scatter over the model's nodes) is the run's option.
// Invariant: every protected line's counter adds up to threads x iterations over the locks (mutual exclusion
// held), checked after every run.
// Leaves out: read-side sections (every access writes), data outside the lock's lines (think time touches nothing).
#include <algorithm>
#include <cmath>
#include <deque>
#include <span>
#include <stdexcept>

#include "alloclab/locks/lock.hpp"
#include "alloclab/topology/cost_model.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

// The class of the locks lock_zoo hammers: the lab's own, not a kernel one.
const LockClassRegistrar kLockZooClass({"lock_zoo", LockNature::spinlock,
                                        "alloclab's lock_zoo scenario: the lock(s) its workers hammer"});

// Acquire latencies each worker samples at most (evenly spaced over its iterations).
constexpr uint64_t kLatencySamples = 4096;

// One cache line of a lock's protected data.
struct alignas(64) ProtectedLine {
  uint64_t counter = 0;  // only touched under its lock
};

class LockZoo final : public Scenario {
 public:
  explicit LockZoo(const Params& p)
      : threads_(int(p.i("threads"))),
        iterations_(uint64_t(p.i("iterations"))),
        hold_ns_(uint64_t(p.i("hold_ns"))),
        think_ns_(uint64_t(p.i("think_ns"))),
        locks_n_(size_t(p.i("locks_n"))),
        lines_(size_t(p.i("lines"))),
        sample_every_(std::max<uint64_t>(1, iterations_ / kLatencySamples)),
        kind_(parse_lock_kind(p.s("lock"), "lock")) {}

  int nr_workers() const override { return threads_; }
  void lock_defaults(LockConfig& c) const override { c.set_default("lock_zoo", kind_); }

  void prepare(const RunEnv& env) override {
    hold_ticks_ = ns_to_ticks(hold_ns_);  // in the run's clock
    think_ticks_ = ns_to_ticks(think_ns_);
    for (size_t i = 0; i < locks_n_; ++i) {
      env.interruption_point();
      locks_.emplace_back(env.locks, "lock_zoo");
    }
    data_.resize(locks_n_ * lines_);
  }

  void work(WorkerCtx& ctx) override {
    for (uint64_t i = 0; i < iterations_ && !ctx.stopped(); ++i) {
      const size_t k = locks_n_ == 1 ? 0 : size_t(ctx.rng.below(locks_n_));
      Lock& l = locks_[k];
      LockToken t;
      const bool sampled = i % sample_every_ == 0;
      const uint64_t t0 = sampled ? clock_ticks() : 0;
      l.lock(t);
      const uint64_t t1 = sampled ? clock_ticks() : 0;
      const std::span<ProtectedLine> data = protected_lines(k);
      vcost::touch_each(data, true);  // the increments' loads do not depend on each other: their misses overlap
      for (ProtectedLine& line : data) ++line.counter;
      ctx.spin_ticks(hold_ticks_);
      l.unlock(t);
      if (sampled) ctx.record_latency_ns(uint64_t(ticks_to_ns(t1 - t0)));
      ctx.add_ops();
      ctx.spin_ticks(think_ticks_);
    }
  }

  // One acquisition per operation: threads x iterations.
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult& r) const override {
    const auto n = [](uint64_t v) { return std::to_string(v); };
    const uint64_t total = uint64_t(threads_) * iterations_;
    return {{"lock_zoo", "lock_zoo", total,
             "threads x iterations = " + n(uint64_t(threads_)) + " x " + n(iterations_) + " = " + n(total) + " (over " +
                 n(r.workers.size()) + " workers)"}};
  }

  void finish(const RunEnv&, RunResult& r) override {
    uint64_t ops = 0;
    for (const auto& w : r.workers) ops += w.ops;
    for (size_t line = 0; line < lines_; ++line) {
      uint64_t total = 0;
      for (size_t k = 0; k < locks_n_; ++k) total += protected_lines(k)[line].counter;
      if (total != ops)
        throw std::logic_error("lock_zoo: mutual exclusion violated: protected line " + std::to_string(line) +
                               "'s counters sum to " + std::to_string(total) + " but workers made " +
                               std::to_string(ops) + " acquisitions");
    }
    // Throughput over the run's one clock; fairness over the window in which every worker was running (a worker
    // that started late or ended early does not count as "fair" or "unfair" for the time it was not there).
    double sum = 0, sum_sq = 0, lo = 1e300, hi = 0;
    for (const auto& w : r.workers) {
      const double x = double(w.ops_window);
      sum += x;
      sum_sq += x * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    const double n = double(r.workers.size());
    // A worker that completed nothing while all were running was starved: max/min is infinite (not "unknown").
    const double wait = r.lock_figure("lock_zoo", &LockStatRow::wait_total_ns);
    const double hold = r.lock_figure("lock_zoo", &LockStatRow::hold_total_ns);
    r.summary.emplace_back("acquisitions", int64_t(ops));
    r.summary.emplace_back("acquisitions_per_s", r.elapsed_s > 0 ? double(ops) / r.elapsed_s : NAN);
    r.summary.emplace_back("fairness_jain", sum > 0 ? sum * sum / (n * sum_sq) : NAN);
    r.summary.emplace_back("fairness_max_min", lo > 0 ? hi / lo : hi > 0 ? INFINITY : NAN);
    r.summary.emplace_back("wait_total_ns", wait);
    r.summary.emplace_back("hold_total_ns", hold);
    r.summary.emplace_back("wait_per_hold", hold > 0 ? wait / hold : NAN);
    const LockStatRow* row = r.lock_row("lock_zoo");
    const double handoffs = row ? double(row->handoffs_local + row->handoffs_remote) : 0;
    r.summary.emplace_back("handoff_local_share", handoffs > 0 ? double(row->handoffs_local) / handoffs : NAN);
  }

 private:
  // Lock k's protected data: lines_ consecutive lines of data_.
  std::span<ProtectedLine> protected_lines(size_t k) { return {data_.data() + k * lines_, lines_}; }

  int threads_;
  uint64_t iterations_, hold_ns_, think_ns_;
  size_t locks_n_, lines_;
  uint64_t sample_every_;  // record the acquire latency of every sample_every_-th acquisition
  LockKind kind_;
  std::deque<Lock> locks_;
  std::vector<ProtectedLine> data_;
  uint64_t hold_ticks_ = 0, think_ticks_ = 0;  // set by prepare(), in the run's clock
};

std::vector<std::string> kind_names() {
  std::vector<std::string> v;
  for (const auto& k : lock_kinds()) v.emplace_back(k.name);
  return v;
}

}  // namespace

ScenarioDef lock_zoo_scenario() {
  return {"lock_zoo",
          "workers hammer one lock (or locks_n independent ones) of a chosen kind: throughput, fairness, "
          "acquire latency, lock_stat",
          {
              threads_param(2),
              ParamSpec::choice("lock", "mcs", kind_names(), "the lock kind (lock class 'lock_zoo')"),
              ParamSpec::integer("iterations", 100000, 1, 1'000'000'000, "acquisitions per worker"),
              ParamSpec::integer("hold_ns", 0, 0, 10'000'000, "critical-section length (calibrated busy-wait)"),
              ParamSpec::integer("think_ns", 0, 0, 10'000'000, "work between acquisitions (calibrated busy-wait)"),
              ParamSpec::integer("locks_n", 1, 1, 65536,
                                 "independent locks; each acquisition picks one at random (seeded)"),
              ParamSpec::integer("lines", 1, 1, 4096,
                                 "cache lines of protected data the critical section writes (moved by each hand-off)"),
          },
          [](const Params& p) { return std::make_unique<LockZoo>(p); },
          size_is("iterations"),
          {{"threads", int64_t(2)}, {"iterations", int64_t(2000)}},
          "none: a lock benchmark, not a kernel path",
          {{"lock_zoo", "lock"}}};
}

}  // namespace alloclab
