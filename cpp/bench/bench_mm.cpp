// Page allocator microbenchmarks (issue 4, part 7), lock_stat off, on alloclab::mm::MemorySystem (v6.2 model):
//   PcpHitPair/<kind>    order-0 alloc_pages + free_pages that never leave the pcp list (goal <= 40 ns per pair),
//                        with pcp->lock as the lab's default MCS lock and as a test-and-set spinlock
//   Order0BulkRefill     4096 order-0 allocations in a row through rmqueue_bulk refills (goal <= 80 ns per page)
//   Order9Check/<check>  64 order-9 allocations in a row (a refill every 2), for in_lock / after_unlock / off, on 1
//                        and 2 threads (2 model CPUs of one node, sharing zone->lock)
//   StructPageStream     the floor of check_pcp_refill: one read of the checked fields of 512 cold struct pages
// Frees happen with the timer paused; each timed allocation phase starts from the same pcp state.
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <vector>

#include "alloclab/mm/memory_system.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

struct Bed {
  Machine machine;
  LockDomain locks;
  std::unique_ptr<MemorySystem> ms;
  Bed(CheckMode check, uint64_t pages, const LockConfig& lc = LockConfig{})
      : machine(Topology::synthetic("node:1 core:2 pu:1"), Topology::host()), locks(lc, false, false) {
    MemoryConfig c = MemoryConfig::uniform(machine, pages);
    c.check = check;
    ms = std::make_unique<MemorySystem>(machine, locks, c);
  }
};

constexpr uint64_t kNodePages = uint64_t(1) << 18;  // 1 GiB: pcp->batch 63, as in the seed

// One bed per check mode, built once and shared by the threads of a multi-threaded run.
Bed& bed(CheckMode check) {
  static std::mutex mu;
  static std::unique_ptr<Bed> beds[3];
  std::lock_guard<std::mutex> g(mu);
  auto& b = beds[int(check)];
  if (!b) b = std::make_unique<Bed>(check, kNodePages);
  return *b;
}

void BM_PcpHitPair(benchmark::State& state, const char* pcp_lock_kind) {
  // The lock kind of pcp->lock: mcs is the lab's default for spinlocks (its unlock is a CAS); spin is closest to
  // the cost of the kernel's uncontended qspinlock (one atomic to take it, a plain store to release it).
  LockConfig lc;
  lc.set("pcp->lock", pcp_lock_kind);
  Bed b(CheckMode::off, uint64_t(1) << 16, lc);
  MemorySystem& ms = *b.ms;
  ms.free_pages(0, ms.alloc_pages(0, 0, 0, GFP_KERNEL), 0);  // warm the pcp list
  for (auto _ : state) {
    Page* p = ms.alloc_pages(0, 0, 0, GFP_KERNEL);
    benchmark::DoNotOptimize(p);
    ms.free_pages(0, p, 0);
  }
  state.counters["ns_per_pair"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_PcpHitPair, mcs, "mcs");
BENCHMARK_CAPTURE(BM_PcpHitPair, spin, "spin");

void BM_Order0BulkRefill(benchmark::State& state) {
  const CheckMode check = CheckMode(state.range(0));
  MemorySystem& ms = *bed(check).ms;
  constexpr int kPages = 4096;
  std::vector<Page*> held(kPages);
  ms.drain_all_pages();
  for (auto _ : state) {
    for (int i = 0; i < kPages; ++i) held[size_t(i)] = ms.alloc_pages(0, 0, 0, GFP_KERNEL);
    state.PauseTiming();
    for (Page* p : held) ms.free_pages(0, p, 0);
    ms.drain_all_pages();
    state.ResumeTiming();
  }
  state.counters["ns_per_page"] = benchmark::Counter(double(kPages) * double(state.iterations()),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(to_string(check)));
}
BENCHMARK(BM_Order0BulkRefill)->Arg(int(CheckMode::in_lock))->Arg(int(CheckMode::off));

void BM_Order9Check(benchmark::State& state) {
  const CheckMode check = CheckMode(state.range(0));
  MemorySystem& ms = *bed(check).ms;
  const int cpu = state.thread_index();
  constexpr int kBlocks = 64;
  std::vector<Page*> held(kBlocks);
  for (auto _ : state) {
    for (int i = 0; i < kBlocks; ++i) held[size_t(i)] = ms.alloc_pages(cpu, 0, 9, GFP_HIGHUSER_MOVABLE);
    state.PauseTiming();
    for (Page* p : held) ms.free_pages(cpu, p, 9);
    state.ResumeTiming();
  }
  state.counters["ns_per_alloc"] = benchmark::Counter(double(kBlocks) * double(state.iterations()),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(to_string(check)));
}
BENCHMARK(BM_Order9Check)
    ->Arg(int(CheckMode::in_lock))
    ->Arg(int(CheckMode::after_unlock))
    ->Arg(int(CheckMode::off))
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

void BM_StructPageStream(benchmark::State& state) {
  // 256 MiB of descriptors (4 Mi struct pages), read 512 at a time in order, as check_new_pages() reads a THP.
  constexpr size_t kPages = size_t(1) << 22;
  std::vector<Page> mem(kPages);
  for (auto& p : mem) p._mapcount = -1;
  size_t at = 0;
  for (auto _ : state) {
    bool bad = false;
    for (size_t i = 0; i < 512; ++i) bad |= !page_expected_state(mem[at + i], PAGE_FLAGS_CHECK_AT_PREP);
    benchmark::DoNotOptimize(bad);
    at = (at + 512) % kPages;
  }
  state.counters["ns_per_struct_page"] =
      benchmark::Counter(512.0 * double(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StructPageStream);

}  // namespace
