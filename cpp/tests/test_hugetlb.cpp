// hugetlb pool (mm/hugetlb.c v6.9 model) and the hugetlb_boot scenario: every folio allocated once and enqueued on
// its node's free list with its tails pointing at the head, exact hugetlb_lock, zone->lock and padata lock counts,
// 1 GiB gigantic folios with all their tail struct pages, nworks and
// chunk_size from the kernel formula, numa_aware placement, out-of-memory as a result, memory returned at
// teardown, bad input. Counts and invariants only: nothing here depends on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "alloclab/kernel/padata.hpp"
#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/hugetlb.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/topology/topology.hpp"
#include "support.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

// ---- direct use of Hugetlb ------------------------------------------------------------------------------------

class HugetlbTest : public support::MemoryTest {
 protected:
  void build(const std::string& topo, uint64_t pages_per_node, HugetlbConfig hc = {}) {
    build_machine(topo);
    MemoryConfig cfg = MemoryConfig::uniform(*machine, pages_per_node);
    cfg.batch_rule = BatchRule::v6_7;
    cfg.check = CheckMode::off;
    build_memory(cfg);
    for (int n = 0; n < ms->nr_nodes(); ++n) baseline.push_back(ms->free_area_state(n));
    hugetlb = std::make_unique<Hugetlb>(*ms, *locks, hc);
    locks->attach(0, 0);  // the test thread counts in lock_stat as worker 0 on model CPU 0
  }
  // free_pool + drain: every page free again and the buddy lists as before.
  void expect_memory_returned(hstate& h, unsigned long folios) {
    EXPECT_EQ(hugetlb->free_pool(h, 0), folios);
    ms->drain_all_pages();
    const CheckReport r = ms->check();
    EXPECT_TRUE(r.ok) << r.summary();
    EXPECT_EQ(r.allocated_pages, 0u);
    EXPECT_EQ(r.pcp_pages, 0u);
    for (int n = 0; n < ms->nr_nodes(); ++n)
      EXPECT_EQ(ms->free_area_state(n), baseline[size_t(n)]) << "node " << n << "\n"
                                                             << ms->free_area_state(n).to_string();
    EXPECT_EQ(h.nr_huge_pages, 0u);
  }
  void TearDown() override {
    LockDomain::detach();
    hugetlb.reset();
    ms.reset();
  }
  std::unique_ptr<Hugetlb> hugetlb;
  std::vector<FreeAreaState> baseline;
};

TEST_F(HugetlbTest, BootNodeAllocatesRoundRobinAndEnqueuesEveryFolioOnItsNode) {
  build("node:2 core:1 pu:1", 64 * 512 + 8192);
  hstate& h = hugetlb->default_hstate();
  HugetlbThreadStats st;
  hugetlb->hugetlb_pages_alloc_boot_node(h, 0, 61, 0, st);
  EXPECT_EQ(st.folios, 61u);
  EXPECT_EQ(st.alloc_failed, 0u);
  EXPECT_EQ(st.lists_added, 1u);
  EXPECT_EQ(h.nr_huge_pages, 61u);
  EXPECT_EQ(h.free_huge_pages, 61u);
  // The worker-local cursor starts at first_online_node: nodes 0, 1, 0, 1, ...
  EXPECT_EQ(h.nr_huge_pages_node, (line_vector<unsigned long>{31, 30}));
  const HugetlbCheck c = hugetlb->check_pool(h);
  ASSERT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.folios, 61u);
  EXPECT_EQ(c.tails_checked, 61u * 511);  // prep_compound_page wrote every one of the 511 tails
  // Walk the lists once more by hand: heads of order 9, on their node, tails pointing at them.
  std::set<uint64_t> pfns;
  for (int nid = 0; nid < 2; ++nid) {
    const Zone& z = ms->zone(nid);
    for (uint32_t i = h.hugepage_freelists[size_t(nid)].head(); i != kNoPage; i = z.zone_mem_map[i].lru.next) {
      const Page* f = z.zone_mem_map + i;
      const uint64_t pfn = ms->page_to_pfn(f);
      EXPECT_TRUE(pfns.insert(pfn).second) << "folio " << pfn << " twice";
      EXPECT_EQ(pfn % 512, 0u);
      EXPECT_EQ(page_to_nid(*f), nid);
      EXPECT_TRUE(folio_test_hugetlb(*f));
      EXPECT_EQ(folio_order(f), 9u);
      for (int t = 1; t < 512; ++t) ASSERT_EQ(f[t].compound_head, compound_head_value(pfn)) << "tail " << t;
    }
  }
  EXPECT_EQ(pfns.size(), 61u);
  EXPECT_EQ(acquisitions("hugetlb_lock"), 1u);  // per_worker: one lock cycle for the list
  expect_memory_returned(h, 61);
}

