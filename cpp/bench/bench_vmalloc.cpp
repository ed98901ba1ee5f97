// vmalloc model microbenchmarks (issue 7, part 6):
//   * BM_VmallocAllocFree: one __get_vm_area_node(16 KiB + guard, THREAD_ALIGN) + vfree pair on one thread, per
//     shape (v6.7 / v6.9+ with 2 nodes and pools) and busy_lock variant, lock_stat off and on.
//     Goal: <= 300 ns per pair without pages.
//   * BM_FindVmapLowestMatch / BM_AllocVmapAreaFragmented: find_vmap_lowest_match() and alloc+merge-back over a
//     free tree of n one-page holes (n live areas between them) that every request has to pass; must grow like
//     log n (Complexity oLogN, and the nodes visited per search as a counter). BM_FindVmapLowestLinearMatch is
//     the O(n) list walk beside it, for contrast.
//   * BM_VmallocStress: the whole scenario on pinned threads (ops/s per variant, busy-lock acquisitions per
//     allocation, busy-lock contentions) — a throughput figure, not a goal.
#include <benchmark/benchmark.h>

#include <memory>

#include "alloclab/lab/runner.hpp"
#include "alloclab/mm/vmalloc/vmalloc.hpp"

using namespace alloclab;
using namespace alloclab::vmalloc;

namespace {

void BM_VmallocAllocFree(benchmark::State& state, unsigned nodes, bool once, bool lockstat) {
  LockConfig lc;
  LockDomain dom(lc, lockstat, false);
  dom.reset_stats(1);
  VmallocConfig cfg;
  cfg.nr_vmap_nodes = nodes;
  cfg.busy_lock_once = once;
  cfg.nr_cpus = 2;
  cfg.tlb_flush_ns = 0;
  VmallocSpace space(dom, cfg);
  VmapCpu& c = space.cpu(0);
  dom.attach(0, 0);
  for (auto _ : state) {
    VmStruct* vm = space.get_vm_area(c, THREAD_SIZE, THREAD_ALIGN);
    benchmark::DoNotOptimize(vm);
    space.vfree(c, vm->addr);
  }
  LockDomain::detach();
  const VmallocStats st = space.stats();
  state.counters["busy_lock_per_alloc"] = double(st.busy_lock_alloc) / double(st.allocs);
  state.counters["pool_hit_ratio"] =
      double(st.pool_hits) / double(std::max<uint64_t>(1, st.pool_hits + st.pool_misses));
  state.counters["drains"] = double(st.drains);
}
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v67_twice, 1, false, false);
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v67_once, 1, true, false);
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v69_2nodes_twice, 2, false, false);
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v69_2nodes_once, 2, true, false);
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v67_once_lockstat, 1, true, true);
BENCHMARK_CAPTURE(BM_VmallocAllocFree, v69_2nodes_once_lockstat, 2, true, true);

// A free tree of n one-page holes at kBase + 2i pages, then a large tail (a 2-page request fits only in the tail),
// on a CPU of its own; its areas go back to the CPU's slab at the end of the benchmark.
constexpr unsigned long kBase = 0x100000000ul;
struct FragmentedTree {
  explicit FragmentedTree(unsigned long n) {
    for (unsigned long i = 0; i < n; ++i) {
      VmapArea* va = kmem_cache_alloc_va(c);
      va->va_start = kBase + 2 * i * PAGE_SIZE;
      va->va_end = va->va_start + PAGE_SIZE;
      insert_vmap_area_augment(c, va, nullptr, t);
    }
    VmapArea* tail = kmem_cache_alloc_va(c);
    tail->va_start = kBase + 2 * n * PAGE_SIZE;
    tail->va_end = tail->va_start + (1ul << 30);
    insert_vmap_area_augment(c, tail, nullptr, t);
  }
  ~FragmentedTree() {
    for (ListHead *p = t.head.next, *n = p->next; p != &t.head; p = n, n = p->next)
      kmem_cache_free_va(c, va_of_list(p));
    INIT_LIST_HEAD(&t.head);
    t.root = RbRoot{};
  }
  FragmentedTree(const FragmentedTree&) = delete;
  FragmentedTree& operator=(const FragmentedTree&) = delete;

