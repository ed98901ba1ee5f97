// Virtual-time simulator microbenchmarks: one fiber switch + scheduler pick (a sync() that yields) with 2, 64 and 512
// virtual CPUs taking turns, a sync() that does not yield, and advance() alone.
// Goal (issue 16): <= 50 ns per switch. The per-switch figure is the counter per_switch.
#include <benchmark/benchmark.h>

#include "alloclab/base/scheduler.hpp"

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

}  // namespace
