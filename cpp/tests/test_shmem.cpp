// The shmem fault model (mm/shmem.hpp, mm/page_cache.hpp) and the shmem_fault scenario: info->lock exactly 2 / 1 /
// 0 / 1 per fault for lock_twice / prealloc / ramfs / modern plus the counted index-page retakes of
// shmem_swp_alloc, every index faulted once with disjoint, the page cache's contents after overlap, pages really
// zeroed, no page lost or leaked, memory back in the allocator at teardown, bad input rejected.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/shmem.hpp"
#include "alloclab/topology/topology.hpp"
#include "support.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

const std::vector<std::string> kVariants = {"lock_twice", "prealloc", "ramfs", "modern"};

using support::error_of;
using support::lockstat_acquisitions;
using support::summary_bool;
using support::summary_int;
using support::summary_value;

// info->lock acquisitions the model promises for `misses` page-cache misses and `index_allocs` index pages.
uint64_t info_lock_expected(ShmemVariant v, uint64_t misses, uint64_t index_allocs, uint64_t new_pages) {
  switch (v) {
    case ShmemVariant::lock_twice: return 2 * misses + index_allocs;
    case ShmemVariant::prealloc: return misses + index_allocs;
    case ShmemVariant::ramfs: return 0;
    case ShmemVariant::modern: return new_pages;
  }
  return ~0ull;
}

bool has_swap_vector(ShmemVariant v) { return v == ShmemVariant::lock_twice || v == ShmemVariant::prealloc; }
const char* tree_lock_class(ShmemVariant v) {
  return v == ShmemVariant::modern ? "mapping->i_pages" : "mapping->tree_lock";
}

// A MemorySystem with one ShmemFile on a synthetic machine; lock_stat on. The test thread (and any thread a test
// starts) attaches itself as a worker. TearDown checks that teardown gives every page back.
class ShmemTest : public support::MemoryTest {
 protected:
  void build(ShmemVariant v, uint64_t nr_pages, Backing backing = Backing::none, bool clear = true,
             const std::string& topo = "node:1 core:4 pu:1") {
    // Spinning waiters yield: the threaded tests may run more threads than the host has PUs.
    build_machine(topo, LockConfig{}, /*spin_yield=*/true, 8);
    MemoryConfig cfg;
    const uint64_t pages = (nr_pages + shmem_index_pages(nr_pages) + 16384 + 1023) / 1024 * 1024;
    cfg.node_pages.assign(size_t(machine->model().nr_nodes()), pages);
    cfg.backing = backing;
    build_memory(cfg);
    ms->prefault_backing();
    ShmemConfig sc;
    sc.variant = v;
    sc.nr_pages = nr_pages;
    sc.clear = clear;
    file = std::make_unique<ShmemFile>(*ms, *locks, sc);
  }
  // Runs `n` threads, thread w attached as worker w on model CPU w, each calling f(w, its task).
  void in_threads(int n, const std::function<void(int, ShmemTask&)>& f) {
    std::vector<ShmemTask*> tasks;
    for (int w = 0; w < n; ++w) tasks.push_back(&file->add_task(w, 0));
    std::vector<std::thread> ts;
    for (int w = 0; w < n; ++w)
      ts.emplace_back([&, w] {
        locks->attach(w, w);
        f(w, *tasks[size_t(w)]);
        LockDomain::detach();
      });
    for (auto& t : ts) t.join();
  }
  void TearDown() override {
    LockDomain::detach();
    if (!file) return;
    file->teardown(0);
    ms->drain_all_pages();
    const CheckReport r = ms->check();
    EXPECT_TRUE(r.ok) << r.summary();
    EXPECT_EQ(r.allocated_pages, 0u) << "pages leaked past teardown: " << r.summary();
    file.reset();
    ms.reset();
  }

  std::unique_ptr<ShmemFile> file;
};

RunResult run_shmem(std::map<std::string, Value> params, const std::string& topo = "node:1 core:4 pu:1",
                    bool lockstat = true) {
  RunOptions opt;
  opt.model = Topology::synthetic(topo);
  opt.lockstat = lockstat;
  return run("shmem_fault", params, opt);
}

}  // namespace