  VmapCpu c;
  VaTree t;
};

// Searches a FragmentedTree of state.range(0) holes for a 2-page fit (only the tail has one) with search(cpu, tree)
// on every iteration; nodes_visited per search where the search counts them (the augmented descent).
template <class Search>
void search_fragmented(benchmark::State& state, Search search) {
  FragmentedTree f(static_cast<unsigned long>(state.range(0)));
  const uint64_t s0 = f.c.st.search_steps, q0 = f.c.st.searches;
  for (auto _ : state) benchmark::DoNotOptimize(search(f.c, f.t));
  if (f.c.st.searches > q0)
    state.counters["nodes_visited"] = double(f.c.st.search_steps - s0) / double(f.c.st.searches - q0);
  state.SetComplexityN(state.range(0));
}

void BM_FindVmapLowestMatch(benchmark::State& state) {
  search_fragmented(state, [](VmapCpu& c, VaTree& t) {
    return find_vmap_lowest_match(c, &t.root, 2 * PAGE_SIZE, PAGE_SIZE, kBase, false);
  });
}
BENCHMARK(BM_FindVmapLowestMatch)->RangeMultiplier(4)->Range(1 << 6, 1 << 20)->Complexity(benchmark::oLogN);

void BM_FindVmapLowestLinearMatch(benchmark::State& state) {
  search_fragmented(state, [](VmapCpu&, VaTree& t) {
    return find_vmap_lowest_linear_match(&t.head, 2 * PAGE_SIZE, PAGE_SIZE, kBase);
  });
}
BENCHMARK(BM_FindVmapLowestLinearMatch)->RangeMultiplier(4)->Range(1 << 6, 1 << 14)->Complexity(benchmark::oN);

// __alloc_vmap_area (search + va_clip) then merge_or_add_vmap_area_augment back: the tree keeps its n holes.
void BM_AllocVmapAreaFragmented(benchmark::State& state) {
  const unsigned long n = static_cast<unsigned long>(state.range(0));
  FragmentedTree f(n);
  auto& [c, t] = f;
  const unsigned long vend = kBase + (2 * n + 1) * PAGE_SIZE + (1ul << 30);
  for (auto _ : state) {
    if (!c.ne_fit_preload_node) c.ne_fit_preload_node = kmem_cache_alloc_va(c);
    const unsigned long addr = alloc_from_free_tree(c, t, 5 * PAGE_SIZE, 4 * PAGE_SIZE, kBase, vend);
    VmapArea* va = kmem_cache_alloc_va(c);
    va->va_start = addr;
    va->va_end = addr + 5 * PAGE_SIZE;
    merge_or_add_vmap_area_augment(c, va, t);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_AllocVmapAreaFragmented)->RangeMultiplier(4)->Range(1 << 6, 1 << 20)->Complexity(benchmark::oLogN);

void BM_VmallocStress(benchmark::State& state, int64_t nodes, const char* busy_lock) {
  RunOptions opt;
  double ops_per_s = 0, per_alloc = 0, contentions = 0;
  for (auto _ : state) {
    const RunResult r = run("vmalloc_stress",
                            {{"threads", int64_t(2)},
                             {"ops", int64_t(200000)},
                             {"vmap_nodes", nodes},
                             {"busy_lock", std::string(busy_lock)}},
                            opt);
    for (const auto& [k, v] : r.summary) {
      if (k == "elapsed_s") state.SetIterationTime(std::get<double>(v));
      if (k == "ops_per_s") ops_per_s = std::get<double>(v);
      if (k == "busy_lock_per_alloc") per_alloc = std::get<double>(v);
      if (k == "busy_lock_contentions") contentions = double(std::get<int64_t>(v));
    }
  }
  state.counters["ops_per_s"] = ops_per_s;
  state.counters["busy_lock_per_alloc"] = per_alloc;
  state.counters["busy_lock_contentions"] = contentions;
}
BENCHMARK_CAPTURE(BM_VmallocStress, v67_twice, 1, "twice")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VmallocStress, v67_once, 1, "once")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VmallocStress, v69_nodes_twice, 0, "twice")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VmallocStress, v69_nodes_once, 0, "once")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
