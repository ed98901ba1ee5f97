// alloc_contig_range throughput: pages per second through cma_alloc of a full CMA area (isolate, drain, migrate
// every page, test, take, undo), with backing="real" (each page's 4 KiB really copied) and backing="none" (the copy
// skipped: copy_ns = 0, so the figure is the model's own bookkeeping), lock_stat on. Each iteration refills the area
// (untimed), allocates it (timed) and releases it (untimed). Counters: pages/s (items_per_second), and ns per
// migrated page. The seed's kernel did about 2.7 us per page (10 GiB in ~7 s).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/address_space.hpp"
#include "alloclab/mm/cma.hpp"
#include "alloclab/mm/lruvec.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/migrate.hpp"
#include "alloclab/topology/topology.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

void BM_AllocContigRange(benchmark::State& state, Backing backing) {
  const uint64_t N = uint64_t(state.range(0));
  Machine machine(Topology::synthetic("node:1 core:1 pu:1"), Topology::host());
  LockDomain locks(LockConfig{}, true, false);
  locks.reset_stats(1);
  MemoryConfig cfg;
  cfg.node_pages = {2 * N + 8192};
  cfg.min_free_kbytes = 0;  // so that the fill can occupy every page of the area
  cfg.backing = backing;
  MemorySystem ms(machine, locks, cfg);
  CmaAreas areas(ms, locks, {{0, N}}, AllocMutex::per_area);
  Cma& area = areas[0];
  NodeLruvecs lru(ms, locks);
  MigrateContext mc(ms, lru, 0, 0);
  uint64_t migrated = 0;
  for (auto _ : state) {
    state.PauseTiming();
    AddressSpace file(locks, "shm0", N);
    std::vector<Page*> elsewhere;
    uint64_t filled = 0;
    while (filled < N) {
      Page* p = ms.alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE | __GFP_THISNODE);
      if (!p) break;
      if (area.contains(ms.page_to_pfn(p)))
        file.shmem_add_to_page_cache(p, filled++, lru);
      else
        elsewhere.push_back(p);
    }
    for (Page* p : elsewhere) ms.free_pages(0, p, 0);
    ms.drain_all_pages();
    locks.attach(0, 0);
    CmaAllocStats st;
    state.ResumeTiming();
    Page* page = cma_alloc(area, mc, 0, N, 1, &st);
    state.PauseTiming();
    LockDomain::detach();
    if (!page) {
      state.SkipWithError("cma_alloc failed");
      break;
    }
    migrated += st.contig.migrate.pages_migrated;
    cma_release(area, ms, 0, page, N);
    file.truncate(ms, lru, 0);
    ms.drain_all_pages();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(int64_t(migrated));
  state.counters["ns_per_page"] =
      benchmark::Counter(double(migrated), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (!ms.check().ok) state.SkipWithError("check() failed after the benchmark");
}

}  // namespace

BENCHMARK_CAPTURE(BM_AllocContigRange, none, Backing::none)->Arg(16384)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AllocContigRange, real, Backing::real)->Arg(16384)->Unit(benchmark::kMillisecond);