// ---- the swap vector's index pages ---------------------------------------------------------------------------------

TEST(ShmemIndexPages, FollowTheSwapVectorLayout) {
  EXPECT_EQ(shmem_index_pages(0), 0u);
  EXPECT_EQ(shmem_index_pages(16), 0u);        // i_direct only
  EXPECT_EQ(shmem_index_pages(17), 2u);        // i_indirect + the first leaf
  EXPECT_EQ(shmem_index_pages(16 + 512), 2u);  // one leaf covers 512 indices
  EXPECT_EQ(shmem_index_pages(16 + 513), 3u);
  EXPECT_EQ(shmem_index_pages(16 + 256 * 512), 257u);      // the single-indirect half is full
  EXPECT_EQ(shmem_index_pages(16 + 256 * 512 + 1), 259u);  // + a middle page + its first leaf
  EXPECT_EQ(shmem_index_pages(SHMEM_MAX_INDEX), 1u + 256 + 256 + 256 * 512);
}

// ---- one task: exact counts per variant ----------------------------------------------------------------------------

class ShmemVariantTest : public ShmemTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ShmemVariantTest, OneTaskCountsAreExact) {
  const ShmemVariant v = kShmemVariantNames.parse(GetParam(), "variant");
  const uint64_t n = 2000;  // indices 16..1999: i_indirect + 4 leaves
  build(v, n);
  locks->attach(0, 0);
  ShmemTask& t = file->add_task(0, 0);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(file->touch(t, i) & VM_FAULT_ERROR, 0) << i;
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(file->touch(t, i), 0);  // PTEs present: no second fault
  LockDomain::detach();
  const ShmemStats s = t.stats();
  const uint64_t idx = has_swap_vector(v) ? 5 : 0;
  EXPECT_EQ(shmem_index_pages(n), 5u);
  EXPECT_EQ(s.touches, 2 * n);
  EXPECT_EQ(s.faults, n);
  EXPECT_EQ(s.new_pages, n);
  EXPECT_EQ(s.cache_hits + s.eexist_races + s.pte_races + s.oom, 0u);
  EXPECT_EQ(s.index_page_allocs, idx);  // one shmem_dir_alloc, one info->lock retake, per index page
  EXPECT_EQ(s.index_pages_freed, 0u);
  EXPECT_EQ(s.info_lock, info_lock_expected(v, n, idx, n));
  EXPECT_EQ(acquisitions("info->lock"), s.info_lock);
  const uint64_t per_fault[] = {2, 1, 0, 1};
  EXPECT_EQ(acquisitions("info->lock"), per_fault[size_t(v)] * n + idx);
  EXPECT_EQ(acquisitions(tree_lock_class(v)), n);
  EXPECT_EQ(s.tree_lock, n);
  const uint64_t batch = v == ShmemVariant::modern ? FOLIO_BATCH_SIZE : PAGEVEC_SIZE;
  EXPECT_EQ(acquisitions("lru_lock"), n / batch);  // one per full pagevec
  EXPECT_EQ(s.lru_lock, n / batch);
  EXPECT_EQ(s.mmap_sem_reads, n);
  LockToken w;  // every fault's down_read was matched by its up_read: the write side is free
  ASSERT_TRUE(file->mmap_sem().trylock(w));
  file->mmap_sem().unlock(w);
  EXPECT_EQ(s.page_allocs, n);
  EXPECT_EQ(file->nrpages(), n);
  EXPECT_EQ(file->index_pages(), idx);
  if (v != ShmemVariant::ramfs) {
    EXPECT_EQ(file->alloced(), n);
  }
  // 2.6.35 preloads every radix-tree node outside tree_lock; the xarray allocates them under its lock.
  const uint64_t under_lock = v == ShmemVariant::modern ? file->mapping().page_tree.nr_nodes() : 0;
  EXPECT_EQ(file->mapping().page_tree.nodes_allocated_locked(), under_lock);
  EXPECT_GT(file->mapping().page_tree.nr_nodes(), 0u);

