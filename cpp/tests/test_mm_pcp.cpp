// Per-CPU lists: batch sizes per order and rule, exact zone->lock and pcp->lock counts in lock_stat, where
// check_pcp_refill runs, bad pages, trylock failure, drains. check() runs after every test (MmTest::TearDown).
#include <vector>

#include "mm_test_util.hpp"

using namespace mmtest;

class MmPcp : public MmTest {};

namespace {
constexpr uint64_t kGiB = uint64_t(1) << 18;  // pages
}

TEST_F(MmPcp, SizingFollowsTheKernelFormulas) {
  EXPECT_EQ(zone_batchsize(kGiB), 63);
  EXPECT_EQ(zone_batchsize(16 * kGiB), 63);
  EXPECT_EQ(zone_batchsize(65536), 15);  // 64 / 4 = 16 -> rounddown_pow_of_two(24) - 1
  EXPECT_EQ(zone_batchsize(4096), 0);    // the MemorySystem then uses max(1, 0)
  build("node:1 core:2 pu:1", on_node0(kGiB));
  const Zone& z = ms->zone(0);
  // min_free_kbytes = int_sqrt(1 GiB in kB * 16) = 4096 kB = 1024 pages; low and high add max(min / 4, managed / 1000).
  EXPECT_EQ(z.min_wmark_pages(), 1024u);
  EXPECT_EQ(z.low_wmark_pages(), 1024u + 262u);
  EXPECT_EQ(z.high_wmark_pages(), 1024u + 2 * 262u);
  const PerCpuPages& pcp = ms->pcp(1, 0);
  EXPECT_EQ(pcp.batch, 63);
  EXPECT_EQ(pcp.high, int(1286 / 2));  // low watermark split over the node's 2 CPUs (at least 4 x batch)
}

// One allocation of each pcp order: exactly one refill of max(63 >> order, 2) blocks, one zone->lock, one pcp->lock.
class MmPcpOrder : public MmTest, public ::testing::WithParamInterface<unsigned> {};

TEST_P(MmPcpOrder, OneRefillPullsTheV62Batch) {
  const unsigned order = GetParam();
  build("node:1 core:1 pu:1", on_node0(kGiB));
  Page* p = ms->alloc_pages(0, 0, order, GFP_HIGHUSER_MOVABLE);
  ASSERT_NE(p, nullptr);
  const int blocks = std::max(63 >> order, 2);
  EXPECT_EQ(ms->pcp(0, 0).nr(), (blocks - 1) << order);
  EXPECT_EQ(ms->zone(0).stats.rmqueue_bulk, 1u);
  EXPECT_EQ(ms->zone(0).stats.rmqueue_bulk_blocks, uint64_t(blocks));
  EXPECT_EQ(acquisitions("zone->lock"), 1u);
  EXPECT_EQ(acquisitions("pcp->lock"), 1u);
  ms->free_pages(0, p, order);
  EXPECT_EQ(acquisitions("pcp->lock"), 2u);
}

INSTANTIATE_TEST_SUITE_P(PcpOrders, MmPcpOrder, ::testing::Values(0u, 1u, 2u, 3u, 9u));

TEST_F(MmPcp, RefillsAreCeilOfCountOverBatch) {
  build("node:1 core:1 pu:1", on_node0(kGiB));
  std::vector<Page*> held;
  for (int i = 0; i < 1000; ++i) held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
  EXPECT_EQ(acquisitions("zone->lock"), 16u);  // ceil(1000 / 63)
  EXPECT_EQ(acquisitions("pcp->lock"), 1000u);
  EXPECT_EQ(ms->pcp(0, 0).nr(), 16 * 63 - 1000);
  for (Page* p : held) ms->free_pages(0, p, 0);
}

