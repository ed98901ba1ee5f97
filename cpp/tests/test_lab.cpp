// The lab layer: parameter validation, the latency histogram, the runner (barrier, stop, errors), lock_zoo.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "alloclab/base/histogram.hpp"
#include "alloclab/base/suggest.hpp"
#include "alloclab/lab/runner.hpp"
#include "alloclab/lab/scenario.hpp"
#include "support.hpp"

using namespace alloclab;

namespace {

using support::error_of;
using support::provenance_value;

int threads_of_process() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// The threads of the process once those that were joined have left /proc/self/task: join() returns when the thread
// has cleared its tid, a moment before the kernel removes its task, which a loaded host makes visible. Waits (up to
// 10 s, a bound no thread that ended needs) for at most `expected`, and returns the count.
int threads_settled(int expected) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int n = threads_of_process();
  while (n > expected && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
    n = threads_of_process();
  }
  return n;
}

// Threads before a run. A first thread is started and joined so that runtimes which add a helper thread at the
// first pthread_create (ThreadSanitizer does) have done so before we count; we count once it has left the process.
int threads_before_run() {
  pid_t tid = 0;
  std::thread([&tid] { tid = gettid(); }).join();
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  while (access(task.c_str(), F_OK) == 0) std::this_thread::yield();
  return threads_of_process();
}

TEST(Params, ValidationNamesParameterValueAndRange) {
  const std::vector<ParamSpec> specs = {
      ParamSpec::integer("threads", 2, 1, 64, "workers"), ParamSpec::real("fill", 1.0, 0.0, 1.0, "fill ratio"),
      ParamSpec::choice("check", "in_lock", {"in_lock", "off"}, "check"), ParamSpec::boolean("real", false, "backing")};
  const Params p = Params::resolve(specs, {{"fill", int64_t(0)}}, "demo");
  EXPECT_EQ(p.i("threads"), 2);
  EXPECT_EQ(p.f("fill"), 0.0);
  EXPECT_EQ(p.s("check"), "in_lock");
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"threads", int64_t(0)}}, "demo");
            }),
            "threads: value out of range: 0 (allowed: 1..64)");
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"threads", 2.5}}, "demo");
            }),
            "threads: expected an integer, got 2.5 (allowed: 1..64)");
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"threads", true}}, "demo");
            }),
            "threads: expected an integer, got True (allowed: 1..64)");
  // A float out of int64_t's range is refused by name, never converted (that conversion is undefined).
  for (const double big : {1e30, -1e30, 0x1p63})
    EXPECT_EQ(error_of([&] {
                Params::resolve(specs, {{"threads", big}}, "demo");
              }).rfind("threads: value out of range: ", 0),
              0u)
        << big;
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"threads", 1e30}}, "demo");
            }),
            "threads: value out of range: 1e+30 (allowed: 1..64)");
  EXPECT_EQ(Params::resolve(specs, {{"threads", 64.0}}, "demo").i("threads"), 64);
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"check", std::string("later")}}, "demo");
            }),
            "check: invalid value 'later' (allowed: one of 'in_lock', 'off')");
  EXPECT_EQ(error_of([&] {
              Params::resolve(specs, {{"thread", int64_t(1)}}, "demo");
            }),
            "thread: unknown parameter of scenario 'demo' (parameters: threads, fill, check, real); did you mean "
            "'threads'?");
}

TEST(Histogram, PercentilesWithinBucketPrecision) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.max(), 100000u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_DOUBLE_EQ(h.mean(), 50000.5);
  EXPECT_NEAR(h.percentile(0.5), 50000, 50000 * 0.016);
  EXPECT_NEAR(h.percentile(0.99), 99000, 99000 * 0.016);
  EXPECT_EQ(h.percentile(1.0), 100000);
  LatencyHistogram small;
  for (uint64_t v : {3, 3, 7}) small.record(v);
  EXPECT_EQ(small.percentile(0.5), 3);  // exact below 64
  EXPECT_EQ(LatencyHistogram().percentile(0.5), 0);
}