TEST_F(HugetlbTest, PerFolioTakesTheLockOncePerFolio) {
  HugetlbConfig hc;
  hc.lock_mode = HugetlbLockMode::per_folio;
  build("node:2 core:1 pu:1", 32 * 512 + 8192, hc);
  hstate& h = hugetlb->default_hstate();
  HugetlbThreadStats st;
  hugetlb->hugetlb_pages_alloc_boot_node(h, 0, 20, 0, st);
  hugetlb->hugetlb_pages_alloc_boot_node(h, 20, 27, 0, st);
  EXPECT_EQ(acquisitions("hugetlb_lock"), 27u);
  EXPECT_EQ(st.lists_added, 2u);
  // Each call restarts its cursor at node 0: 10 + 4 on node 0.
  EXPECT_EQ(h.nr_huge_pages_node, (line_vector<unsigned long>{14, 13}));
  ASSERT_TRUE(hugetlb->check_pool(h).ok);
  expect_memory_returned(h, 27);
}

TEST_F(HugetlbTest, SharedCursorContinuesAcrossCalls) {
  HugetlbConfig hc;
  hc.next_nid = NextNid::shared;
  build("node:3 core:1 pu:1", 16 * 512 + 8192, hc);
  hstate& h = hugetlb->default_hstate();
  HugetlbThreadStats st;
  hugetlb->hugetlb_pages_alloc_boot_node(h, 0, 4, 0, st);  // nodes 0 1 2 0
  hugetlb->hugetlb_pages_alloc_boot_node(h, 4, 8, 0, st);  // nodes 1 2 0 1 (h->next_nid_to_alloc)
  EXPECT_EQ(h.nr_huge_pages_node, (line_vector<unsigned long>{3, 3, 2}));
  EXPECT_EQ(h.next_nid_to_alloc.load(), 2);
  expect_memory_returned(h, 8);
}

TEST_F(HugetlbTest, OutOfMemoryGivesASmallerPoolNotAnError) {
  build("node:2 core:1 pu:1", 8192);  // 32 MiB per node: far fewer than 100 folios fit above the watermarks
  hstate& h = hugetlb->default_hstate();
  HugetlbThreadStats st;
  hugetlb->hugetlb_pages_alloc_boot_node(h, 0, 100, 0, st);
  EXPECT_LT(st.folios, 100u);
  EXPECT_GT(st.folios, 0u);
  EXPECT_EQ(st.alloc_failed, 1u);  // the loop stops at the first NULL
  EXPECT_EQ(h.nr_huge_pages, st.folios);
  ASSERT_TRUE(hugetlb->check_pool(h).ok);
  expect_memory_returned(h, st.folios);
}

TEST_F(HugetlbTest, HvoMarksEveryFolio) {
  HugetlbConfig hc;
  hc.hvo_ns = 100;
  build("node:1 core:1 pu:1", 8 * 512 + 8192, hc);
  hstate& h = hugetlb->default_hstate();
  HugetlbThreadStats st;
  hugetlb->hugetlb_pages_alloc_boot_node(h, 0, 8, 0, st);
  const Zone& z = ms->zone(0);
  int optimized = 0;
  for (uint32_t i = h.hugepage_freelists[0].head(); i != kNoPage; i = z.zone_mem_map[i].lru.next)
    optimized += folio_test_hpg(z.zone_mem_map[i], HPG_vmemmap_optimized);
  EXPECT_EQ(optimized, 8);
  expect_memory_returned(h, 8);
}

class HugetlbGiganticTest : public HugetlbTest,
                            public ::testing::WithParamInterface<std::tuple<HugetlbLockMode, bool>> {};

TEST_P(HugetlbGiganticTest, BootmemThenGatherInitialisesTailsAndLocksAsTheKernel) {
  const auto [mode, hvo] = GetParam();
  HugetlbConfig hc;
  hc.lock_mode = mode;
  hc.hvo_ns = hvo ? 50 : 0;
  build("node:2 core:1 pu:1", 7 << 18, hc);  // 7 GiB per node: 6 folios and the watermarks
  hstate& h = hugetlb->gigantic_hstate();
  EXPECT_EQ(h.order, 18u);  // 1 GiB
  locks->reset_stats(1);
  EXPECT_EQ(hugetlb->hugetlb_gigantic_pages_alloc_boot(h, 11, 0), 11u);
  EXPECT_EQ(hugetlb->huge_boot_pages(0).size(), 6u);
  EXPECT_EQ(hugetlb->huge_boot_pages(1).size(), 5u);
  for (int nid = 0; nid < 2; ++nid)  // each folio a 1 GiB-aligned range of its node, as memblock gives it
    for (Page* m : hugetlb->huge_boot_pages(nid)) {
      EXPECT_EQ(ms->page_to_pfn(m) % (1u << 18), 0u);
      EXPECT_EQ(page_to_nid(*m), nid);
    }
  locks->reset_stats(1);  // count only the gather
  locks->attach(0, 0);
  HugetlbThreadStats st;
  hugetlb->gather_bootmem_prealloc_node(0, st);
  hugetlb->gather_bootmem_prealloc_node(1, st);
  EXPECT_EQ(st.folios, 11u);
  // 63 tails by hugetlb_folio_init_vmemmap, then the other 262,080 unless HVO remapped them.
  EXPECT_EQ(st.tails_written, 11u * (hvo ? 63 : 262143));
  EXPECT_EQ(acquisitions("hugetlb_lock"), mode == HugetlbLockMode::per_folio ? 11u : 2u);
  EXPECT_EQ(acquisitions("zone->lock"), 0u);  // the gather takes nothing from the buddy allocator
  const HugetlbCheck c = hugetlb->check_pool(h);
  ASSERT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.tails_checked, 11u * (hvo ? 63 : 262143));
  EXPECT_EQ(h.nr_huge_pages_node, (line_vector<unsigned long>{6, 5}));
  EXPECT_TRUE(hugetlb->huge_boot_pages(0).empty());
  expect_memory_returned(h, 11);
}

INSTANTIATE_TEST_SUITE_P(Modes, HugetlbGiganticTest,
                         ::testing::Combine(::testing::Values(HugetlbLockMode::per_worker, HugetlbLockMode::per_folio),
                                            ::testing::Bool()));

TEST(HugetlbParse, NamesAreCheckedWithTheParameterName) {
  EXPECT_EQ(kHugetlbLockModeNames.parse("per_folio", "hugetlb_lock"), HugetlbLockMode::per_folio);
  EXPECT_EQ(kNextNidNames.parse("shared", "next_nid"), NextNid::shared);
  try {
    kHugetlbLockModeNames.parse("per_cpu", "hugetlb_lock");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "hugetlb_lock: invalid value 'per_cpu' (allowed: one of 'per_worker', 'per_folio')");
  }
  EXPECT_THROW(kNextNidNames.parse("global", "next_nid"), std::invalid_argument);
}

// ---- the hugetlb_boot scenario ----------------------------------------------------------------------------------

RunResult boot(const std::string& topo, std::map<std::string, Value> params) {
  RunOptions opt;
  opt.model = Topology::synthetic(topo);
  return run("hugetlb_boot", params, opt);
}

using support::error_of;
using support::provenance_value;
using support::summary_bool;
using support::summary_int;
using support::summary_value;
using support::worker_metric;

struct Set {
  std::string topo;
  int nodes;
  int64_t pages;
  int64_t k;
};

TEST(HugetlbBoot, NworksChunkSizeAndLockCountsFollowTheKernelFormula) {
  const std::vector<Set> sets = {
      {"node:1 core:2 pu:1", 1, 256, 1}, {"node:1 core:2 pu:1", 1, 256, 2}, {"node:2 core:1 pu:1", 2, 200, 2},
      {"node:2 core:1 pu:1", 2, 203, 3}, {"node:2 core:2 pu:1", 2, 10, 2},  {"node:4 core:1 pu:1", 4, 128, 2},
      {"node:2 core:1 pu:1", 2, 3, 2},   {"node:3 core:1 pu:1", 3, 100, 1},
  };
  for (const auto& hl : {"per_worker", "per_folio"})
    for (const Set& s : sets) {
      SCOPED_TRACE(s.topo + " pages " + std::to_string(s.pages) + " k " + std::to_string(s.k) + " " + hl);
      const RunResult r = boot(s.topo, {{"pages", s.pages}, {"multiplier", s.k}, {"hugetlb_lock", std::string(hl)}});
      // The kernel: max_threads = k * nodes, min_chunk = pages / nodes / k, align 1.
      const unsigned long max_threads = unsigned(s.nodes * s.k);
      const unsigned long min_chunk = unsigned(s.pages) / unsigned(s.nodes) / unsigned(s.k);
      const unsigned long nworks = std::min(std::max(unsigned(s.pages) / std::max(min_chunk, 1ul), 1ul), max_threads);
      unsigned long chunk =
          nworks == 1 ? unsigned(s.pages) : std::max({unsigned(s.pages) / (nworks * 4), min_chunk, 1ul});
      const unsigned long chunks = (unsigned(s.pages) + chunk - 1) / chunk;
      EXPECT_EQ(summary_int(r, "max_threads"), int64_t(max_threads));
      EXPECT_EQ(summary_int(r, "min_chunk"), int64_t(min_chunk));
      EXPECT_EQ(summary_int(r, "nworks"), int64_t(nworks));
      EXPECT_EQ(summary_int(r, "chunk_size"), int64_t(chunk));
      EXPECT_EQ(summary_int(r, "chunks"), int64_t(chunks));
      EXPECT_EQ(r.workers.size(), nworks);
      EXPECT_EQ(summary_int(r, "allocated"), s.pages);
      EXPECT_FALSE(summary_bool(r, "exhausted"));
      // Every chunk ran once, and every folio is accounted to the worker that allocated it.
      double folios = 0, ran = 0;
      for (const auto& w : r.workers) {
        folios += worker_metric(w, "folios");
        ran += worker_metric(w, "chunks");
      }
      EXPECT_EQ(folios, double(s.pages));
      EXPECT_EQ(ran, double(chunks));
      // hugetlb_lock: once per prep_and_add_allocated_folios call (= per chunk = per worker when pages divide),
      // or once per folio.
      const int64_t hl_want = std::string(hl) == "per_folio" ? s.pages : int64_t(chunks);
      EXPECT_EQ(summary_int(r, "hugetlb_lock_acquisitions"), hl_want);
      EXPECT_EQ(summary_int(r, "hugetlb_lock_expected"), hl_want);
      if (s.pages % (s.nodes * s.k) == 0 && std::string(hl) == "per_worker") {
        EXPECT_EQ(summary_int(r, "hugetlb_lock_acquisitions"), int64_t(nworks));
      }
      EXPECT_TRUE(summary_bool(r, "lock_counts_exact"));
      // ps.lock: once per work plus once after each chunk; none when nworks == 1.
      EXPECT_EQ(summary_int(r, "padata_lock_acquisitions"), nworks >= 2 ? int64_t(nworks + chunks) : 0);
    }
}

TEST(HugetlbBoot, LocalCursorPutsEachChunksFoliosRoundRobinFromNodeZero) {
  // 203 pages, 2 nodes, k = 3: min_chunk 33, nworks 6, chunk_size 33: chunks of 33 x 6 and 5; each chunk starts
  // at node 0: 17 + 16 per full chunk, 3 + 2 for the last.
  const RunResult r = boot("node:2 core:1 pu:1", {{"pages", int64_t(203)}, {"multiplier", int64_t(3)}});
  EXPECT_EQ(std::get<std::string>(summary_value(r, "per_node_folios")),
            std::to_string(6 * 17 + 3) + "," + std::to_string(6 * 16 + 2));
}

TEST(HugetlbBoot, NumaAwareHelpersLandOnEveryModelNode) {
  const RunResult r = boot("node:4 core:2 pu:1", {{"pages", int64_t(256)}, {"multiplier", int64_t(2)}});
  ASSERT_EQ(r.workers.size(), 8u);
  std::set<int> nodes;
  std::map<int, int> per_node;
  for (const auto& w : r.workers) {
    nodes.insert(w.slot.model_node);
    per_node[w.slot.model_node]++;
  }
  EXPECT_EQ(nodes, (std::set<int>{0, 1, 2, 3}));
  for (const auto& [n, c] : per_node) EXPECT_EQ(c, 2) << "node " << n;
  // The caller on node 0's first PU, then helpers on next_node_in(last_used_nid = 0): 1, 2, 3, 0, 1, 2, 3.
  EXPECT_EQ(r.workers[0].slot.model_pu, 0);
  EXPECT_EQ(std::get<std::string>(summary_value(r, "helper_nodes")), "1,2,3,0,1,2,3");
  for (size_t i = 1; i < r.workers.size(); ++i)
    EXPECT_EQ(double(r.workers[i].slot.model_node), worker_metric(r.workers[i], "work_node"));
  // Two workers of a node are on its two PUs.
  std::set<int> pus;
  for (const auto& w : r.workers) pus.insert(w.slot.model_pu);
  EXPECT_EQ(pus.size(), 8u);
  // Oversubscription is recorded (8 workers on however many host PUs: oversubscribed when the host has fewer).
  if (8 > std::get<int64_t>(provenance_value(r, "host_pus"))) {
    EXPECT_TRUE(std::get<bool>(provenance_value(r, "oversubscribed")));
  }

  const RunResult q =
      boot("node:4 core:2 pu:1", {{"pages", int64_t(256)}, {"multiplier", int64_t(2)}, {"numa_aware", false}});
  for (const auto& w : q.workers) EXPECT_EQ(w.slot.model_node, 0);  // the caller's node
  EXPECT_EQ(summary_int(q, "allocated"), 256);
}

TEST(HugetlbBoot, SerialIsOneWorkerAndOneLockCycle) {
  const RunResult r = boot("node:2 core:2 pu:1", {{"pages", int64_t(100)}, {"parallel", false}});
  EXPECT_EQ(r.workers.size(), 1u);
  EXPECT_EQ(summary_int(r, "nworks"), 1);
  EXPECT_EQ(summary_int(r, "allocated"), 100);
  EXPECT_EQ(summary_int(r, "hugetlb_lock_acquisitions"), 1);
  EXPECT_EQ(summary_int(r, "padata_lock_acquisitions"), 0);
  EXPECT_EQ(std::get<std::string>(summary_value(r, "per_node_folios")), "50,50");
  const RunResult s =
      boot("node:2 core:2 pu:1", {{"pages", int64_t(100)}, {"parallel", false}, {"next_nid", std::string("shared")}});
  EXPECT_EQ(summary_int(s, "allocated"), 100);
}

TEST(HugetlbBoot, SharedCursorStillAllocatesEverything) {
  const RunResult r = boot("node:2 core:2 pu:1",
                           {{"pages", int64_t(400)}, {"multiplier", int64_t(2)}, {"next_nid", std::string("shared")}});
  EXPECT_EQ(summary_int(r, "allocated"), 400);
}

TEST(HugetlbBoot, GiganticGathersOneNodePerWorkerWithTheLockPerFolio) {
  const RunResult r =
      boot("node:4 core:1 pu:1", {{"pages", int64_t(10)}, {"gigantic", true}, {"multiplier", int64_t(5)}});
  EXPECT_EQ(summary_int(r, "nworks"), 4);  // size = nr_node_ids: the multiplier cannot add workers
  EXPECT_EQ(summary_int(r, "chunk_size"), 1);
  EXPECT_EQ(summary_int(r, "allocated"), 10);
  EXPECT_EQ(summary_int(r, "bootmem_folios"), 10);
  EXPECT_EQ(std::get<std::string>(summary_value(r, "hugetlb_lock_mode")), "per_folio");
  EXPECT_EQ(summary_int(r, "hugetlb_lock_acquisitions"), 10);
  EXPECT_EQ(summary_int(r, "tails_written"), 10 * 262143);
  EXPECT_EQ(summary_int(r, "folio_kib"), 1 << 20);
  EXPECT_EQ(summary_int(r, "zone_lock_expected"), 0);
  EXPECT_EQ(std::get<std::string>(summary_value(r, "per_node_folios")), "3,3,2,2");
  const RunResult w = boot("node:4 core:1 pu:1", {{"pages", int64_t(10)},
                                                  {"gigantic", true},
                                                  {"hugetlb_lock", std::string("per_worker")},
                                                  {"hvo_ns", int64_t(10)}});
  EXPECT_EQ(summary_int(w, "hugetlb_lock_acquisitions"), 4);  // one per gather_bootmem_prealloc_node
  EXPECT_EQ(summary_int(w, "tails_written"), 10 * 63);
}