TEST_F(MmPcp, V62Order0FreeSideMatchesAHandComputedCase) {
  // pcp->batch 63, pcp->high 252. 300 allocations: 5 refills (315 pages, 15 left over). 300 frees: the list reaches
  // 252 after 237 frees -> free 63 (free_factor 0 -> 1); 63 frees later 252 again -> free 126. 2 bulk returns.
  const PcpExpect e = pcp_expect_alloc_then_free(63, 252, 252, false, 0, 300);
  EXPECT_EQ(e.refills, 5u);
  EXPECT_EQ(e.bulk_frees, 2u);
  build("node:1 core:1 pu:1", on_node0(kGiB));
  PerCpuPages& pcp = ms->pcp(0, 0);
  pcp.high = pcp.high_min = pcp.high_max = 252;
  std::vector<Page*> held;
  for (int i = 0; i < 300; ++i) held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
  for (Page* p : held) ms->free_pages(0, p, 0);
  EXPECT_EQ(acquisitions("zone->lock"), 5u + 2u);
  EXPECT_EQ(pcp.nr(), 15 + 300 - 63 - 126);
}

TEST_F(MmPcp, V62Order9EveryFreeAboveHighIsOneBulkReturn) {
  // high < 512: every order-9 free crosses it and returns one block.
  build("node:1 core:4 pu:1", on_node0(kGiB));
  ASSERT_LT(ms->pcp(0, 0).high, 512);
  std::vector<Page*> held;
  for (int i = 0; i < 10; ++i) held.push_back(ms->alloc_pages(0, 0, 9, GFP_HIGHUSER_MOVABLE));
  EXPECT_EQ(acquisitions("zone->lock"), 5u);
  for (Page* p : held) ms->free_pages(0, p, 9);
  EXPECT_EQ(acquisitions("zone->lock"), 5u + 10u);
  const PcpExpect e = pcp_expect_alloc_then_free(63, ms->pcp(0, 0).high, ms->pcp(0, 0).high, false, 9, 10);
  EXPECT_EQ(e.refills + e.bulk_frees, 15u);
}

// 2.6.35 mm/page_alloc.c: zone_batchsize() capped at 512 KiB, setup_pageset() high = 6 x batch, order 0 only,
// rmqueue_bulk(zone, 0, pcp->batch) with no check inside zone->lock, check_new_page in prep_new_page, and
// free_hot_cold_page returning pcp->batch pages at pcp->high.
class MmPcp2635 : public MmTest {
 protected:
  MemoryConfig v2635(uint64_t pages) {
    MemoryConfig c = on_node0(pages);
    c.batch_rule = BatchRule::v2_6_35;
    c.check = CheckMode::prep_new_page;
    return c;
  }
};

TEST_F(MmPcp2635, V2635SizingIsHalfAMegabyteAndHighSixBatches) {
  EXPECT_EQ(zone_batchsize(kGiB, BatchRule::v2_6_35), 31);       // 128 / 4 = 32 -> rounddown_pow_of_two(48) - 1
  EXPECT_EQ(zone_batchsize(16 * kGiB, BatchRule::v2_6_35), 31);  // the cap
  EXPECT_EQ(zone_batchsize(65536, BatchRule::v2_6_35), 15);      // below 512 MiB both versions agree
  build("node:1 core:2 pu:1", v2635(kGiB));
  EXPECT_EQ(ms->pcp(1, 0).batch, 31);
  EXPECT_EQ(ms->pcp(1, 0).high, 6 * 31);
}

TEST_F(MmPcp2635, V2635Order0AllocAndFreeMatchAHandComputedCase) {
  // batch 31, high 186. 310 allocations: 10 refills of 31, the list empty after. 310 frees: the list reaches 186
  // after 186 frees -> 31 back (155 left), then 186 again every 31 frees: frees 186, 217, 248, 279, 310 -> 5 returns.
  build("node:1 core:1 pu:1", v2635(kGiB));
  std::vector<Page*> held;
  for (int i = 0; i < 310; ++i) held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
  EXPECT_EQ(acquisitions("zone->lock"), 10u);
  EXPECT_EQ(ms->pcp(0, 0).nr(), 0);
  const MemoryStats st = ms->stats();
  EXPECT_EQ(st.pages_checked_at_prep, 310u);        // check_new_page once per page handed out
  EXPECT_EQ(st.zone.pages_checked_under_lock, 0u);  // nothing inside rmqueue_bulk
  EXPECT_EQ(st.pcp.pages_checked_after_unlock, 0u);
  for (Page* p : held) ms->free_pages(0, p, 0);
  EXPECT_EQ(acquisitions("zone->lock"), 10u + 5u);
  EXPECT_EQ(ms->pcp(0, 0).nr(), 186 - 31);
  EXPECT_EQ(ms->stats().zone.bulkfree_pages_checked_under_lock, 0u);  // free_pages_check ran at each free instead
}