// A scenario whose workers loop until stopped, or throw.
class Forever final : public Scenario {
 public:
  explicit Forever(int n, int thrower) : n_(n), thrower_(thrower) {}
  int nr_workers() const override { return n_; }
  void prepare(const RunEnv&) override {}
  void work(WorkerCtx& ctx) override {
    if (ctx.slot.worker == thrower_) throw std::runtime_error("worker " + std::to_string(thrower_) + " failed");
    while (!ctx.stopped()) {
      ctx.add_ops();
      std::this_thread::yield();
    }
  }
  void finish(const RunEnv&, RunResult& r) override { r.summary.emplace_back("finished", true); }

 private:
  int n_, thrower_;
};

TEST(Runner, PollStopsTheRunAndJoinsEveryThread) {
  const int before = threads_before_run();
  Forever sc(3, -1);
  RunOptions opt;
  int polls = 0;
  opt.poll = [&] { return ++polls == 2; };
  const RunResult r = run_scenario(sc, "forever", Params(), opt);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_reason, "interrupted");
  EXPECT_EQ(polls, 2);
  ASSERT_EQ(r.workers.size(), 3u);
  for (const auto& w : r.workers) EXPECT_GT(w.ops, 0u);
  EXPECT_EQ(threads_settled(before), before);
}

TEST(Runner, TimeoutStopsTheRun) {
  Forever sc(2, -1);
  RunOptions opt;
  opt.timeout_s = 0.05;
  const RunResult r = run_scenario(sc, "forever", Params(), opt);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_reason.rfind("timeout", 0), 0u);
}

TEST(Runner, WorkerExceptionComesBackWithItsMessage) {
  const int before = threads_before_run();
  Forever sc(4, 2);
  try {
    run_scenario(sc, "forever", Params(), RunOptions());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "worker 2 failed");
  }
  EXPECT_EQ(threads_settled(before), before);
}

TEST(Runner, LockZooCountsExactlyAndRecordsProvenance) {
  RunOptions opt;
  opt.model = Topology::synthetic("node:2 core:2 pu:1");
  opt.placement = Placement::parse("scatter");
  opt.seed = 7;
  const RunResult r = run("lock_zoo",
                          {{"threads", int64_t(3)},
                           {"iterations", int64_t(5000)},
                           {"lock", std::string("ticket")},
                           {"locks_n", int64_t(3)}},
                          opt);
  ASSERT_EQ(r.workers.size(), 3u);
  uint64_t ops = 0;
  for (const auto& w : r.workers) {
    EXPECT_EQ(w.ops, 5000u);
    EXPECT_EQ(w.lat_count, 5000u);
    ops += w.ops;
  }
  EXPECT_EQ(r.workers[1].slot.model_node, 1);  // scatter
  ASSERT_EQ(r.lockstat.size(), 1u);
  EXPECT_EQ(r.lockstat[0].acquisitions, ops);
  EXPECT_EQ(r.lockstat[0].kind, "ticket");
  EXPECT_EQ(std::get<int64_t>(provenance_value(r, "seed")), 7);
  EXPECT_EQ(std::get<std::string>(provenance_value(r, "placement")), "scatter");
  EXPECT_EQ(std::get<int64_t>(provenance_value(r, "model_nodes")), 2);
  if (3 > Topology::host()->nr_pus()) {
    EXPECT_TRUE(std::get<bool>(provenance_value(r, "oversubscribed")));
  }
}

// Declares more memory than any machine has: the runner must refuse before prepare() allocates.
class Greedy final : public Scenario {
 public:
  int nr_workers() const override { return 1; }
  MemoryNeed memory_needed(const Machine&) const override { return {uint64_t(1) << 60, "mem_map 1.0 EiB"}; }
  void prepare(const RunEnv&) override { prepared = true; }
  void work(WorkerCtx&) override {}
  void finish(const RunEnv&, RunResult&) override {}
  bool prepared = false;
};

