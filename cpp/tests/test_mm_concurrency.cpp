// Thread safety where the kernel has it: concurrent allocations and frees of every order on shared model CPUs
// (so pcp trylocks fail and the buddy paths run), frees on another CPU than the allocating one, and
// drain_all_pages from a third party, all at once. Whatever the interleaving, every page ends free and merged.
#include <atomic>
#include <thread>
#include <vector>

#include "alloclab/base/rng.hpp"
#include "mm_test_util.hpp"

using namespace mmtest;

class MmConcurrency : public MmTest, public ::testing::WithParamInterface<BatchRule> {};

TEST_P(MmConcurrency, EveryPageIsAccountedForAfterARandomFreeForAll) {
  MemoryConfig c;
  c.node_pages = {1 << 15, 1 << 15};
  c.batch_rule = GetParam();
  build("node:2 core:2 pu:1", c, "", /*spin_yield=*/true);  // 5 threads: more than most hosts' PUs
  const FreeAreaState initial0 = ms->free_area_state(0), initial1 = ms->free_area_state(1);
  constexpr int kThreads = 4;
  locks->reset_stats(kThreads + 2);  // lock_stat slots: the workers, the drainer, this thread
  locks->attach(kThreads + 1, 0);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> allocated{0}, failed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      locks->attach(w, w);
      Rng rng(7, uint64_t(w));
      std::vector<std::pair<Page*, unsigned>> held;
      for (int i = 0; i < 5000; ++i) {
        if (held.size() < 64 && rng.below(3) != 0) {
          const unsigned order = rng.below(4) == 0 ? unsigned(rng.below(MAX_PAGE_ORDER + 1)) : 0u;
          // Model CPU w % 2: two threads share each CPU (and its pcp), as the kernel never lets two tasks do.
          Page* p = ms->alloc_pages(w % 2, int(rng.below(2)), order, GFP_HIGHUSER_MOVABLE & ~__GFP_DIRECT_RECLAIM);
          if (p) {
            held.emplace_back(p, order);
            allocated.fetch_add(1);
          } else {
            failed.fetch_add(1);
          }
        } else if (!held.empty()) {
          const size_t k = size_t(rng.below(held.size()));
          ms->free_pages(int(rng.below(4)), held[k].first, held[k].second);  // any CPU frees
          held[k] = held.back();
          held.pop_back();
        }
      }
      for (auto& [p, o] : held) ms->free_pages(w, p, o);
      LockDomain::detach();
    });
  }
  std::thread drainer([&] {
    locks->attach(kThreads, 3);
    while (!done.load()) {
      ms->drain_all_pages();
      std::this_thread::yield();
    }
    LockDomain::detach();
  });
  for (auto& t : threads) t.join();
  done.store(true);
  drainer.join();
  EXPECT_GT(allocated.load(), 5000u);
  ms->drain_all_pages();
  const CheckReport r = ms->check();
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.allocated_pages, 0u);
  EXPECT_EQ(ms->free_area_state(0), initial0) << ms->free_area_state(0).to_string();
  EXPECT_EQ(ms->free_area_state(1), initial1) << ms->free_area_state(1).to_string();
  // The model's own zone->lock count and lock_stat agree (every thread was attached).
  EXPECT_EQ(acquisitions("zone->lock"), ms->stats().zone.lock_acquisitions);
}

INSTANTIATE_TEST_SUITE_P(Rules, MmConcurrency, ::testing::Values(BatchRule::v6_2, BatchRule::v6_7));
