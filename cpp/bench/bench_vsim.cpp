// Virtual-time simulator benchmarks: one fiber switch + scheduler pick (a sync() that yields) with 2, 64 and 512
// virtual CPUs taking turns, a sync() that does not yield, advance() alone, and whole lock_zoo runs: 64 virtual
// CPUs with 100 ns holds against the same acquisitions made by one real thread without holds (the segments' own
// host cost), so that their per_acquisition ratio is the simulator's overhead.
// Goals (issue 16): <= 50 ns per switch (counter per_switch); overhead <= 2x.
#include <benchmark/benchmark.h>

#include <string>

#include "../tests/test_profiles.hpp"
#include "alloclab/base/scheduler.hpp"
#include "alloclab/lab/runner.hpp"

using namespace alloclab::vt;

namespace {

// Every CPU advances 1 ns and syncs, so each sync() yields to the next CPU in turn: one iteration of CPU 0's loop is
// nr_cpus switches, each a fiber switch to the scheduler, a heap push and pop, and a switch to the next fiber.
void BM_SyncSwitch(benchmark::State& state) {
  const int nr_cpus = int(state.range(0));
  Simulator sim;
  bool done = false;
  sim.run(nr_cpus, [&](int cpu) {
    if (cpu == 0) {
      for (auto _ : state) {
        sim.advance(kNanosecond);
        sim.sync();
      }
      done = true;
      return;
    }
    while (!done) {
      sim.advance(kNanosecond);
      sim.sync();
    }
  });
  // Seconds per switch (printed with an SI prefix: "31.2n" is 31.2 ns).
  state.counters["per_switch"] =
      benchmark::Counter(nr_cpus, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SyncSwitch)->Arg(2)->Arg(64)->Arg(512);

// The fast path: a sync() that finds the caller still the earliest CPU (the other CPU sleeps far ahead).
void BM_SyncNoSwitch(benchmark::State& state) {
  Simulator sim;
  sim.run(2, [&](int cpu) {
    if (cpu == 1) {
      (void)sim.block_until(~vtime(0));
      return;
    }
    for (auto _ : state) {
      sim.advance(kNanosecond);
      sim.sync();
    }
  });
}
BENCHMARK(BM_SyncNoSwitch);

void BM_Advance(benchmark::State& state) {
  Simulator sim;
  sim.run(1, [&](int) {
    for (auto _ : state) sim.advance(300);  // 0.3 ns
    benchmark::DoNotOptimize(sim.now());
  });
}
BENCHMARK(BM_Advance);

constexpr int64_t kZooAcquisitions = 64 * 20000;  // enough that set-up (threads, pinning, load reads) is amortized

// One lock_zoo run of `threads` workers sharing kZooAcquisitions acquisitions of one MCS lock, lock_stat off.
void zoo_run(benchmark::State& state, alloclab::RunOptions opt, int threads, int64_t hold_ns, int64_t think_ns) {
  opt.lockstat = false;
  for (auto _ : state) {
    const auto r = alloclab::run("lock_zoo",
                                 {{"threads", int64_t(threads)},
                                  {"iterations", kZooAcquisitions / threads},
                                  {"hold_ns", hold_ns},
                                  {"think_ns", think_ns},
                                  {"lock", std::string("mcs")}},
                                 opt);
    benchmark::DoNotOptimize(r.elapsed_s);
  }
  // Host (wall) seconds per simulated or real acquisition, set-up and teardown included.
  state.counters["per_acquisition"] = benchmark::Counter(
      double(kZooAcquisitions), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// 64 virtual CPUs on two sockets (the test profile of cpp/tests), 100 ns holds and 200 ns thinks in virtual time.
void BM_VirtualLockZoo64(benchmark::State& state) {
  alloclab::RunOptions opt;
  opt.clock = alloclab::ClockKind::virtual_time;
  opt.machine = alloclab::test::test_profile("package:2 numa:1 l3:1 core:32 pu:1", {"same_llc", "remote"});
  opt.placement = alloclab::Placement::parse("scatter");
  zoo_run(state, opt, 64, 100, 200);
}
BENCHMARK(BM_VirtualLockZoo64)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same acquisitions by one real thread with no hold or think time: the host cost of the model code alone.
void BM_RealLockZooSegments(benchmark::State& state) { zoo_run(state, alloclab::RunOptions{}, 1, 0, 0); }
BENCHMARK(BM_RealLockZooSegments)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