TEST(Runner, RunThatDoesNotFitFailsBeforeAllocating) {
  Greedy sc;
  const std::string msg = error_of([&] { run_scenario(sc, "greedy", Params(), RunOptions()); });
  EXPECT_EQ(msg.rfind("memory: this run needs 1073741824.0 GiB (mem_map 1.0 EiB + the workers' stacks and contexts "
                      "64.0 KiB) but only ",
                      0),
            0u)
      << msg;
  // The figure itself is MemAvailable when the check ran: tests running beside this one move it, so read the tail.
  EXPECT_NE(msg.find(" are available (MemAvailable); reduce the sizes"), std::string::npos) << msg;
  EXPECT_FALSE(sc.prepared);
}

// A set-up that never ends on its own: only its interruption points can stop it.
class EndlessSetUp final : public Scenario {
 public:
  int nr_workers() const override { return 2; }
  void prepare(const RunEnv& env) override {
    for (;;) {
      ++steps;
      env.interruption_point();
    }
  }
  void work(WorkerCtx&) override { worked = true; }
  void finish(const RunEnv&, RunResult&) override {}
  uint64_t steps = 0;
  bool worked = false;
};

TEST(Runner, PollStopsALongPrepareAtItsInterruptionPointsBeforeAnyWorkerStarts) {
  const int before = threads_before_run();
  EndlessSetUp sc;
  RunOptions opt;
  int polls = 0;
  opt.poll = [&] { return ++polls == 3; };
  EXPECT_THROW(run_scenario(sc, "endless", Params(), opt), RunInterrupted);
  EXPECT_EQ(polls, 3);
  EXPECT_GE(sc.steps, 3u * 64);  // polled at most once per 64 points (and 50 ms)
  EXPECT_FALSE(sc.worked);
  EXPECT_EQ(threads_settled(before), before);
}

TEST(Runner, TimeoutDuringSetUpReturnsAStoppedResultWithoutWorkerFigures) {
  const int before = threads_before_run();
  EndlessSetUp sc;
  RunOptions opt;
  opt.timeout_s = 0.05;
  const RunResult r = run_scenario(sc, "endless", Params(), opt);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_reason, "timeout after 0.050000 s, during set-up (no worker ran)");
  EXPECT_TRUE(r.workers.empty());
  EXPECT_TRUE(r.summary.empty());
  EXPECT_FALSE(sc.worked);
  EXPECT_EQ(r.scenario, "endless");
  EXPECT_FALSE(r.provenance.empty());
  EXPECT_EQ(threads_settled(before), before);
}

// Workers that run until stopped, then a teardown that never ends on its own.
class EndlessTeardown final : public Scenario {
 public:
  int nr_workers() const override { return 2; }
  void prepare(const RunEnv&) override {}
  void work(WorkerCtx& ctx) override {
    while (!ctx.stopped()) std::this_thread::yield();
  }
  void finish(const RunEnv& env, RunResult&) override {
    for (;;) {
      ++steps;
      env.interruption_point();
    }
  }
  uint64_t steps = 0;
};

TEST(Runner, CtrlCWhileWorkersRunEndsTheTeardownAtItsFirstInterruptionPoint) {
  // The poll says stop once, while the workers run; the teardown's interruption points then throw at once (the
  // result would be thrown away), though the poll never says stop again.
  EndlessTeardown sc;
  RunOptions opt;
  int polls = 0;
  opt.poll = [&] { return ++polls == 2; };
  EXPECT_THROW(run_scenario(sc, "endless", Params(), opt), RunInterrupted);
  EXPECT_EQ(sc.steps, 1u);
  // A timeout does not cut the teardown short: it is what checks the run's figures.
  EndlessTeardown timed;
  RunOptions t;
  t.timeout_s = 0.01;
  t.poll = [&] { return timed.steps > 100000; };
  EXPECT_THROW(run_scenario(timed, "endless", Params(), t), RunInterrupted);
  EXPECT_GT(timed.steps, 100000u);
}