TEST_F(MmPcp2635, V2635CachesOrderZeroOnly) {
  build("node:1 core:1 pu:1", v2635(kGiB));
  Page* p = ms->alloc_pages(0, 0, 1, GFP_HIGHUSER_MOVABLE);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ms->zone(0).stats.rmqueue_buddy, 1u);
  EXPECT_EQ(ms->zone(0).stats.rmqueue_bulk, 0u);
  EXPECT_EQ(ms->stats().pages_checked_at_prep, 2u);
  ms->free_pages(0, p, 1);
  EXPECT_EQ(ms->zone(0).stats.free_one_page, 1u);
  EXPECT_EQ(acquisitions("pcp->lock"), 0u);
  EXPECT_EQ(acquisitions("zone->lock"), 2u);
}

TEST_F(MmPcp2635, V2635PrepNewPageCatchesACorruptPageAndAllocatesAgain) {
  MemoryConfig c = v2635(2048);
  c.pcp_batch = 31;
  build("node:1 core:1 pu:1", c);
  ms->zone(0).zone_mem_map[5].mapping = 0xdead000;  // inside the first free order-10 block
  std::vector<Page*> held;
  for (int i = 0; i < 10; ++i) held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
  for (Page* p : held) EXPECT_NE(ms->page_to_pfn(p), 5u);
  EXPECT_EQ(ms->zone(0).nr_bad_pages.load(), 1u);
  EXPECT_EQ(ms->stats().pages_checked_at_prep, 11u);  // ten good pages and the bad one (goto again)
  EXPECT_EQ(ms->stats().zone.pages_checked_under_lock, 0u);
  for (Page* p : held) ms->free_pages(0, p, 0);
  ms.reset();  // the leaked bad page would fail the fixture's check() on purpose
}

TEST_F(MmPcp, V67Order0RefillsDoubleUpToScaleMax) {
  MemoryConfig c = on_node0(kGiB);
  c.batch_rule = BatchRule::v6_7;
  build("node:1 core:2 pu:1", c);
  const Zone& z = ms->zone(0);
  std::vector<uint64_t> sizes;
  std::vector<Page*> held;
  uint64_t before = 0;
  while (sizes.size() < 7) {
    held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
    if (z.stats.rmqueue_bulk > sizes.size()) {
      sizes.push_back(z.stats.rmqueue_bulk_blocks - before);
      before = z.stats.rmqueue_bulk_blocks;
    }
  }
  // batch << alloc_factor, alloc_factor + 1 per refill without a free, up to CONFIG_PCP_BATCH_SCALE_MAX = 5.
  EXPECT_EQ(sizes, (std::vector<uint64_t>{63, 126, 252, 504, 1008, 2016, 2016}));
  EXPECT_EQ(ms->pcp(0, 0).alloc_factor, 5);
  ms->free_pages(0, held.back(), 0);
  held.pop_back();
  EXPECT_EQ(ms->pcp(0, 0).alloc_factor, 2);  // a free halves it
  for (Page* p : held) ms->free_pages(0, p, 0);
}

// Where check_pcp_refill runs, counted exactly: (1 << order) struct pages per block pulled.
class MmCheck : public MmTest, public ::testing::WithParamInterface<CheckMode> {};

TEST_P(MmCheck, PagesCheckedUnderLockCountsEveryStructPage) {
  MemoryConfig c = on_node0(kGiB);
  c.check = GetParam();
  build("node:1 core:1 pu:1", c);
  std::vector<Page*> held;
  for (int i = 0; i < 10; ++i) held.push_back(ms->alloc_pages(0, 0, 9, GFP_HIGHUSER_MOVABLE));
  const MemoryStats st = ms->stats();
  EXPECT_EQ(st.zone.rmqueue_bulk, 5u);
  EXPECT_EQ(st.zone.rmqueue_bulk_blocks, 10u);
  EXPECT_EQ(st.zone.pages_checked_under_lock, GetParam() == CheckMode::in_lock ? 10u * 512 : 0u);
  EXPECT_EQ(st.pcp.pages_checked_after_unlock, GetParam() == CheckMode::after_unlock ? 10u * 512 : 0u);
  for (Page* p : held) ms->free_pages(0, p, 9);
  EXPECT_EQ(ms->stats().zone.bulkfree_pages_checked_under_lock,
            GetParam() == CheckMode::off ? 0u : ms->stats().zone.free_pcppages_blocks);
}

