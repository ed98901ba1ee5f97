// Watermarks: an allocation below min fails cleanly (nullptr, counted), __GFP_HIGH / __GFP_ATOMIC reach deeper, a
// high-order request needs a free block of that order, and pcp pages do not count as free.
#include <vector>

#include "mm_test_util.hpp"

using namespace mmtest;

class MmWatermark : public MmTest {};

TEST_F(MmWatermark, BelowMinTheAllocationReturnsNullAndNothingBreaks) {
  build("node:1 core:1 pu:1", on_node0(8192));
  const Zone& z = ms->zone(0);
  std::vector<Page*> held;
  while (Page* p = ms->alloc_pages(0, 0, 0, GFP_KERNEL)) held.push_back(p);
  EXPECT_EQ(ms->events(0).alloc_fail.load(), 1u);
  // GFP_KERNEL stops at the min watermark (the retry after drain_all_pages included): free <= min.
  const long min = long(z.min_wmark_pages());
  EXPECT_LE(z.zone_page_state(NR_FREE_PAGES), min);
  EXPECT_GT(z.zone_page_state(NR_FREE_PAGES), min - 64);
  EXPECT_EQ(ms->pcp(0, 0).nr(), 0);  // drained by the retry
  // Atomic allocations may go below it: min - min/2 (ALLOC_HIGH) - a quarter of the rest (ALLOC_HARDER).
  std::vector<Page*> atomic;
  while (Page* p = ms->alloc_pages(0, 0, 0, GFP_ATOMIC)) atomic.push_back(p);
  EXPECT_GT(atomic.size(), 0u);
  const long deep = min - min / 2;
  EXPECT_LE(z.zone_page_state(NR_FREE_PAGES), deep - deep / 4);
  EXPECT_GE(z.zone_page_state(NR_FREE_PAGES), 0);
  const CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.allocated_pages, held.size() + atomic.size());
  for (Page* p : held) ms->free_pages(0, p, 0);
  for (Page* p : atomic) ms->free_pages(0, p, 0);
  ms->drain_all_pages();
  EXPECT_EQ(z.zone_page_state(NR_FREE_PAGES), 8192);
}

TEST_F(MmWatermark, HighOrderNeedsAFreeBlockOfThatOrder) {
  build("node:1 core:1 pu:1", on_node0(4096));
  // Take one order-0 page out of each order-10 block: plenty of free pages, no free order-10 block.
  std::vector<Page*> pins;
  for (uint64_t pfn = 0; pfn < 4096; pfn += 1024) {
    Page* p = ms->pfn_to_page(pfn);
    Zone& z = ms->zone(0);
    LockToken t;
    z.lock_zone(t);
    // Split the block and take its first page, as an allocation of that pfn would.
    Page* head = z.pfn_to_page(pfn);
    ASSERT_TRUE(PageBuddy(*head));
    const unsigned order = buddy_order(*head);
    del_page_from_free_list(head, z, order);
    expand(z, head, 0, order, MIGRATE_MOVABLE);
    z.__mod_zone_freepage_state(-1, MIGRATE_MOVABLE);
    z.unlock_zone(t);
    set_page_refcounted(*p);
    pins.push_back(p);
  }
  EXPECT_EQ(ms->alloc_pages(0, 0, 10, GFP_KERNEL | __GFP_HIGH), nullptr);
  Page* nine = ms->alloc_pages(0, 0, 9, GFP_HIGHUSER_MOVABLE);
  EXPECT_NE(nine, nullptr);
  ms->free_pages(0, nine, 9);
  for (Page* p : pins) ms->free_pages(0, p, 0);
  ms->drain_all_pages();
  EXPECT_EQ(ms->free_area_state(0).nr_free[10][MIGRATE_MOVABLE], 4u);
}

TEST_F(MmWatermark, ThisNodeDoesNotFallBackButDefaultDoes) {
  MemoryConfig c;
  c.node_pages = {1024, 8192};
  build("node:2 core:1 pu:1", c);
  std::vector<Page*> held;
  while (Page* p = ms->alloc_pages(0, 0, 0, GFP_KERNEL | __GFP_THISNODE)) held.push_back(p);
  for (Page* p : held) EXPECT_EQ(page_to_nid(*p), 0);
  Page* remote = ms->alloc_pages(0, 0, 0, GFP_KERNEL);  // node 0 is below its watermark: node 1 serves it
  ASSERT_NE(remote, nullptr);
  EXPECT_EQ(page_to_nid(*remote), 1);
  ms->free_pages(0, remote, 0);
  for (Page* p : held) ms->free_pages(0, p, 0);
}