// Two workers meet, then worker 0 makes 100 operations and ends its timed part; worker 1 makes 50 more only after
// that: the window in which both ran holds worker 0's 100 and none of worker 1's.
class Window final : public Scenario {
 public:
  int nr_workers() const override { return 2; }
  void prepare(const RunEnv&) override {}
  void work(WorkerCtx& ctx) override {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
    if (ctx.slot.worker == 0) {
      for (int i = 0; i < 100; ++i) ctx.add_ops();
      ctx.end_timed();
      zero_done.store(true, std::memory_order_release);
    } else {
      while (!zero_done.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < 50; ++i) ctx.add_ops();
    }
  }
  void finish(const RunEnv&, RunResult&) override {}
  std::atomic<int> arrived{0};
  std::atomic<bool> zero_done{false};
};

TEST(Runner, OpsWindowCountsWhatEachWorkerDidWhileAllWereRunning) {
  Window sc;
  const RunResult r = run_scenario(sc, "window", Params(), RunOptions());
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_EQ(r.workers[0].ops, 100u);
  EXPECT_EQ(r.workers[0].ops_window, 100u);
  EXPECT_EQ(r.workers[1].ops, 50u);
  EXPECT_EQ(r.workers[1].ops_window, 0u);
  // One clock: the run ends with its last worker; each worker's span is its own.
  EXPECT_DOUBLE_EQ(r.elapsed_s, std::max(r.workers[0].end_s, r.workers[1].end_s));
  EXPECT_LE(r.workers[0].end_s, r.workers[1].end_s);
  EXPECT_GE(r.overlap, 0.0);
  EXPECT_LE(r.overlap, 1.0);
}

// Runs until released by the test (or stopped).
class Held final : public Scenario {
 public:
  explicit Held(std::atomic<bool>& release) : release_(release) {}
  int nr_workers() const override { return 1; }
  void prepare(const RunEnv&) override { prepared.store(true); }
  void work(WorkerCtx& ctx) override {
    while (!release_.load() && !ctx.stopped()) std::this_thread::yield();
  }
  void finish(const RunEnv&, RunResult&) override {}
  std::atomic<bool> prepared{false};

 private:
  std::atomic<bool>& release_;
};

