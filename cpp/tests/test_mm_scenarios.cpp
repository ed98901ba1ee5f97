// The pcp_refill and page_alloc scenarios through the runner: exact zone->lock counts against closed forms,
// pages_checked_under_lock, memory back to its initial state (finish() raises otherwise), all LLFree patterns.
#include <cmath>

#include "mm_test_util.hpp"

using namespace mmtest;

namespace {

RunResult run_on(const std::string& scenario, const std::string& topo, std::map<std::string, Value> params,
                 uint64_t seed = 1) {
  RunOptions opt;
  opt.model = Topology::synthetic(topo);
  opt.seed = seed;
  return run(scenario, params, opt);
}

}  // namespace

class PcpRefillCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(PcpRefillCheck, Order9TwoThreadsCountsAreExact) {
  const std::string check = GetParam();
  // 4 CPUs on the node: pcp->high = low watermark / 4 < 512, so every order-9 free returns one block.
  const RunResult r =
      run_on("pcp_refill", "node:1 core:4 pu:1",
             {{"threads", int64_t(2)}, {"order", int64_t(9)}, {"count", int64_t(64)}, {"check", check}});
  ASSERT_LT(summary_int(r, "pcp_high"), 512);
  // Closed form: refills = ceil(64 / max(63 >> 9, 2)) = 32, bulk returns = 64, per worker.
  const uint64_t expected = 2 * (32 + 64);
  EXPECT_EQ(summary_int(r, "zone_lock_expected"), int64_t(expected));
  EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), expected);
  EXPECT_EQ(lockstat_acquisitions(r, "pcp->lock"), 2u * 2 * 64);
  EXPECT_EQ(summary_int(r, "refills"), 64);
  EXPECT_EQ(summary_int(r, "pages_pulled"), 128);
  EXPECT_EQ(summary_int(r, "pages_checked_under_lock"), check == "in_lock" ? 512 * 128 : 0);
  EXPECT_EQ(summary_int(r, "pages_checked_after_unlock"), check == "after_unlock" ? 512 * 128 : 0);
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact"));
  EXPECT_TRUE(summary_bool(r, "free_area_same_migratetypes"));
  for (const WorkerRow& w : r.workers) {
    EXPECT_EQ(w.ops, 64u);
    EXPECT_EQ(w.lat_count, 64u);
    EXPECT_EQ(support::worker_metric<uint64_t>(w, "refills"), 32u);
    EXPECT_EQ(support::worker_metric<uint64_t>(w, "bulk_frees"), 64u);
    EXPECT_EQ(support::worker_metric<uint64_t>(w, "pages_checked_under_lock"), check == "in_lock" ? 512u * 64 : 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, PcpRefillCheck, ::testing::Values("in_lock", "after_unlock", "off"));

TEST(PcpRefill, Order0RefillsAreCeilCountOverBatch) {
  const RunResult r = run_on("pcp_refill", "node:1 core:2 pu:1",
                             {{"threads", int64_t(2)}, {"order", int64_t(0)}, {"count", int64_t(5000)}});
  ASSERT_EQ(summary_int(r, "pcp_batch"), 63);
  const PcpExpect e =
      pcp_expect_alloc_then_free(63, int(summary_int(r, "pcp_high")), int(summary_int(r, "pcp_high")), false, 0, 5000);
  EXPECT_EQ(e.refills, 80u);  // ceil(5000 / 63)
  EXPECT_EQ(summary_int(r, "refills"), 2 * 80);
  EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), 2 * (e.refills + e.bulk_frees));
  EXPECT_EQ(summary_int(r, "pages_checked_under_lock"), 2 * 80 * 63);
}

TEST(PcpRefill, V67CountsAreExactToo) {
  for (int64_t order : {0, 3, 9}) {
    const RunResult r = run_on("pcp_refill", "node:1 core:2 pu:1",
                               {{"threads", int64_t(2)},
                                {"order", order},
                                {"count", int64_t(3000 >> order | 64)},
                                {"batch_rule", std::string("v6.7")}});
    EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), uint64_t(summary_int(r, "zone_lock_expected"))) << order;
    EXPECT_TRUE(summary_bool(r, "lock_counts_exact")) << order;
  }
}

TEST(PcpRefill, OrdersOffThePcpTakeZoneLockPerAllocationAndFree) {
  const RunResult r = run_on("pcp_refill", "node:1 core:2 pu:1",
                             {{"threads", int64_t(2)}, {"order", int64_t(5)}, {"count", int64_t(100)}});
  EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), 2u * 2 * 100);
  EXPECT_EQ(lockstat_acquisitions(r, "pcp->lock"), 0u);
  EXPECT_EQ(summary_int(r, "refills"), 0);
}

TEST(PcpRefill, LockStatOffStillRunsAndChecks) {
  RunOptions opt;
  opt.model = Topology::synthetic("node:1 core:2 pu:1");
  opt.lockstat = false;
  const RunResult r = run("pcp_refill", {{"order", int64_t(9)}, {"count", int64_t(16)}}, opt);
  EXPECT_TRUE(r.lockstat.empty());
  EXPECT_EQ(summary_int(r, "refills"), 16);
}

TEST(PcpRefill, ManyModelCpusOnAFewHostCpus) {
  // The seed's 8-core line on this host: 8 model CPUs, oversubscribed, still exact.
  const RunResult r = run_on("pcp_refill", "node:1 core:8 pu:1",
                             {{"threads", int64_t(8)}, {"order", int64_t(9)}, {"count", int64_t(32)}});
  EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), uint64_t(summary_int(r, "zone_lock_expected")));
  EXPECT_EQ(summary_int(r, "pages_checked_under_lock"), 8 * 32 * 512);
}

class PageAllocPattern : public ::testing::TestWithParam<std::string> {};

TEST_P(PageAllocPattern, RunsAndReturnsEveryPage) {
  const std::string pattern = GetParam();
  for (int64_t order : {0, 9}) {
    const RunResult r = run_on("page_alloc", "node:2 core:2 pu:1",
                               {{"threads", int64_t(4)},
                                {"pattern", pattern},
                                {"order", order},
                                {"node_pages", int64_t(1 << 16)},
                                {"iterations", int64_t(2000)},
                                {"share", 0.3}});
    EXPECT_EQ(summary_int(r, "alloc_failed"), 0) << pattern << " order " << order;
    const int64_t blocks = summary_int(r, "blocks_per_worker");
    const int64_t allocs = summary_int(r, "allocations");
    EXPECT_EQ(allocs, pattern == "bulk" ? 4 * blocks : 4 * 2000);
    EXPECT_EQ(std::get<std::string>(summary_value(r, "check")).rfind("ok:", 0), 0u);
    EXPECT_GT(std::get<double>(summary_value(r, "alloc_ns")), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(LLFree, PageAllocPattern, ::testing::Values("bulk", "repeat", "rand"));

TEST(PageAlloc, RepeatIsServedFromThePcp) {
  const RunResult r = run_on("page_alloc", "node:1 core:2 pu:1",
                             {{"threads", int64_t(1)},
                              {"pattern", std::string("repeat")},
                              {"iterations", int64_t(10000)},
                              {"node_pages", int64_t(1 << 16)}});
  // One refill at the start; every later allocation reuses the page just freed.
  EXPECT_EQ(summary_int(r, "refills"), 1);
  EXPECT_EQ(lockstat_acquisitions(r, "zone->lock"), 1u);
}