INSTANTIATE_TEST_SUITE_P(Placements, MmCheck,
                         ::testing::Values(CheckMode::in_lock, CheckMode::after_unlock, CheckMode::off));

TEST_P(MmCheck, ACorruptStructPageIsCaughtAndLeakedLikeBadPage) {
  MemoryConfig c = on_node0(2048);
  c.check = GetParam();
  c.pcp_batch = 63;
  build("node:1 core:1 pu:1", c);
  ms->zone(0).zone_mem_map[5].mapping = 0xdead000;  // inside the first free order-10 block
  std::vector<Page*> held;
  for (int i = 0; i < 10; ++i) held.push_back(ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE));
  const bool caught = GetParam() != CheckMode::off;
  bool handed_out = false;
  for (Page* p : held) handed_out |= ms->page_to_pfn(p) == 5;
  EXPECT_EQ(handed_out, !caught);  // v6.4+ without check_pages_enabled hands the dirty page out
  EXPECT_EQ(ms->zone(0).nr_bad_pages.load(), caught ? 1u : 0u);
  for (Page* p : held) ms->free_pages(0, p, 0);
  ms->drain_all_pages();
  const CheckReport r = ms->check();
  EXPECT_FALSE(r.ok);  // either the leaked bad page or the dirty free page is reported
  EXPECT_NE(r.summary().find(caught ? "bad_page" : "mapping"), std::string::npos) << r.summary();
  ms.reset();  // the fixture's check() would fail on purpose
}

TEST_F(MmPcp, FailedTrylockGoesToTheBuddyListsBothWays) {
  build("node:1 core:1 pu:1", on_node0(kGiB));
  PerCpuPages& pcp = ms->pcp(0, 0);
  LockToken t;
  ASSERT_TRUE(pcp.lock.trylock(t));  // as a drain on another CPU would
  Page* p = ms->alloc_pages(0, 0, 0, GFP_HIGHUSER_MOVABLE);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ms->zone(0).stats.rmqueue_buddy, 1u);
  ms->free_pages(0, p, 0);
  EXPECT_EQ(ms->zone(0).stats.free_one_page, 1u);
  EXPECT_EQ(ms->events(0).pcp_trylock_fail.load(), 2u);
  EXPECT_EQ(pcp.nr(), 0);
  pcp.lock.unlock(t);
  EXPECT_EQ(acquisitions("zone->lock"), 2u);
  EXPECT_EQ(acquisitions("pcp->lock"), 1u);  // only our trylock; failed trylocks count nothing
}

TEST_F(MmPcp, DrainAllPagesEmptiesEveryCpu) {
  MemoryConfig c;
  c.node_pages = {kGiB, kGiB};
  build("node:2 core:2 pu:1", c);
  std::vector<std::pair<Page*, int>> held;
  for (int cpu = 0; cpu < 4; ++cpu)
    for (int i = 0; i < 5; ++i) held.emplace_back(ms->alloc_pages(cpu, cpu % 2, 0, GFP_KERNEL), cpu);
  for (auto& [p, cpu] : held) ms->free_pages(cpu, p, 0);
  EXPECT_GT(ms->check().pcp_pages, 0u);
  ms->drain_all_pages();
  const CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.pcp_pages, 0u);
  EXPECT_EQ(r.allocated_pages, 0u);
  for (int cpu = 0; cpu < 4; ++cpu)
    for (int n = 0; n < 2; ++n) EXPECT_EQ(ms->pcp(cpu, n).nr(), 0);
}

TEST_F(MmPcp, BulkAllocationTakesThePcpLockOnce) {
  build("node:1 core:1 pu:1", on_node0(kGiB));
  std::vector<Page*> pages(100);
  EXPECT_EQ(ms->alloc_pages_bulk(0, 0, GFP_KERNEL, 100, pages.data()), 100);
  EXPECT_EQ(acquisitions("pcp->lock"), 1u);
  EXPECT_EQ(acquisitions("zone->lock"), 2u);  // ceil(100 / 63) refills
  for (Page* p : pages) ms->free_pages(0, p, 0);
}
