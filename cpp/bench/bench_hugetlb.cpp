// hugetlb pool benchmarks (mm/hugetlb.c v6.9 model), one thread, lock_stat off: ns per folio of
//   * the 2 MiB boot path: alloc_pool_huge_folio (order-9 alloc_pages through the pcp THP list, prep_compound_page
//     writing 511 tails, page_ref_freeze, init_new_hugetlb_folio) + prep_and_add_allocated_folios (one
//     hugetlb_lock per batch), on 1 and 2 nodes (round-robin);
//   * the gigantic gather (model order 10): hugetlb_folio_init_vmemmap + the other 960 tails + hugetlb_lock per folio.
// The seed's thread time per 2 MiB folio is 5.5 us at 2 threads (256 GiB, 2 nodes, multiplier 1). The pool is
// freed (and the pcps drained) outside the timed region after every batch.
#include <benchmark/benchmark.h>

#include <memory>

#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/hugetlb.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/topology/topology.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

constexpr unsigned long kBatch = 512;  // folios per timed batch (1 GiB of 2 MiB folios)

struct Pool {
  std::unique_ptr<Machine> machine;
  std::unique_ptr<LockDomain> locks;
  std::unique_ptr<MemorySystem> ms;
  std::unique_ptr<Hugetlb> hugetlb;
  Pool(const std::string& topo, uint64_t pages_per_node) {
    machine = std::make_unique<Machine>(Topology::synthetic(topo), Topology::host());
    locks = std::make_unique<LockDomain>(LockConfig{}, false, false);
    MemoryConfig cfg = MemoryConfig::uniform(*machine, pages_per_node);
    cfg.batch_rule = BatchRule::v6_7;
    cfg.check = CheckMode::off;
    ms = std::make_unique<MemorySystem>(*machine, *locks, cfg);
    hugetlb = std::make_unique<Hugetlb>(*ms, *locks, HugetlbConfig{});
  }
};

void BM_HugetlbBootNode_2M(benchmark::State& state) {
  const int nodes = int(state.range(0));
  Pool pool("node:" + std::to_string(nodes) + " core:1 pu:1", (kBatch / unsigned(nodes) + 8) * 512 + 16384);
  hstate& h = pool.hugetlb->default_hstate();
  uint64_t folios = 0;
  for (auto _ : state) {
    HugetlbThreadStats st;
    pool.hugetlb->hugetlb_pages_alloc_boot_node(h, 0, kBatch, 0, st);
    folios += st.folios;
    state.PauseTiming();
    if (st.folios != kBatch) state.SkipWithError("the pool ran out of memory");
    pool.hugetlb->free_pool(h, 0);
    pool.ms->drain_all_pages();
    state.ResumeTiming();
  }
  state.counters["ns_per_folio"] =
      benchmark::Counter(double(folios), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(int64_t(folios));
}
BENCHMARK(BM_HugetlbBootNode_2M)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_GatherBootmem_Gigantic(benchmark::State& state) {
  constexpr unsigned long kGigantic = 128;
  Pool pool("node:1 core:1 pu:1", (kGigantic + 4) * 1024 + 16384);
  hstate& h = pool.hugetlb->gigantic_hstate();
  uint64_t folios = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (pool.hugetlb->hugetlb_gigantic_pages_alloc_boot(h, kGigantic, 0) != kGigantic)
      state.SkipWithError("memblock stand-in ran out of memory");
    state.ResumeTiming();
    HugetlbThreadStats st;
    pool.hugetlb->gather_bootmem_prealloc_node(0, st);
    folios += st.folios;
    state.PauseTiming();
    pool.hugetlb->free_pool(h, 0);
    state.ResumeTiming();
  }
  state.counters["ns_per_folio"] =
      benchmark::Counter(double(folios), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(int64_t(folios));
}
BENCHMARK(BM_GatherBootmem_Gigantic)->Unit(benchmark::kMillisecond);

}  // namespace