  file->lru_add_drain_all();
  const ShmemCheck c = file->verify();
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.pages, n);
  EXPECT_EQ(c.ptes, n);
  EXPECT_EQ(c.lru_pages, n);
  EXPECT_EQ(c.index_pages, idx);
  EXPECT_EQ(ms->check().allocated_pages, n + idx);  // every allocated page is the file's: none lost or leaked
  for (uint64_t i = 0; i < n; ++i) {
    const Page* p = file->pte_page(i);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->index, i);
    EXPECT_EQ(page_ref_count(*p), 2);  // the page cache's and the PTE's
    EXPECT_EQ(page_mapcount(*p), 1);
  }
}

TEST_P(ShmemVariantTest, PagesAreZeroedForRealOutsideTheLocks) {
  const ShmemVariant v = kShmemVariantNames.parse(GetParam(), "variant");
  const uint64_t n = 600;
  build(v, n, Backing::real);
  for (uint64_t i = 0; i < ms->node_present_pages(0); ++i)  // dirty every frame the allocator can hand out
    std::memset(ms->page_address(ms->zone(0).zone_mem_map + i), 0xAA, PAGE_SIZE);
  ShmemTask& t = file->add_task(0, 0);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(file->touch(t, i) & VM_FAULT_ERROR, 0);
  for (uint64_t i = 0; i < n; ++i) {
    const auto* b = static_cast<const unsigned char*>(ms->page_address(file->pte_page(i)));
    ASSERT_EQ(b[0], 0);
    ASSERT_EQ(std::memcmp(b, b + 1, PAGE_SIZE - 1), 0) << "page " << i << " is not all zero";
  }
}

TEST_P(ShmemVariantTest, WithoutClearPagesKeepTheirOldContents) {
  const ShmemVariant v = kShmemVariantNames.parse(GetParam(), "variant");
  build(v, 64, Backing::real, /*clear=*/false);
  for (uint64_t i = 0; i < ms->node_present_pages(0); ++i)
    std::memset(ms->page_address(ms->zone(0).zone_mem_map + i), 0xAA, PAGE_SIZE);
  ShmemTask& t = file->add_task(0, 0);
  for (uint64_t i = 0; i < 64; ++i) ASSERT_EQ(file->touch(t, i) & VM_FAULT_ERROR, 0);
  EXPECT_EQ(static_cast<const unsigned char*>(ms->page_address(file->pte_page(7)))[100], 0xAA);
}

// ---- several tasks --------------------------------------------------------------------------------------------------

TEST_P(ShmemVariantTest, DisjointThreadsFaultEveryIndexExactlyOnce) {
  const ShmemVariant v = kShmemVariantNames.parse(GetParam(), "variant");
  const int threads = 3;
  const uint64_t per = 3000, n = threads * per;  // slices straddle index-page boundaries: retakes may race
  build(v, n);
  in_threads(threads, [&](int w, ShmemTask& t) {
    for (uint64_t i = uint64_t(w) * per; i < uint64_t(w + 1) * per; ++i) file->touch(t, i);
  });
  const ShmemStats s = file->totals();
  EXPECT_EQ(s.faults, n);
  EXPECT_EQ(s.new_pages, n);
  EXPECT_EQ(s.cache_hits + s.eexist_races + s.pte_races + s.oom, 0u);
  for (size_t w = 0; w < file->nr_tasks(); ++w) EXPECT_EQ(file->task(w).stats().faults, per);
  const uint64_t installed = has_swap_vector(v) ? shmem_index_pages(n) : 0;
  EXPECT_EQ(s.index_page_allocs - s.index_pages_freed, installed);  // a racing task's spare index page is freed at once
  EXPECT_EQ(s.info_lock, info_lock_expected(v, n, s.index_page_allocs, n));
  EXPECT_EQ(acquisitions("info->lock"), s.info_lock);
  EXPECT_EQ(acquisitions(tree_lock_class(v)), n);
  EXPECT_EQ(acquisitions("lru_lock"), s.lru_lock);
  file->lru_add_drain_all();
  const ShmemCheck c = file->verify();
  ASSERT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.pages, n);
  EXPECT_EQ(c.ptes, n);
  EXPECT_EQ(c.index_pages, installed);
  EXPECT_EQ(ms->check().allocated_pages, n + installed);
}

TEST_P(ShmemVariantTest, OverlapLeavesOnePagePerIndexAndLeaksNothing) {
  const ShmemVariant v = kShmemVariantNames.parse(GetParam(), "variant");
  const int threads = 3;
  const uint64_t n = 4000;
  build(v, n);
  in_threads(threads, [&](int, ShmemTask& t) {
    for (uint64_t i = 0; i < n; ++i) file->touch(t, i);
  });
  const ShmemStats s = file->totals();
  EXPECT_EQ(s.touches, threads * n);
  EXPECT_EQ(s.new_pages, n);  // no index inserted twice
  EXPECT_EQ(s.faults, s.new_pages + s.eexist_races + s.cache_hits);
  EXPECT_EQ(s.page_allocs - s.page_allocs_unused, n);  // every losing page was freed
  EXPECT_EQ(s.info_lock, info_lock_expected(v, s.new_pages + s.eexist_races, s.index_page_allocs, s.new_pages));
  EXPECT_EQ(acquisitions("info->lock"), s.info_lock);
  EXPECT_EQ(s.tree_lock, s.new_pages + s.eexist_races);
  EXPECT_EQ(s.mmap_sem_reads, s.faults);
  file->lru_add_drain_all();
  const ShmemCheck c = file->verify();
  ASSERT_TRUE(c.ok) << c.summary();
  const uint64_t installed = has_swap_vector(v) ? shmem_index_pages(n) : 0;
  EXPECT_EQ(c.index_pages, installed);
  // The page cache holds exactly the pages the PTEs map, one per index, each with the cache's and the PTE's
  // reference, unlocked and uptodate.
  std::set<const Page*> distinct;
  for (uint64_t i = 0; i < n; ++i) {
    const auto* p = static_cast<const Page*>(file->mapping().page_tree.lookup(i));
    ASSERT_NE(p, nullptr) << i;
    EXPECT_EQ(file->pte_page(i), p);
    EXPECT_EQ(p->index, i);
    EXPECT_EQ(p->mapping, file->mapping().mapping_value());
    EXPECT_EQ(page_ref_count(*p), 2);
    EXPECT_EQ(page_mapcount(*p), 1);
    EXPECT_TRUE(PageUptodate(*p));
    EXPECT_FALSE(PageLocked(*p));
    distinct.insert(p);
  }
  EXPECT_EQ(distinct.size(), n);
  EXPECT_EQ(file->nrpages(), n);
  EXPECT_EQ(ms->check().allocated_pages, n + installed);
}

INSTANTIATE_TEST_SUITE_P(Variants, ShmemVariantTest, ::testing::ValuesIn(kVariants));

// The double-indirect half of the swap vector: a middle page and its leaves, each one more info->lock retake.
TEST_F(ShmemTest, IndexPageRetakesIntoTheDoubleIndirectHalf) {
  const uint64_t n = SHMEM_NR_DIRECT + 256 * 512 + 600;  // 2 leaves past the single-indirect half
  build(ShmemVariant::prealloc, n);
  locks->attach(0, 0);
  ShmemTask& t = file->add_task(0, 0);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(file->touch(t, i) & VM_FAULT_ERROR, 0);
  LockDomain::detach();
  const uint64_t idx = 1 + 256 + 1 + 2;
  EXPECT_EQ(shmem_index_pages(n), idx);
  EXPECT_EQ(t.st.index_page_allocs, idx);
  EXPECT_EQ(acquisitions("info->lock"), n + idx);
  file->lru_add_drain_all();
  const ShmemCheck c = file->verify();
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.index_pages, idx);
}

TEST_F(ShmemTest, TouchBeyondTheEndIsSigbus) {
  build(ShmemVariant::lock_twice, 10);
  ShmemTask& t = file->add_task(0, 0);
  EXPECT_EQ(file->touch(t, 10), VM_FAULT_SIGBUS);
  EXPECT_EQ(t.st.faults, 0u);
}

