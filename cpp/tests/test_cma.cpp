// CMA areas, cma_alloc / cma_release, alloc_contig_range and the cma_concurrent scenario: exact lock counts against
// the documented formula (cma.hpp, page_alloc_contig.hpp), roll-back of failed attempts, every page back and
// check() after every test, bad input. No wall-clock assertions.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/address_space.hpp"
#include "alloclab/mm/cma.hpp"
#include "alloclab/mm/lruvec.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/migrate.hpp"
#include "alloclab/mm/page_alloc_contig.hpp"
#include "alloclab/topology/topology.hpp"
#include "support.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

constexpr auto& invalid_argument_of = support::error_of;
using support::summary_bool;
using support::summary_int;
using support::summary_value;
using support::worker_metric;

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// A MemorySystem with CMA areas on a synthetic machine. The test thread is worker 0 on model CPU 0 only inside
// measure(), so that set-up (fills, hogs) is not in lock_stat — as a run's prepare() is not.
class CmaTest : public support::MemoryTest {
 protected:
  // `area_pages` per area on nodes `nids`; each node gets its areas plus `room` pages. min_free_kbytes = 0 so that
  // a fill can occupy every page of an area (the kernel's watermarks would stop it a little short).
  void build(const std::string& topo, std::vector<int> nids, uint64_t area_pages, uint64_t room,
             AllocMutex mode = AllocMutex::global, Backing backing = Backing::none, unsigned order_per_bit = 9) {
    build_machine(topo);
    MemoryConfig cfg;
    cfg.node_pages.assign(size_t(machine->model().nr_nodes()), 0);
    for (int n : nids) cfg.node_pages[size_t(n)] += area_pages;
    for (uint64_t& p : cfg.node_pages)
      if (p) p += room;  // once per node with areas
    cfg.min_free_kbytes = 0;
    cfg.backing = backing;
    build_memory(cfg);
    std::vector<CmaAreaSpec> specs;
    for (int n : nids) specs.push_back({n, area_pages});
    cma = std::make_unique<CmaAreas>(*ms, *locks, specs, mode, order_per_bit);
    for (int n = 0; n < ms->nr_nodes(); ++n)
      if (ms->node_present_pages(n)) activated.emplace_back(n, ms->free_area_state(n));
    lru = std::make_unique<NodeLruvecs>(*ms, *locks);
    mc = std::make_unique<MigrateContext>(*ms, *lru, 0, 0);
  }

  AddressSpace& new_file(uint64_t pages) {
    files.push_back(std::make_unique<AddressSpace>(*locks, "shm" + std::to_string(files.size()), pages));
    return *files.back();
  }

  // dd: `n` page-cache pages of `f` (from pgoff `pgoff0`) inside `area`, allocated as movable pages on its node on
  // `cpu`; pages landing elsewhere are freed afterwards. Returns the pages placed in the area.
  uint64_t fill(const Cma& area, AddressSpace& f, uint64_t n, uint64_t pgoff0 = 0, int cpu = 0) {
    std::vector<Page*> elsewhere;
    uint64_t got = 0;
    while (got < n) {
      Page* page = ms->alloc_pages(cpu, area.nid, 0, GFP_HIGHUSER_MOVABLE | __GFP_THISNODE);
      if (!page) break;
      if (!area.contains(ms->page_to_pfn(page))) {
        elsewhere.push_back(page);
        continue;
      }
      if (ms->config().backing == Backing::real)
        *static_cast<uint64_t*>(ms->page_address(page)) = 0xc0ffee0000000000ull + pgoff0 + got;
      f.shmem_add_to_page_cache(page, pgoff0 + got, *lru);
      ++got;
    }
    for (Page* p : elsewhere) ms->free_pages(cpu, p, 0);
    ms->drain_all_pages();
    return got;
  }

  // Runs `op` as worker 0 on model CPU `cpu` with fresh lock_stat counters.
  void measure(const std::function<void()>& op, int cpu = 0) {
    locks->reset_stats(1);
    locks->attach(0, cpu);
    op();
    LockDomain::detach();
  }
  uint64_t acq(const std::string& cls) const { return acquisitions(cls); }

  // Everything back: release, truncate, drain; then the memory is as it was right after the areas were activated.
  void give_back_all(std::vector<std::pair<Cma*, std::pair<Page*, uint64_t>>> held = {}) {
    for (auto& [area, pc] : held) EXPECT_TRUE(cma_release(*area, *ms, 0, pc.first, pc.second));
    for (auto& f : files) {
      EXPECT_TRUE(f->check().empty()) << f->check().front();
      f->truncate(*ms, *lru, 0);
    }
    ms->drain_all_pages();
    const CheckReport r = ms->check();
    EXPECT_TRUE(r.ok) << r.summary();
    EXPECT_EQ(r.allocated_pages, 0u);
    EXPECT_EQ(lru->nr_pages(), 0u);
    const auto errors = cma->check(true);
    EXPECT_TRUE(errors.empty()) << errors.front();
    // Free lists as right after activation: the same blocks per order, the same CMA blocks (an unmovable
    // allocation may have claimed a movable pageblock meanwhile, which moves blocks between those two lists only).
    for (const auto& [n, state] : activated) {
      const FreeAreaState now = ms->free_area_state(n);
      for (unsigned o = 0; o < NR_PAGE_ORDERS; ++o) {
        uint64_t a = 0, b = 0;
        for (int mt = 0; mt < MIGRATE_TYPES; ++mt) a += now.nr_free[o][mt], b += state.nr_free[o][mt];
        EXPECT_EQ(a, b) << "node " << n << " order " << o << " before\n"
                        << state.to_string() << "after\n"
                        << now.to_string();
        EXPECT_EQ(now.nr_free[o][MIGRATE_CMA], state.nr_free[o][MIGRATE_CMA]) << "node " << n << " order " << o;
      }
    }
  }

  void TearDown() override {
    LockDomain::detach();
    if (ms) {
      const CheckReport r = ms->check();
      EXPECT_TRUE(r.ok) << r.summary();
    }
    files.clear();
    mc.reset();
    lru.reset();
    cma.reset();
    ms.reset();
  }

  std::unique_ptr<CmaAreas> cma;
  std::unique_ptr<NodeLruvecs> lru;
  std::unique_ptr<MigrateContext> mc;
  std::vector<std::unique_ptr<AddressSpace>> files;
  std::vector<std::pair<int, FreeAreaState>> activated;
};

}  // namespace

// ---- declaration and activation ------------------------------------------------------------------------------------

TEST_F(CmaTest, ActivationMakesTheAreaCmaAtTheTopOfItsNode) {
  build("node:2 core:1 pu:1", {0, 1}, 4096, 8192);
  ASSERT_EQ(cma->size(), 2);
  for (int i = 0; i < 2; ++i) {
    const Cma& c = (*cma)[i];
    EXPECT_EQ(c.nid, i);
    EXPECT_EQ(c.count, 4096u);
    EXPECT_EQ(c.base_pfn + c.count, ms->node_start_pfn(i) + ms->node_present_pages(i));  // memblock: top-down
    EXPECT_EQ(c.available_count(), 4096u);
    EXPECT_EQ(c.bitmap_maxno(), 8u);  // order_per_bit 9: one bit per pageblock
    const Zone& z = ms->zone(i);
    EXPECT_EQ(z.zone_page_state(NR_FREE_CMA_PAGES), 4096);
    EXPECT_EQ(z.zone_page_state(NR_FREE_PAGES), long(ms->node_present_pages(i)));
    for (uint64_t pfn = c.base_pfn; pfn < c.base_pfn + c.count; pfn += pageblock_nr_pages)
      EXPECT_EQ(z.get_pfnblock_migratetype(pfn), MIGRATE_CMA);
    EXPECT_EQ(z.get_pfnblock_migratetype(c.base_pfn - 1), MIGRATE_MOVABLE);
    EXPECT_EQ(ms->free_area_state(i).nr_free[MAX_PAGE_ORDER][MIGRATE_CMA], 4u);  // still max-order blocks
  }
  EXPECT_TRUE(cma->check(true).empty());
  give_back_all();
}

TEST_F(CmaTest, AreaNotMaxOrderAlignedSplitsTheStraddlingBlock) {
  build("node:1 core:1 pu:1", {0}, 1536, 4608);  // base = top - 1536: 512 pages into a max-order block
  const Cma& c = (*cma)[0];
  EXPECT_EQ(c.base_pfn % MAX_ORDER_NR_PAGES, 512u);
  EXPECT_EQ(ms->zone(0).zone_page_state(NR_FREE_CMA_PAGES), 1536);
  const FreeAreaState s = ms->free_area_state(0);
  EXPECT_EQ(s.nr_free[pageblock_order][MIGRATE_CMA], 1u);      // the area's half of the split block
  EXPECT_EQ(s.nr_free[pageblock_order][MIGRATE_MOVABLE], 1u);  // the other half stays movable
  EXPECT_EQ(s.nr_free[MAX_PAGE_ORDER][MIGRATE_CMA], 1u);
  const CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();  // CMA and movable halves are "apart", not unmerged
}

TEST_F(CmaTest, MovableAllocationsLandInTheAreaUnmovableOnesNever) {
  build("node:1 core:1 pu:1", {0}, 2048, 2048);
  const Cma& c = (*cma)[0];
  std::vector<Page*> movable, unmovable;
  uint64_t in_area = 0;
  for (int i = 0; i < 1500; ++i) {
    Page* p = ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE);
    ASSERT_NE(p, nullptr);
    in_area += c.contains(ms->page_to_pfn(p));
    movable.push_back(p);
  }
  EXPECT_GT(in_area, 0u);  // ALLOC_CMA: free CMA was over half the zone's free pages
  for (int i = 0; i < 1000; ++i) {
    Page* p = ms->alloc_pages(0, 0, 0, GFP_KERNEL);
    if (!p) break;
    EXPECT_FALSE(c.contains(ms->page_to_pfn(p)));
    unmovable.push_back(p);
  }
  for (Page* p : movable) ms->free_pages(0, p, 0);
  for (Page* p : unmovable) ms->free_pages(0, p, 0);
  give_back_all();
}

// ---- the formula, exactly ------------------------------------------------------------------------------------------

class CmaFormula : public CmaTest, public ::testing::WithParamInterface<AllocMutex> {};

TEST_P(CmaFormula, FullAreaEveryLockCountIsTheFormula) {
  const AllocMutex mode = GetParam();
  const uint64_t N = 8192;  // 16 pageblocks, 8 max-order blocks
  build("node:1 core:1 pu:1", {0}, N, N + 4096, mode);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  EXPECT_EQ(area.available_count(), N);
  const int batch = ms->pcp(0, 0).batch;
  ASSERT_GT(batch, 1);

  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, N, 1, &st); });
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(ms->page_to_pfn(page), area.base_pfn);
  EXPECT_EQ(area.available_count(), 0u);
  EXPECT_EQ(area.bits_set(), N / pageblock_nr_pages);
  EXPECT_EQ(st.attempts, 1u);
  EXPECT_EQ(st.busy_retries, 0u);
  const ContigStats& c = st.contig;
  EXPECT_EQ(c.migrate.pages_migrated, N);
  EXPECT_EQ(c.migrate.isolate_calls, N / 32);

  // The formula with every term derived independently.
  const uint64_t B = N / pageblock_nr_pages;
  const uint64_t R = ceil_div(N, uint64_t(batch));  // v6.2: each refill pulls `batch` pages onto an empty pcp
  const uint64_t T = N / MAX_ORDER_NR_PAGES;        // the freed pages merged back into max-order blocks
  EXPECT_EQ(acq(mode == AllocMutex::global ? "cma_mutex" : "cma->alloc_mutex"), 1u);
  EXPECT_EQ(acq(mode == AllocMutex::global ? "cma->alloc_mutex" : "cma_mutex"), 0u);
  EXPECT_EQ(acq("cma->lock"), 1u);
  EXPECT_EQ(acq("pcpu_drain_mutex"), 1u);
  EXPECT_EQ(acq("zone->lock"), 2 * B + 0 + R + N + 1 + T + 0);
  EXPECT_EQ(acq("mapping->i_pages"), N);
  EXPECT_EQ(acq("lru_lock"), N / 32 + N);
  EXPECT_EQ(acq("pcp->lock"), N);
  // ... and the same numbers from the stats' own formula.
  EXPECT_EQ(c.target_refills, R);
  EXPECT_EQ(c.take_sections, T);
  EXPECT_EQ(c.zone_lock_expected(), acq("zone->lock"));
  EXPECT_EQ(c.lru_lock_expected(), acq("lru_lock"));
  EXPECT_EQ(c.pcp_lock_expected(), acq("pcp->lock"));

  // The allocated pages: order-0, one reference, not buddy, outside the page cache.
  for (uint64_t i = 0; i < N; ++i) {
    EXPECT_EQ(page_ref_count(page[i]), 1);
    EXPECT_FALSE(PageBuddy(page[i]));
    EXPECT_EQ(page[i].mapping, 0u);
  }
  // The file moved: every page still cached, now outside the area, on the LRU.
  EXPECT_EQ(f.nrpages(), N);
  for (uint64_t pgoff = 0; pgoff < N; ++pgoff) ASSERT_FALSE(area.contains(ms->page_to_pfn(f.xa_load(pgoff))));
  EXPECT_TRUE(f.check().empty());
  EXPECT_EQ(lru->nr_pages(), N);

  // cma_release: one cma->lock, every page back.
  measure([&] { EXPECT_TRUE(cma_release(area, *ms, 0, page, N)); });
  EXPECT_EQ(acq("cma->lock"), 1u);
  EXPECT_EQ(area.available_count(), N);
  EXPECT_EQ(area.bits_set(), 0u);
  give_back_all();
}

INSTANTIATE_TEST_SUITE_P(Cma, CmaFormula, ::testing::Values(AllocMutex::global, AllocMutex::per_area),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_F(CmaTest, EmptyAreaNeedsNoMigrationAndTakesOneSectionPerFreeBlock) {
  const uint64_t N = 4096;
  build("node:1 core:1 pu:1", {0}, N, 4096);
  Cma& area = (*cma)[0];
  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, N, 1, &st); });
  ASSERT_NE(page, nullptr);
  const ContigStats& c = st.contig;
  const uint64_t B = N / pageblock_nr_pages;
  EXPECT_EQ(c.migrate.pages_migrated, 0u);
  EXPECT_EQ(c.target_refills, 0u);
  // Free when isolated, and isolation leaves blocks inside the range whole: one section per order-10 block.
  EXPECT_EQ(c.take_sections, N / MAX_ORDER_NR_PAGES);
  EXPECT_EQ(acq("zone->lock"), 2 * B + 1 + c.take_sections);
  EXPECT_EQ(acq("mapping->i_pages"), 0u);
  EXPECT_EQ(acq("lru_lock"), 0u);
  EXPECT_EQ(acq("pcp->lock"), 0u);
  EXPECT_EQ(acq("cma_mutex"), 1u);
  give_back_all({{&area, {page, N}}});
}

TEST_F(CmaTest, AdjacentPageblockAreasMergeAsTheKernelsActivationFreeDoes) {
  // Two 512-page areas side by side in one order-10 block: cma_activate_area frees each pageblock as CMA, and the
  // second merges with the first (same migratetype). Allocating both and giving them back returns to that state.
  build("node:1 core:1 pu:1", {0, 0}, pageblock_nr_pages, 4096);
  ASSERT_EQ((*cma)[0].base_pfn, (*cma)[1].base_pfn + pageblock_nr_pages);  // placed top-down
  ASSERT_EQ((*cma)[1].base_pfn % MAX_ORDER_NR_PAGES, 0u);
  EXPECT_EQ(activated[0].second.nr_free[MAX_PAGE_ORDER][MIGRATE_CMA], 1u);
  EXPECT_EQ(activated[0].second.nr_free[pageblock_order][MIGRATE_CMA], 0u);
  EXPECT_EQ(ms->zone(0).zone_page_state(NR_FREE_CMA_PAGES), long(2 * pageblock_nr_pages));
  Page* a = nullptr;
  Page* b = nullptr;
  measure([&] {
    a = cma_alloc((*cma)[0], *mc, 0, pageblock_nr_pages, 1);
    b = cma_alloc((*cma)[1], *mc, 0, pageblock_nr_pages, 1);
  });
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  give_back_all({{&(*cma)[0], {a, pageblock_nr_pages}}, {&(*cma)[1], {b, pageblock_nr_pages}}});
}

TEST_F(CmaTest, UnalignedCountTakesBuddySectionsAndLeavesTheRestInUse) {
  // 1000 pages of a full area: two bitmap bits; pages 1000..1023 stay in the file, unmigrated.
  const uint64_t N = 2048, count = 1000;
  build("node:1 core:1 pu:1", {0}, N, 4096);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, count, 1, &st); });
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(area.bits_set(), 2u);
  EXPECT_EQ(area.available_count(), N - count);
  const ContigStats& c = st.contig;
  EXPECT_EQ(c.migrate.pages_migrated, count);
  EXPECT_EQ(c.migrate.isolate_calls, ceil_div(count, 32));
  // Freed pages merge into 0-511 (order 9) and 512-999 = 256+128+64+32+8: isolate_freepages_block drops zone->lock
  // at each 32-pfn boundary, so every block of order >= 5 is its own section, and the order-3 tail one more.
  EXPECT_EQ(c.take_sections, 6u);
  EXPECT_EQ(c.headtail_frees, 0u);
  const uint64_t R = ceil_div(count, uint64_t(ms->pcp(0, 0).batch));
  EXPECT_EQ(acq("zone->lock"), 2 * 2 + R + count + 1 + 6);
  EXPECT_EQ(acq("lru_lock"), ceil_div(count, 32) + count);
  EXPECT_EQ(acq("mapping->i_pages"), count);
  uint64_t still_in_area = 0;
  for (uint64_t pgoff = 0; pgoff < N; ++pgoff) still_in_area += area.contains(ms->page_to_pfn(f.xa_load(pgoff)));
  EXPECT_EQ(still_in_area, N - count);
  give_back_all({{&area, {page, count}}});
}

TEST_F(CmaTest, AlignIsHonouredThroughTheBitmapOffset) {
  build("node:1 core:1 pu:1", {0}, 1536, 4608);  // base is 512 (mod 1024)
  Cma& area = (*cma)[0];
  ASSERT_EQ(area.base_pfn % 1024, 512u);
  Page* page = cma_alloc(area, *mc, 0, 512, 1024);
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(ms->page_to_pfn(page) % 1024, 0u);
  EXPECT_EQ(ms->page_to_pfn(page), area.base_pfn + 512);
  // No second 1024-aligned pageblock is left.
  CmaAllocStats st;
  EXPECT_EQ(cma_alloc(area, *mc, 0, 512, 1024, &st), nullptr);
  EXPECT_EQ(st.attempts, 0u);
  EXPECT_EQ(st.last_error, -ENOMEM);
  give_back_all({{&area, {page, 512}}});
}

TEST(CmaBitmap, FindNextZeroAreaOffFollowsLibBitmap) {
  std::vector<uint64_t> map(2, 0);
  map[0] = 0b111;  // bits 0-2 set
  EXPECT_EQ(bitmap_find_next_zero_area_off(map, 128, 0, 4, 0, 0), 3u);
  EXPECT_EQ(bitmap_find_next_zero_area_off(map, 128, 0, 4, 3, 0), 4u);  // aligned to 4
  EXPECT_EQ(bitmap_find_next_zero_area_off(map, 128, 0, 4, 3, 1), 3u);  // offset 1: (3 + 1) is aligned
  map[0] |= uint64_t(1) << 6;
  EXPECT_EQ(bitmap_find_next_zero_area_off(map, 128, 0, 4, 0, 0), 7u);  // 3-5 free but 6 is set
  EXPECT_EQ(bitmap_find_next_zero_area_off(map, 10, 0, 4, 0, 0), 11u);  // does not fit: returns end > size
}

// ---- failures roll back
// -----------------------------------------------------------------------------------------------

TEST_F(CmaTest, PinnedPageFailsTheAttemptWhichRollsBackAndRetriesFurther) {
  const uint64_t N = 2048;
  build("node:1 core:1 pu:1", {0}, N, 4096);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  // Pin a page of the first pageblock (an extra reference, like a get_user_pages pin).
  Page* pinned = nullptr;
  for (uint64_t pgoff = 0; pgoff < N && !pinned; ++pgoff) {
    Page* p = f.xa_load(pgoff);
    if (ms->page_to_pfn(p) == area.base_pfn + 5) pinned = p;
  }
  ASSERT_NE(pinned, nullptr);
  get_page(*pinned);

  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, 512, 1, &st); });
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(ms->page_to_pfn(page), area.base_pfn + 512);  // retried at bitmap_no + mask + 1
  EXPECT_EQ(st.attempts, 2u);
  EXPECT_EQ(st.busy_retries, 1u);
  EXPECT_EQ(st.contig.ebusy, 1u);
  EXPECT_EQ(st.contig.ok, 1u);
  // Attempt 1 migrated the other 31 pages of the first batch, then the pinned page failed folio_migrate_mapping in
  // 5 migrate_pages calls x 10 passes, gave -EBUSY, still ran the test (-EBUSY), and undid everything.
  EXPECT_EQ(st.contig.migrate.eagain, 50u);
  EXPECT_EQ(st.contig.migrate.putbacks, 1u);
  EXPECT_EQ(st.contig.migrate.pages_migrated, 31u + 512u);
  EXPECT_EQ(st.contig.test_locks, 2u);
  EXPECT_EQ(st.contig.isolations, 2u);
  EXPECT_EQ(acq("cma_mutex"), 2u);
  EXPECT_EQ(acq("cma->lock"), 3u);  // claim, roll back, claim
  EXPECT_EQ(acq("pcpu_drain_mutex"), 2u);
  EXPECT_EQ(acq("mapping->i_pages"), 31u + 50u + 512u);
  EXPECT_EQ(acq("lru_lock"), 1u + 31u + 1u + 512u / 32 + 512u);  // isolate, new pages, putback, 2nd attempt
  EXPECT_EQ(acq("zone->lock"), st.contig.zone_lock_expected());
  EXPECT_EQ(acq("pcp->lock"), st.contig.pcp_lock_expected());
  // The pinned page is back in the cache and on the LRU with its pin; the first pageblock is CMA again.
  EXPECT_EQ(f.xa_load(pinned->index), pinned);
  EXPECT_TRUE(PageLRU(*pinned));
  EXPECT_EQ(page_ref_count(*pinned), 2);
  EXPECT_EQ(ms->zone(0).get_pfnblock_migratetype(area.base_pfn), MIGRATE_CMA);
  EXPECT_EQ(area.available_count(), N - 512);
  EXPECT_EQ(area.bits_set(), 1u);
  EXPECT_TRUE(area.test_bit(1));
  put_page_testzero(*pinned);  // unpin
  give_back_all({{&area, {page, 512}}});
}

TEST_F(CmaTest, BitmapPositionsFollowTheAreaGeometry) {
  // cma_alloc_positions: the first aligned position, then one every mask + 1 bits while the bits fit.
  build("node:1 core:1 pu:1", {0}, 4096, 4096, AllocMutex::global, Backing::none, 0);  // one bit per page
  const Cma& a = (*cma)[0];
  EXPECT_EQ(cma_alloc_positions(a, 4096, 1), 1u);     // the whole area: one position
  EXPECT_EQ(cma_alloc_positions(a, 512, 1), 3585u);   // 4096 - 512 + 1
  EXPECT_EQ(cma_alloc_positions(a, 1000, 512), 7u);   // 0, 512, ..., 3072 (3584 + 1000 > 4096)
  EXPECT_EQ(cma_alloc_positions(a, 4096, 4096), 1u);  // the base is 4096-aligned (top of an 8192-page node)
  EXPECT_THROW(cma_alloc_positions(a, 4097, 1), std::invalid_argument);
  EXPECT_THROW(cma_alloc_positions(a, 1, 3), std::invalid_argument);
}

TEST_F(CmaTest, BitmapPositionsOfAnAreaOffTheAlignment) {
  build("node:1 core:1 pu:1", {0}, 1536, 4608);  // base = 512 mod 1024; one bit per pageblock (3 bits)
  const Cma& a = (*cma)[0];
  ASSERT_EQ(a.base_pfn % 1024, 512u);
  // align 1024 pages: mask 1, offset 1: the first aligned position is bit 1 (pfn base + 512), the only one.
  EXPECT_EQ(cma_alloc_positions(a, 512, 1024), 1u);
  EXPECT_EQ(cma_alloc_positions(a, 1024, 1024), 1u);  // bits 1-2: up to the area's end
  EXPECT_EQ(cma_alloc_positions(a, 1536, 1024), 0u);  // the whole area does not start 1024-aligned
  EXPECT_EQ(cma_alloc_positions(a, 1536, 512), 1u);
}

TEST_F(CmaTest, EveryPositionBusyMakesOneAttemptPerPositionThenGivesUp) {
  // One page pinned in each pageblock: every attempt fails with -EBUSY, so cma_alloc tries each of the P positions
  // the geometry gives, rolls each back, and its last search finds none: mutex = P, cma->lock = 2P + 1.
  const uint64_t N = 2048;
  build("node:1 core:1 pu:1", {0}, N, 4096);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  std::vector<Page*> pinned;
  for (uint64_t pgoff = 0; pgoff < N; ++pgoff) {
    Page* p = f.xa_load(pgoff);
    if ((ms->page_to_pfn(p) - area.base_pfn) % pageblock_nr_pages == 7) pinned.push_back(p);
  }
  ASSERT_EQ(pinned.size(), N / pageblock_nr_pages);
  for (Page* p : pinned) get_page(*p);
  const uint64_t P = cma_alloc_positions(area, 512, 512);
  ASSERT_EQ(P, N / pageblock_nr_pages);
  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, 512, 512, &st); });
  EXPECT_EQ(page, nullptr);
  EXPECT_EQ(st.last_error, -EBUSY);
  EXPECT_EQ(st.busy_retries, P);
  EXPECT_EQ(acq("cma_mutex"), P);
  EXPECT_EQ(acq("cma->lock"), 2 * P + 1);
  EXPECT_EQ(area.available_count(), N);
  EXPECT_EQ(area.bits_set(), 0u);
  for (Page* p : pinned) put_page_testzero(*p);
  give_back_all();
}

TEST_F(CmaTest, NoTargetMemoryIsEnomemWithoutRetryAndRollsBack) {
  const uint64_t N = 2048;
  build("node:1 core:1 pu:1", {0}, N, 2048);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  // Take all memory outside the area (unmovable pages never come from CMA), then give 100 pages back.
  std::vector<Page*> hog;
  while (Page* p = ms->alloc_pages(0, 0, 0, GFP_KERNEL)) hog.push_back(p);
  ASSERT_GT(hog.size(), 200u);
  for (int i = 0; i < 100; ++i) {
    ms->free_pages(0, hog.back(), 0);
    hog.pop_back();
  }
  ms->drain_all_pages();
  CmaAllocStats st;
  Page* page = nullptr;
  measure([&] { page = cma_alloc(area, *mc, 0, N, 1, &st); });
  EXPECT_EQ(page, nullptr);
  EXPECT_EQ(st.last_error, -ENOMEM);
  EXPECT_EQ(st.attempts, 1u);  // -ENOMEM is not retried
  EXPECT_EQ(st.contig.enomem, 1u);
  EXPECT_EQ(st.contig.migrate.target_failures, 1u);
  EXPECT_GT(st.contig.migrate.pages_migrated, 0u);
  EXPECT_LE(st.contig.migrate.pages_migrated, 100u);
  EXPECT_EQ(st.contig.test_locks, 0u);  // -ENOMEM skips the test
  EXPECT_EQ(acq("cma->lock"), 2u);      // claim and roll back
  EXPECT_EQ(acq("cma_mutex"), 1u);
  // Rolled back: bitmap clear, nothing isolated, the file whole (pages migrated so far stay migrated).
  EXPECT_EQ(area.available_count(), N);
  EXPECT_EQ(area.bits_set(), 0u);
  EXPECT_TRUE(cma->check(false).empty());
  EXPECT_EQ(ms->zone(0).nr_isolate_pageblock.load(), 0);
  EXPECT_EQ(f.nrpages(), N);
  EXPECT_TRUE(f.check().empty());
  EXPECT_EQ(lru->nr_pages(), N);
  // With the memory back, the same request succeeds.
  for (Page* p : hog) ms->free_pages(0, p, 0);
  page = cma_alloc(area, *mc, 0, N);
  ASSERT_NE(page, nullptr);
  give_back_all({{&area, {page, N}}});
}

TEST_F(CmaTest, FatalSignalIsEintrAndRollsBack) {
  const uint64_t N = 2048;
  build("node:1 core:1 pu:1", {0}, N, 4096);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  int polls = 0;
  CmaAllocStats st;
  Page* page = cma_alloc(area, *mc, 0, N, 1, &st, [&] { return ++polls > 3; });
  EXPECT_EQ(page, nullptr);
  EXPECT_EQ(st.last_error, -EINTR);
  EXPECT_EQ(st.attempts, 1u);
  EXPECT_EQ(area.available_count(), N);
  EXPECT_EQ(ms->zone(0).nr_isolate_pageblock.load(), 0);
  EXPECT_TRUE(f.check().empty());
  give_back_all();
}

TEST_F(CmaTest, RealBackingCopiesTheContents) {
  const uint64_t N = 1024;
  build("node:1 core:1 pu:1", {0}, N, 2048, AllocMutex::per_area, Backing::real);
  Cma& area = (*cma)[0];
  AddressSpace& f = new_file(N);
  ASSERT_EQ(fill(area, f, N), N);
  Page* page = cma_alloc(area, *mc, 0, N);
  ASSERT_NE(page, nullptr);
  for (uint64_t pgoff = 0; pgoff < N; ++pgoff)
    ASSERT_EQ(*static_cast<uint64_t*>(ms->page_address(f.xa_load(pgoff))), 0xc0ffee0000000000ull + pgoff);
  give_back_all({{&area, {page, N}}});
}

// ---- bad input ----------------------------------------------------------------------------------------------------

TEST_F(CmaTest, BadInputIsInvalidArgument) {
  build("node:1 core:1 pu:1", {0}, 2048, 2048);
  Cma& area = (*cma)[0];
  EXPECT_NE(invalid_argument_of([&] { cma_alloc(area, *mc, 0, 0); }).find("count"), std::string::npos);
  EXPECT_NE(invalid_argument_of([&] { cma_alloc(area, *mc, 0, 2049); }).find("count"), std::string::npos);
  EXPECT_NE(invalid_argument_of([&] { cma_alloc(area, *mc, 0, 512, 3); }).find("power of two"), std::string::npos);
  EXPECT_NE(invalid_argument_of([&] { cma_alloc(area, *mc, 0, 512, 0); }).find("align"), std::string::npos);
  EXPECT_NE(invalid_argument_of([&] { alloc_contig_range(*mc, 0, 10, 10, MIGRATE_CMA, GFP_KERNEL); }).find("pfn range"),
            std::string::npos);
  EXPECT_FALSE(cma_release(area, *ms, 0, ms->pfn_to_page(0), 1));  // not the area's pages
  EXPECT_EQ(area.available_count(), 2048u);
}

TEST_F(CmaTest, DeclarationIsValidated) {
  build("node:2 core:1 pu:1", {0}, 2048, 2048);
  EXPECT_NE(invalid_argument_of([&] {
              CmaAreas(*ms, *locks, {{0, 1000}}, AllocMutex::global);
            }).find("multiple"),
            std::string::npos);
  EXPECT_NE(invalid_argument_of([&] {
              CmaAreas(*ms, *locks, {{1, 512}}, AllocMutex::global);
            }).find("no memory"),
            std::string::npos);
  EXPECT_NE(invalid_argument_of([&] {
              CmaAreas(*ms, *locks, {{0, 1 << 20}}, AllocMutex::global);
            }).find("fit"),
            std::string::npos);
  // Declaring over memory already in use (here: the existing area, whose pages a file now holds) is refused.
  AddressSpace& f = new_file(2048);
  fill((*cma)[0], f, 2048);
  EXPECT_NE(invalid_argument_of([&] {
              CmaAreas(*ms, *locks, {{0, 2048}}, AllocMutex::global);
            }).find("in use"),
            std::string::npos);
  EXPECT_NE(invalid_argument_of([] { kAllocMutexNames.parse("percpu", "alloc_mutex"); }).find("alloc_mutex"),
            std::string::npos);
  give_back_all();
}

// ---- the scenario ---------------------------------------------------------------------------------------------------

namespace {

RunResult run_cma(const std::string& topo, std::map<std::string, Value> params) {
  RunOptions opt;
  opt.model = Topology::synthetic(topo);
  return run("cma_concurrent", params, opt);
}

}  // namespace

class CmaScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(CmaScenario, OneAreaPerNodeCountsAreExact) {
  const std::string mode = GetParam();
  const RunResult r = run_cma("node:2 core:1 pu:1",
                              {{"regions", int64_t(2)}, {"pages_per_region", int64_t(4096)}, {"alloc_mutex", mode}});
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact")) << std::get<std::string>(summary_value(r, "zone_lock_formula"));
  EXPECT_EQ(summary_int(r, "failures"), 0);
  EXPECT_EQ(summary_int(r, "pages_allocated"), 2 * 4096);
  const std::string cls = mode == "global" ? "cma_mutex" : "cma->alloc_mutex";
  ASSERT_NE(r.lock_row(cls), nullptr);
  EXPECT_EQ(r.lock_row(cls)->acquisitions, 2u);  // one attempt per worker
  EXPECT_EQ(r.lock_row(mode == "global" ? "cma->alloc_mutex" : "cma_mutex"), nullptr);
  if (mode == "per_area") {
    EXPECT_EQ(r.lock_row(cls)->contentions, 0u);  // one worker per area: nothing to wait for
  }
  EXPECT_EQ(r.lock_row("cma->lock")->acquisitions, 2u);
  EXPECT_EQ(r.lock_row("pcpu_drain_mutex")->acquisitions, 2u);
  int64_t migrated = 0;
  for (const WorkerRow& w : r.workers) {
    EXPECT_EQ(w.slot.model_node, w.slot.worker);  // pinned to its area's node
    EXPECT_EQ(worker_metric(w, "pages"), 4096.0);
    EXPECT_EQ(worker_metric(w, "failed"), 0.0);
    EXPECT_EQ(worker_metric(w, "retries"), 0.0);
    EXPECT_EQ(worker_metric(w, "pages_migrated"),
              worker_metric(w, "filled_pages"));  // every dd page moved, nothing else
    EXPECT_GT(worker_metric(w, "filled_pages"), 4096.0 * 0.9);
    migrated += int64_t(worker_metric(w, "pages_migrated"));
  }
  EXPECT_EQ(summary_int(r, "pages_migrated"), migrated);
  EXPECT_EQ(int64_t(r.lock_row("mapping->i_pages")->acquisitions), migrated);
  EXPECT_EQ(summary_int(r, "zone_lock_acquisitions"), summary_int(r, "zone_lock_expected"));
  // Sorted completion times.
  EXPECT_LE(std::get<double>(summary_value(r, "completion_s_1")), std::get<double>(summary_value(r, "completion_s_2")));
  EXPECT_GE(std::get<double>(summary_value(r, "ratio_slowest_fastest")), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Cma, CmaScenario, ::testing::Values("global", "per_area"));

TEST(CmaScenarioRuns, SharedNodeGlobalMutexPerAreaFilesRealBacking) {
  // Three areas on one node, serialised by cma_mutex: exact too; real backing is copied and checked in finish().
  const RunResult r = run_cma("node:1 core:3 pu:1", {{"regions", int64_t(3)},
                                                     {"pages_per_region", int64_t(2048)},
                                                     {"files", std::string("per_area")},
                                                     {"backing", std::string("real")}});
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact")) << std::get<std::string>(summary_value(r, "zone_lock_formula"));
  EXPECT_TRUE(summary_bool(r, "contents_ok"));
  EXPECT_EQ(summary_int(r, "failures"), 0);
  EXPECT_EQ(r.lock_row("cma_mutex")->acquisitions, 3u);
}

TEST(CmaScenarioRuns, PartialFillAndPartialAlloc) {
  const RunResult r = run_cma("node:2 core:1 pu:1", {{"regions", int64_t(2)},
                                                     {"pages_per_region", int64_t(4096)},
                                                     {"fill", 0.5},
                                                     {"alloc_pages", int64_t(1000)},
                                                     {"alloc_mutex", std::string("per_area")}});
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact")) << std::get<std::string>(summary_value(r, "zone_lock_formula"));
  for (const WorkerRow& w : r.workers) {
    EXPECT_EQ(worker_metric(w, "filled_pages"), 2048.0);
    EXPECT_LE(worker_metric(w, "pages_migrated"), 1000.0);
  }
}

TEST(CmaScenarioRuns, BadParametersAreInvalidArgument) {
  auto err = [](std::map<std::string, Value> p, const std::string& topo = "node:2 core:1 pu:1") {
    return invalid_argument_of([&] { run_cma(topo, p); });
  };
  EXPECT_NE(err({{"align", int64_t(3)}, {"pages_per_region", int64_t(1024)}}).find("align"), std::string::npos);
  EXPECT_NE(err({{"alloc_pages", int64_t(2048)}, {"pages_per_region", int64_t(1024)}}).find("alloc_pages"),
            std::string::npos);
  EXPECT_NE(err({{"regions", int64_t(0)}}).find("regions"), std::string::npos);
  EXPECT_NE(err({{"pages_per_region", int64_t(1000)}}).find("pages_per_region"), std::string::npos);
  EXPECT_NE(err({{"alloc_mutex", std::string("both")}}).find("alloc_mutex"), std::string::npos);
  EXPECT_NE(err({{"regions", int64_t(3)}}, "node:1 core:2 pu:1").find("regions"), std::string::npos);
  // More memory than the host has: refused before anything is allocated, with both figures.
  EXPECT_EQ(err({{"pages_per_region", int64_t(1) << 30}, {"backing", std::string("real")}})
                .rfind("memory: this run needs", 0),
            0u);
}