TEST(Runner, AnExclusiveRunWaitsForTheOneInFlight) {
  std::atomic<bool> release_a{false}, release_b{true};
  Held a(release_a), b(release_b);
  RunResult ra, rb;
  std::thread ta([&] { ra = run_scenario(a, "a", Params(), RunOptions()); });
  while (runs_in_flight() == 0) std::this_thread::yield();
  std::thread tb([&] { rb = run_scenario(b, "b", Params(), RunOptions()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(b.prepared.load());  // b waits for its turn
  EXPECT_EQ(runs_in_flight(), 1);
  release_a.store(true);
  ta.join();
  tb.join();
  EXPECT_TRUE(b.prepared.load());
  EXPECT_EQ(std::get<int64_t>(provenance_value(ra, "other_runs_workers")), 0);
  EXPECT_EQ(std::get<int64_t>(provenance_value(rb, "other_runs_workers")), 0);
}

TEST(Runner, RunsThatDoNotExcludeEachOtherCountEachOthersWorkers) {
  std::atomic<bool> release_a{false}, release_b{true};
  Held a(release_a), b(release_b);
  RunOptions shared;
  shared.exclusive = false;
  RunResult ra;
  std::thread ta([&] { ra = run_scenario(a, "a", Params(), shared); });
  while (runs_in_flight() == 0) std::this_thread::yield();
  const RunResult rb = run_scenario(b, "b", Params(), shared);
  release_a.store(true);
  ta.join();
  EXPECT_EQ(std::get<int64_t>(provenance_value(rb, "other_runs_workers")), 1);
}

// Runs `run` on a thread of its own, stops every run once one is in flight (stop_all_runs(reason, abandon)) and
// waits for the thread. Returns the number of runs stop_all_runs stopped.
int stop_once_in_flight(const std::function<void()>& run, const std::string& reason, bool abandon = false) {
  std::thread t(run);
  while (runs_in_flight() == 0) std::this_thread::yield();
  const int stopped = stop_all_runs(reason, abandon);
  t.join();
  return stopped;
}

TEST(Runner, StopAllRunsStopsARunInAnotherThread) {
  std::atomic<bool> never{false};
  Held a(never);
  RunResult ra;
  EXPECT_EQ(stop_once_in_flight([&] { ra = run_scenario(a, "a", Params(), RunOptions()); }, "told to"), 1);
  EXPECT_TRUE(ra.stopped);
  EXPECT_EQ(ra.stop_reason, "told to");
  EXPECT_EQ(runs_in_flight(), 0);
}

TEST(Runner, StopAllRunsEndsARunInItsSetUpWithAStoppedResult) {
  // Ctrl-C in Python's main thread while another thread's run builds its model: the set-up ends at its next
  // interruption point (it would never end on its own) and the run says where it stopped.
  EndlessSetUp sc;
  RunResult r;
  EXPECT_EQ(stop_once_in_flight([&] { r = run_scenario(sc, "endless", Params(), RunOptions()); }, "told to"), 1);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_reason, "told to, during set-up (no worker ran)");
  EXPECT_TRUE(r.workers.empty());
  EXPECT_FALSE(sc.worked);
}

TEST(Runner, AnAbandoningStopEndsTheTeardownToo) {
  // Interpreter exit: nobody will use the result, so a teardown that would never end on its own ends at its next
  // interruption point, and the run throws instead of returning.
  EndlessTeardown sc;
  std::exception_ptr error;
  const auto attempt = [&] {
    try {
      run_scenario(sc, "endless", Params(), RunOptions());
    } catch (...) {
      error = std::current_exception();
    }
  };
  EXPECT_EQ(stop_once_in_flight(attempt, "exit", /*abandon=*/true), 1);
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), RunInterrupted);
  EXPECT_GE(sc.steps, 1u);
}

TEST(Runner, TwoWorkersOnOneHostPuAreOversubscribed) {
  RunOptions opt;
  opt.placement.policy = Placement::Policy::list;
  opt.placement.pus = {0, 0};
  const RunResult r = run("lock_zoo", {{"threads", int64_t(2)}, {"iterations", int64_t(100)}}, opt);
  EXPECT_TRUE(std::get<bool>(provenance_value(r, "oversubscribed")));
  EXPECT_EQ(std::get<std::string>(provenance_value(r, "oversubscribed_why")), "2 workers on 1 host PU(s)");
}

TEST(Runner, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(uint64_t(3) << 29), "1.5 GiB");
}

TEST(Runner, UnknownScenarioIsAnError) {
  const std::string e = error_of([] { run("lock_zo", {}, RunOptions()); });
  EXPECT_EQ(e.rfind("scenario: unknown scenario 'lock_zo'", 0), 0u);
  EXPECT_TRUE(e.ends_with("); did you mean 'lock_zoo'?")) << e;
}

