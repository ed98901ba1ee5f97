// Lock microbenchmarks: uncontended acquire+release of every kind, lock_stat off and on, beside the floor (a bare
// atomic exchange + release store, the least any lock can do), and the same lock shared by 2 threads.
// Goals (issue 2): spin/ticket/mcs within 2x of the floor with lock_stat off; lock_stat on adds <= 25 ns.
#include <benchmark/benchmark.h>

#include <atomic>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "shared_lock.hpp"

using namespace alloclab;

namespace {

void BM_Floor_XchgStore(benchmark::State& state) {
  alignas(64) std::atomic<uint32_t> word{0};
  for (auto _ : state) {
    while (word.exchange(1, std::memory_order_acquire) != 0) {
    }
    benchmark::ClobberMemory();
    word.store(0, std::memory_order_release);
  }
}
BENCHMARK(BM_Floor_XchgStore);

void BM_Uncontended(benchmark::State& state, LockKind kind, bool lockstat) {
  LockConfig cfg;
  cfg.set("zone->lock", std::string(to_string(kind)));
  LockDomain dom(cfg, lockstat, false);
  dom.reset_stats(1);
  Lock lock(dom, "zone->lock");
  dom.attach(0, 0);
  for (auto _ : state) {
    LockToken t;
    lock.lock(t);
    benchmark::ClobberMemory();
    lock.unlock(t);
  }
  LockDomain::detach();
  if (lockstat && dom.rows().at(0).acquisitions != uint64_t(state.iterations()))
    state.SkipWithError("lock_stat miscounted");
}

// Two threads on one lock: hand-off cost between the host's CPUs (a throughput figure, not a goal).
void BM_Contended(benchmark::State& state, LockKind kind, bench::SharedLock* shared) {
  bench::hammer(state, kind, shared);
}

const int registered = [] {
  static std::vector<bench::SharedLock> shared_slots(lock_kinds().size());
  int i = 0;
  for (const auto& k : lock_kinds()) {
    const std::string name(k.name);
    benchmark::RegisterBenchmark(("BM_Uncontended/" + name + "/lockstat_off").c_str(), BM_Uncontended, k.kind, false);
    benchmark::RegisterBenchmark(("BM_Uncontended/" + name + "/lockstat_on").c_str(), BM_Uncontended, k.kind, true);
    benchmark::RegisterBenchmark(("BM_Contended/" + name).c_str(), BM_Contended, k.kind, &shared_slots[i++])
        ->Threads(2)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace
