// The buddy allocator: boot state, expand (split), __free_one_page (merge), round trips at every order through the
// public API, the fallback ladder, pageblock isolation. check() runs after every test (MmTest::TearDown).
#include <algorithm>
#include <numeric>
#include <vector>

#include "alloclab/base/rng.hpp"
#include "mm_test_util.hpp"

using namespace mmtest;

namespace {

uint64_t nr_free(const FreeAreaState& s, unsigned order) {
  uint64_t n = 0;
  for (int mt = 0; mt < MIGRATE_TYPES; ++mt) n += s.nr_free[order][mt];
  return n;
}

// Fisher-Yates with the lab's seeded generator.
template <class T>
void shuffle(std::vector<T>& v, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(rng.below(i))]);
}

}  // namespace

class MmBuddy : public MmTest {};

TEST_F(MmBuddy, BootStateIsMaxOrderBlocksOfMovablePageblocks) {
  build("node:2 core:1 pu:1", on_node0(8 * 1024 + 512, 2));  // ends half-way through an order-10 block
  const Zone& z = ms->zone(0);
  EXPECT_EQ(z.zone_start_pfn, 0u);
  EXPECT_FALSE(ms->zone(1).populated());
  const FreeAreaState s = ms->free_area_state(0);
  EXPECT_EQ(s.nr_free[10][MIGRATE_MOVABLE], 8u);
  EXPECT_EQ(s.nr_free[9][MIGRATE_MOVABLE], 1u);
  for (unsigned o = 0; o < 9; ++o) EXPECT_EQ(nr_free(s, o), 0u) << "order " << o;
  EXPECT_EQ(z.zone_page_state(NR_FREE_PAGES), 8 * 1024 + 512);
  for (uint64_t b = 0; b < z.nr_pageblocks(); ++b)
    EXPECT_EQ(z.get_pfnblock_migratetype(b * pageblock_nr_pages), MIGRATE_MOVABLE);
  const CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.free_pages, 8u * 1024 + 512);
  EXPECT_EQ(r.allocated_pages, 0u);
}

TEST_F(MmBuddy, SecondNodeStartsAtAMaxOrderAlignedPfn) {
  MemoryConfig c;
  c.node_pages = {1536, 2048};
  build("node:2 core:1 pu:1", c);
  EXPECT_EQ(ms->node_start_pfn(1), 2048u);  // 1536 rounded up to MAX_ORDER_NR_PAGES
  Page* p = ms->pfn_to_page(2048 + 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(page_to_nid(*p), 1);
  EXPECT_EQ(ms->page_to_pfn(p), 2048u + 5);
  EXPECT_EQ(ms->pfn_to_page(1536), nullptr);  // the hole between the nodes
}

TEST_F(MmBuddy, ExpandLeavesOneBlockPerLevelAndFreeMergesBack) {
  build("node:1 core:1 pu:1", on_node0(1024));
  const FreeAreaState before = ms->free_area_state(0);
  // Order 4 is not cached on the pcp: straight from the buddy (rmqueue_buddy), split from the order-10 block.
  Page* p = ms->alloc_pages(0, 0, 4, GFP_HIGHUSER_MOVABLE);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ms->page_to_pfn(p), 0u);  // the lower half at every split
  const FreeAreaState mid = ms->free_area_state(0);
  for (unsigned o = 4; o <= 9; ++o) EXPECT_EQ(nr_free(mid, o), 1u) << "order " << o;
  EXPECT_EQ(nr_free(mid, 10), 0u);
  EXPECT_EQ(page_ref_count(*p), 1);
  EXPECT_FALSE(PageBuddy(*p));
  ms->free_pages(0, p, 4);
  EXPECT_EQ(ms->free_area_state(0), before);  // merged all the way up
}

TEST_F(MmBuddy, BuddyCoreRoundTripAtEveryOrderInRandomFreeOrder) {
  build("node:1 core:1 pu:1", on_node0(4096 + 512));
  Zone& z = ms->zone(0);
  const FreeAreaState initial = ms->free_area_state(0);
  for (unsigned order = 0; order <= MAX_PAGE_ORDER; ++order) {
    std::vector<Page*> blocks;
    LockToken t;
    z.lock_zone(t);
    while (Page* p = __rmqueue(z, order, MIGRATE_MOVABLE, 0)) blocks.push_back(p);
    EXPECT_EQ(blocks.size(), order <= 9 ? (4096u + 512u) >> order : 4u) << "order " << order;
    shuffle(blocks, order + 1);
    for (Page* p : blocks) __free_one_page(p, z.page_to_pfn(p), z, order, MIGRATE_MOVABLE, FPI_NONE);
    z.unlock_zone(t);
    // __rmqueue does not account NR_FREE_PAGES (its callers do); __free_one_page does: undo that.
    z.__mod_zone_page_state(NR_FREE_PAGES, -long(blocks.size()) << order);
    EXPECT_EQ(ms->free_area_state(0), initial) << "order " << order;
  }
}

// Allocate every page at one order through the public API, free them in random order, drain: the free areas end as
// they started, and check() holds at each step.
class MmRoundTrip : public MmTest, public ::testing::WithParamInterface<unsigned> {};

TEST_P(MmRoundTrip, AllocateEverythingFreeInRandomOrderEndsInTheInitialState) {
  const unsigned order = GetParam();
  MemoryConfig c = on_node0(4096 + 512, 2);
  c.min_free_kbytes = 0;  // a min watermark of 0 lets the slow path take every page
  c.pcp_batch = 63;       // a zone this small would get batch 1; exercise real refills
  build("node:2 core:2 pu:1", c);
  const FreeAreaState initial = ms->free_area_state(0);
  std::vector<std::pair<Page*, int>> held;  // block, the CPU that allocated it
  for (int cpu = 0;; cpu = (cpu + 1) % ms->nr_cpus()) {
    Page* p = ms->alloc_pages(cpu, 0, order, GFP_HIGHUSER_MOVABLE | __GFP_THISNODE);
    if (!p) break;
    held.emplace_back(p, cpu);
  }
  const uint64_t total = 4096 + 512;
  const uint64_t expect_blocks = order <= 9 ? total >> order : 4;
  EXPECT_EQ(held.size(), expect_blocks);
  CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.allocated_pages, expect_blocks << order);
  EXPECT_EQ(r.pcp_pages, 0u);
  for (auto& [p, cpu] : held) EXPECT_EQ(page_ref_count(*p), 1);
  shuffle(held, 42 + order);
  for (size_t i = 0; i < held.size(); ++i) ms->free_pages(int(i % 4), held[i].first, order);  // any CPU may free
  r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.allocated_pages, 0u);
  ms->drain_all_pages();
  EXPECT_EQ(ms->free_area_state(0), initial) << ms->free_area_state(0).to_string();
  EXPECT_EQ(ms->zone(0).zone_page_state(NR_FREE_PAGES), long(total));
}

INSTANTIATE_TEST_SUITE_P(EveryOrder, MmRoundTrip, ::testing::Range(0u, MAX_PAGE_ORDER + 1));

TEST_F(MmBuddy, UnmovableRequestStealsAWholeMovableBlock) {
  build("node:1 core:1 pu:1", on_node0(8192));
  Page* p = ms->alloc_pages(0, 0, 0, GFP_KERNEL);  // no unmovable pageblock yet
  ASSERT_NE(p, nullptr);
  const MemoryStats st = ms->stats();
  EXPECT_EQ(st.zone.fallbacks, 1u);  // one steal, then the refill is served from the claimed lists
  // The largest block (order 10) is taken over whole: both of its pageblocks become UNMOVABLE.
  EXPECT_EQ(st.zone.pageblocks_claimed, 2u);
  const Zone& z = ms->zone(0);
  const uint64_t pfn = ms->page_to_pfn(p);
  EXPECT_EQ(z.get_pfnblock_migratetype(pfn), MIGRATE_UNMOVABLE);
  EXPECT_EQ(int(p->index), MIGRATE_UNMOVABLE);
  ms->free_pages(0, p, 0);
  ms->drain_all_pages();
  const FreeAreaState s = ms->free_area_state(0);
  EXPECT_EQ(s.nr_free[10][MIGRATE_UNMOVABLE], 1u);  // merged back, on the list of its (new) pageblock type
  EXPECT_EQ(s.nr_free[10][MIGRATE_MOVABLE], 7u);
}

TEST_F(MmBuddy, CompoundPagesPointTailsAtTheHead) {
  build("node:1 core:1 pu:1", on_node0(2048));
  Page* p = ms->alloc_pages(0, 0, 9, GFP_TRANSHUGE);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(PageHead(*p));
  const uint64_t head = ms->page_to_pfn(p);
  for (int i = 1; i < 512; i += 73) {
    EXPECT_TRUE(PageTail(p[i]));
    EXPECT_EQ(p[i].compound_head >> 1, head);
  }
  ms->free_pages(0, p, 9);
  EXPECT_FALSE(PageHead(*p));
  EXPECT_FALSE(PageTail(p[1]));
  EXPECT_EQ(p[1].mapping, 0u);
}

TEST_F(MmBuddy, IsolatedPageblocksKeepTheirFreePagesAwayFromAllocations) {
  build("node:1 core:1 pu:1", on_node0(4096));
  const FreeAreaState initial = ms->free_area_state(0);
  const Zone& z = ms->zone(0);
  // Isolate the second pageblock: its order-10 block (pfns 0-1023) is split so that only pfns 512-1023 go.
  ASSERT_EQ(ms->start_isolate_page_range(512, 1024, MIGRATE_MOVABLE), 0);
  EXPECT_EQ(ms->start_isolate_page_range(512, 1024, MIGRATE_MOVABLE), -EBUSY);  // already isolated
  EXPECT_EQ(z.zone_page_state(NR_FREE_PAGES), 4096 - 512);
  EXPECT_EQ(ms->test_pages_isolated(512, 1024), 0);
  EXPECT_EQ(ms->free_area_state(0).nr_free[9][MIGRATE_ISOLATE], 1u);
  // Allocate everything allocatable: nothing comes from the isolated block.
  std::vector<Page*> held;
  while (Page* p = ms->alloc_pages(0, 0, 9, GFP_HIGHUSER_MOVABLE | __GFP_HIGH | __GFP_ATOMIC)) held.push_back(p);
  for (Page* p : held) {
    const uint64_t pfn = ms->page_to_pfn(p);
    EXPECT_TRUE(pfn < 512 || pfn >= 1024) << pfn;
  }
  // A page freed into an isolated pageblock bypasses the pcp and lands on the ISOLATE list.
  for (Page* p : held) ms->free_pages(0, p, 9);
  ms->drain_all_pages();
  ms->undo_isolate_page_range(512, 1024, MIGRATE_MOVABLE);
  EXPECT_EQ(ms->free_area_state(0), initial) << ms->free_area_state(0).to_string();
  EXPECT_EQ(z.zone_page_state(NR_FREE_PAGES), 4096);
  EXPECT_EQ(z.nr_isolate_pageblock.load(), 0);
}

TEST_F(MmBuddy, FreeIntoAnIsolatedBlockGoesToTheIsolateList) {
  build("node:1 core:1 pu:1", on_node0(2048));
  Page* p = ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE);
  ASSERT_NE(p, nullptr);
  const uint64_t pfn = ms->page_to_pfn(p);
  const uint64_t block = pfn & ~(pageblock_nr_pages - 1);
  ASSERT_EQ(ms->start_isolate_page_range(block, block + pageblock_nr_pages, MIGRATE_MOVABLE), 0);
  EXPECT_NE(ms->test_pages_isolated(block, block + pageblock_nr_pages), 0);  // p is still allocated
  const uint64_t one_page_before = ms->zone(0).stats.free_one_page;
  ms->free_pages(0, p, 0);
  EXPECT_EQ(ms->zone(0).stats.free_one_page, one_page_before + 1);  // not onto the pcp
  EXPECT_EQ(ms->test_pages_isolated(block, block + pageblock_nr_pages), 0);
  ms->undo_isolate_page_range(block, block + pageblock_nr_pages, MIGRATE_MOVABLE);
}