TEST(Suggest, ClosestNamesWithinAThirdOfTheLength) {
  const std::vector<std::string> kinds = {"spin", "ticket", "mcs", "qspinlock", "mutex"};
  EXPECT_EQ(closest_names("tiket", kinds), std::vector<std::string>{"ticket"});        // one deletion
  EXPECT_EQ(closest_names("tikcet", kinds), std::vector<std::string>{"ticket"});       // one swap
  EXPECT_EQ(closest_names("MCS", kinds), std::vector<std::string>{"mcs"});             // case ignored
  EXPECT_EQ(closest_names("ticket", kinds), std::vector<std::string>{});               // exact: nothing to suggest
  EXPECT_EQ(closest_names("rcu", kinds), std::vector<std::string>{});                  // nothing close
  EXPECT_EQ(closest_names("qspinlok", kinds), std::vector<std::string>{"qspinlock"});  // not "spin": 4 edits
  EXPECT_EQ(closest_names("ab", {"ac", "xyz", "ad", "ae", "af"}), (std::vector<std::string>{"ac", "ad", "ae"}));
  EXPECT_EQ(did_you_mean("tiket", kinds), "; did you mean 'ticket'?");
  EXPECT_EQ(did_you_mean("ab", {"ac", "ad"}), "; did you mean 'ac' or 'ad'?");
  EXPECT_EQ(did_you_mean("ab", {"ac", "ad", "ae"}), "; did you mean 'ac', 'ad' or 'ae'?");
  EXPECT_EQ(did_you_mean("rcu", kinds), "");
}

TEST(Suggest, EveryNameErrorOfTheEngineSuggests) {
  const auto params = [](std::map<std::string, Value> p) { return [p] { check_run("lock_zoo", p, RunOptions()); }; };
  EXPECT_TRUE(error_of(params({{"lock", std::string("tiket")}})).ends_with("; did you mean 'ticket'?"));
  EXPECT_TRUE(error_of(params({{"iteration", int64_t(1)}})).ends_with("; did you mean 'iterations'?"));
  EXPECT_TRUE(error_of([] { LockConfig().set("zone->lok", "mcs"); }).ends_with("; did you mean 'zone->lock'?"));
  EXPECT_TRUE(error_of([] { LockConfig().set("zone->lock", "tiket"); }).ends_with("; did you mean 'ticket'?"));
  EXPECT_TRUE(error_of([] { kClockKindNames.parse("virtul", "clock"); }).ends_with("; did you mean 'virtual'?"));
}

TEST(Runner, ALockOverrideAndTheParameterThatPicksTheKindNameOneKind) {
  RunOptions opt;
  opt.locks.set("lock_zoo", "ticket");
  // lock=spin with locks={lock_zoo: ticket}: a conflict, never a run labelled spin that ran ticket
  EXPECT_EQ(error_of([&] {
              check_run("lock_zoo", {{"lock", std::string("spin")}}, opt);
            }),
            "lock: 'spin' conflicts with locks['lock_zoo']='ticket' (scenario 'lock_zoo' takes the kind of lock class "
            "'lock_zoo' from its parameter lock; give one of them, or the same kind in both)");
  EXPECT_EQ(check_run("lock_zoo", {{"lock", std::string("ticket")}}, opt).s("lock"), "ticket");
  EXPECT_EQ(check_run("lock_zoo", {}, RunOptions()).s("lock"), "mcs");  // the declared default
  RunOptions bad;
  bad.timeout_s = -1;  // the options are checked too
  EXPECT_EQ(error_of([&] { check_run("lock_zoo", {}, bad); }).rfind("timeout_s: ", 0), 0u);
  // the override alone: the run records the kind that ran
  const RunResult r = run("lock_zoo", {{"threads", int64_t(1)}, {"iterations", int64_t(10)}}, opt);
  const auto lock = std::find_if(r.params.begin(), r.params.end(), [](const auto& kv) { return kv.first == "lock"; });
  ASSERT_NE(lock, r.params.end());
  EXPECT_EQ(std::get<std::string>(lock->second), "ticket");
  ASSERT_EQ(r.lockstat.size(), 1u);
  EXPECT_EQ(r.lockstat[0].kind, "ticket");
  EXPECT_EQ(error_of([&] {
              run("lock_zoo", {{"lock", std::string("spin")}}, opt);
            }).rfind("lock: 'spin' conflicts", 0),
            0u);
}

}  // namespace