TEST_F(ShmemTest, BadConfigurationIsRejected) {
  build(ShmemVariant::modern, 10);
  ShmemConfig sc;
  sc.nr_pages = 0;
  EXPECT_NE(error_of([&] { ShmemFile f(*ms, *locks, sc); }).find("nr_pages"), std::string::npos);
  sc.nr_pages = SHMEM_MAX_INDEX + 1;
  EXPECT_NE(error_of([&] { ShmemFile f(*ms, *locks, sc); }).find("nr_pages"), std::string::npos);
  EXPECT_NE(error_of([&] { file->add_task(99, 0); }).find("cpu"), std::string::npos);
  EXPECT_NE(error_of([&] { file->add_task(0, 3); }).find("nid"), std::string::npos);
  EXPECT_NE(error_of([] { kShmemVariantNames.parse("lock_thrice", "variant"); }).find("variant"), std::string::npos);
}

// ---- the scenario ---------------------------------------------------------------------------------------------------

class ShmemScenario : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ShmemScenario, DisjointCountsAreExact) {
  const auto& [variant, threads] = GetParam();
  const ShmemVariant v = kShmemVariantNames.parse(variant, "variant");
  const uint64_t per = 2500, n = per * uint64_t(threads);
  const RunResult r = run_shmem({{"variant", variant},
                                 {"threads", int64_t(threads)},
                                 {"pages_per_thread", int64_t(per)},
                                 {"backing", std::string("none")}});
  EXPECT_EQ(summary_int<uint64_t>(r, "faults"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "pagecache_pages"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "new_pages"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "cache_hits") + summary_int<uint64_t>(r, "eexist_races"), 0u);
  const uint64_t index_allocs = summary_int<uint64_t>(r, "index_page_allocs");
  EXPECT_EQ(summary_int<uint64_t>(r, "index_pages"), has_swap_vector(v) ? shmem_index_pages(n) : 0);
  EXPECT_EQ(index_allocs - summary_int<uint64_t>(r, "index_pages_freed"), summary_int<uint64_t>(r, "index_pages"));
  const uint64_t info = info_lock_expected(v, n, index_allocs, n);
  EXPECT_EQ(summary_int<uint64_t>(r, "info_lock_acquisitions"), info);
  EXPECT_EQ(lockstat_acquisitions(r, "info->lock"), info);
  EXPECT_DOUBLE_EQ(std::get<double>(summary_value(r, "info_lock_per_fault")), double(info) / double(n));
  EXPECT_EQ(lockstat_acquisitions(r, tree_lock_class(v)), n);
  EXPECT_EQ(lockstat_acquisitions(r, "lru_lock"), summary_int<uint64_t>(r, "lru_lock_acquisitions"));
  const LockStatRow* mm = r.lock_row("mmap_sem-R");  // read only: no plain or -W row
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(r.lock_row("mmap_sem"), nullptr);
  EXPECT_EQ(r.lock_row("mmap_sem-W"), nullptr);
  EXPECT_EQ(mm->kind, "rwsem");
  EXPECT_EQ(mm->acquisitions, n);
  EXPECT_EQ(mm->contentions, 0u);  // readers never wait: there is no writer
  EXPECT_EQ(summary_int<uint64_t>(r, "mmap_sem_reads"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "mmap_sem_read_acquisitions"), n);  // the scenario's declared expectation
  EXPECT_EQ(r.workers.size(), size_t(threads));
  for (const auto& w : r.workers) EXPECT_EQ(w.ops, per);
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact"));
  EXPECT_EQ(std::get<std::string>(summary_value(r, "check")).rfind("ok:", 0), 0u)
      << std::get<std::string>(summary_value(r, "check"));
}

TEST_P(ShmemScenario, OverlapInsertsEveryIndexOnce) {
  const auto& [variant, threads] = GetParam();
  const ShmemVariant v = kShmemVariantNames.parse(variant, "variant");
  const uint64_t per = 1500, n = per * uint64_t(threads);
  const RunResult r = run_shmem({{"variant", variant},
                                 {"threads", int64_t(threads)},
                                 {"pages_per_thread", int64_t(per)},
                                 {"pattern", std::string("overlap")},
                                 {"backing", std::string("real")}});
  EXPECT_EQ(summary_int<uint64_t>(r, "file_pages"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "pagecache_pages"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "new_pages"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "touches"), n * uint64_t(threads));
  const uint64_t misses = summary_int<uint64_t>(r, "new_pages") + summary_int<uint64_t>(r, "eexist_races");
  EXPECT_EQ(summary_int<uint64_t>(r, "faults"), misses + summary_int<uint64_t>(r, "cache_hits"));
  EXPECT_EQ(summary_int<uint64_t>(r, "page_allocs") - summary_int<uint64_t>(r, "page_allocs_unused"), n);
  const uint64_t info = info_lock_expected(v, misses, summary_int<uint64_t>(r, "index_page_allocs"), n);
  EXPECT_EQ(summary_int<uint64_t>(r, "info_lock_acquisitions"), info);
  EXPECT_EQ(lockstat_acquisitions(r, "info->lock"), info);
  EXPECT_EQ(lockstat_acquisitions(r, tree_lock_class(v)), misses);
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact")) << std::get<std::string>(summary_value(r, "check"));
}

INSTANTIATE_TEST_SUITE_P(VariantsThreads, ShmemScenario,
                         ::testing::Combine(::testing::ValuesIn(kVariants), ::testing::Values(1, 2, 3)));

TEST(ShmemScenarioOptions, LockstatOffKeepsTheCountsAndDropsTheRows) {
  const RunResult r = run_shmem({{"variant", std::string("lock_twice")},
                                 {"threads", int64_t(2)},
                                 {"pages_per_thread", int64_t(1000)},
                                 {"backing", std::string("none")},
                                 {"clear_ns", int64_t(100)},
                                 {"fault_ns", int64_t(50)}},
                                "node:1 core:4 pu:1", /*lockstat=*/false);
  EXPECT_TRUE(r.lockstat.empty());
  // The formula's count is there; lock_stat's is not measured, and nothing claims the counts were checked.
  EXPECT_EQ(summary_int<uint64_t>(r, "info_lock_expected"), 2 * 2000 + summary_int<uint64_t>(r, "index_page_allocs"));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(summary_value(r, "info_lock_acquisitions")));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(summary_value(r, "lock_counts_exact")));
}

TEST(ShmemScenarioOptions, TwoNodesAllocateOnTheWorkersNodes) {
  const RunResult r = run_shmem({{"variant", std::string("prealloc")},
                                 {"threads", int64_t(4)},
                                 {"pages_per_thread", int64_t(1000)},
                                 {"pattern", std::string("overlap")},
                                 {"backing", std::string("none")}},
                                "node:2 core:2 pu:1");
  EXPECT_EQ(summary_int<uint64_t>(r, "pagecache_pages"), 4000u);
  EXPECT_EQ(summary_int<uint64_t>(r, "new_pages"), 4000u);
}

TEST(ShmemScenarioOptions, BadInputIsAValueError) {
  const auto err = [](std::map<std::string, Value> p) { return error_of([&] { run_shmem(p); }); };
  EXPECT_NE(err({{"variant", std::string("lock_thrice")}}).find("variant"), std::string::npos);
  EXPECT_NE(err({{"pattern", std::string("random")}}).find("pattern"), std::string::npos);
  EXPECT_NE(err({{"pages_per_thread", int64_t(0)}}).find("pages_per_thread"), std::string::npos);
  EXPECT_NE(
      err({{"threads", int64_t(64)}, {"pages_per_thread", int64_t(SHMEM_MAX_INDEX / 32)}}).find("pages_per_thread"),
      std::string::npos);
  EXPECT_NE(err({{"backing", std::string("real")}, {"clear_ns", int64_t(300)}}).find("clear_ns"), std::string::npos);
  EXPECT_NE(err({{"backing", std::string("maybe")}}).find("backing"), std::string::npos);
  // More memory than the host has: refused before anything is allocated, with both figures.
  EXPECT_EQ(
      err({{"threads", int64_t(1)}, {"pages_per_thread", int64_t(60'000'000)}}).rfind("memory: this run needs", 0), 0u);
}