TEST(HugetlbBoot, ZoneLockIsExactPerFolio) {
  // 2 nodes, k = 2, 402 folios: min_chunk 100, 4 works, chunks 100 x 4 and 2. A chunk of 100 gives each node 50
  // folios (25 refills of 2 order-9 blocks); whichever worker also runs the chunk of 2 takes 51 per node (26 each).
  const RunResult r = boot("node:2 core:2 pu:1", {{"pages", int64_t(402)}, {"multiplier", int64_t(2)}});
  EXPECT_EQ(summary_int(r, "zone_lock_acquisitions"), 3 * 2 * 25 + 2 * 26);
  EXPECT_EQ(summary_int(r, "zone_lock_expected"), 3 * 2 * 25 + 2 * 26);
  // Serial: 51 folios on node 0, 50 on node 1.
  const RunResult s = boot("node:2 core:2 pu:1", {{"pages", int64_t(101)}, {"parallel", false}});
  EXPECT_EQ(summary_int(s, "zone_lock_acquisitions"), 26 + 25);
  // Two workers on one model CPU share a pcp: no formula, the count still reported, and the reason said.
  const RunResult q = boot("node:2 core:1 pu:1", {{"pages", int64_t(203)}, {"multiplier", int64_t(3)}});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(summary_value(q, "zone_lock_expected")));
  EXPECT_GT(summary_int(q, "zone_lock_acquisitions"), 0);
  EXPECT_EQ(std::get<std::string>(summary_value(q, "zone_lock_formula")),
            "no formula: two workers share a model CPU and its pcp");
  EXPECT_TRUE(summary_bool(q, "lock_counts_exact"));
}

TEST(HugetlbBoot, RunningOutOfMemoryIsAResult) {
  const RunResult r = boot("node:2 core:1 pu:1", {{"pages", int64_t(200)}, {"node_mib", int64_t(64)}});
  EXPECT_TRUE(summary_bool(r, "exhausted"));
  EXPECT_LT(summary_int(r, "allocated"), 200);
  EXPECT_GT(summary_int(r, "allocated"), 0);
  EXPECT_NE(std::get<std::string>(summary_value(r, "warning")).find("Only allocated"), std::string::npos);
  EXPECT_TRUE(summary_bool(r, "lock_counts_exact"));
}

TEST(HugetlbBoot, MemorylessNodesGetHelpersButNoFolios) {
  // nodes = 2 of 4: N_MEMORY = {0, 1}, N_CPU = all four.
  const RunResult r =
      boot("node:4 core:1 pu:1", {{"pages", int64_t(64)}, {"nodes", int64_t(2)}, {"multiplier", int64_t(2)}});
  EXPECT_EQ(summary_int(r, "nworks"), 4);
  EXPECT_EQ(std::get<std::string>(summary_value(r, "helper_nodes")), "1,2,3");
  EXPECT_EQ(std::get<std::string>(summary_value(r, "per_node_folios")), "32,32,0,0");
}

TEST(HugetlbBoot, ZeroPagesRunsNothing) {
  const RunResult r = boot("node:2 core:1 pu:1", {{"pages", int64_t(0)}});
  EXPECT_EQ(summary_int(r, "nworks"), 0);
  EXPECT_EQ(summary_int(r, "allocated"), 0);
  EXPECT_EQ(summary_int(r, "hugetlb_lock_acquisitions"), 0);
  EXPECT_EQ(r.workers.size(), 1u);
}

TEST(HugetlbBoot, BadInputIsAnInvalidArgumentNamingTheParameter) {
  EXPECT_NE(error_of([] {
              boot("node:1 core:1 pu:1", {{"multiplier", int64_t(0)}});
            }).find("multiplier"),
            std::string::npos);
  EXPECT_NE(error_of([] { boot("node:1 core:1 pu:1", {{"pages", int64_t(-1)}}); }).find("pages"), std::string::npos);
  EXPECT_NE(error_of([] { boot("node:1 core:1 pu:1", {{"nodes", int64_t(2)}}); }).find("nodes"), std::string::npos);
  EXPECT_NE(error_of([] {
              boot("node:1 core:1 pu:1", {{"hugetlb_lock", std::string("global")}});
            }).find("hugetlb_lock"),
            std::string::npos);
  // More memory than the host has: an error before anything is allocated.
  EXPECT_NE(error_of([] {
              boot("node:1 core:1 pu:1", {{"pages", int64_t(1) << 26}});
            }).find("memory"),
            std::string::npos);
}

TEST(HugetlbBoot, WorksPoolCapsHelpersAtThePossibleCpus) {
  const RunResult r =
      boot("node:2 core:1 pu:1", {{"pages", int64_t(100)}, {"multiplier", int64_t(5)}, {"works_pool", true}});
  EXPECT_EQ(summary_int(r, "nworks_wanted"), 10);
  EXPECT_EQ(summary_int(r, "nworks"), 3);  // 2 possible CPUs: 2 helpers + the caller
  EXPECT_EQ(summary_int(r, "allocated"), 100);
}

}  // namespace
