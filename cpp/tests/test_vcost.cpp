// What the mm model charges in virtual time (table costs): a single virtual CPU's operation costs exactly the ops it
// performs, counted here from what the operation did (tree levels walked, bitmap words scanned, struct pages read);
// a line written by one CPU costs another exactly the profile's transfer; concurrent bulk work on one node shares
// its bandwidth; a task that finds a page locked sleeps until unlock_page wakes it (a futex wake-up later); and no
// virtual time depends on where the host's heap put the model's objects.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/lab/runner.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/cma.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/page_cache.hpp"
#include "alloclab/mm/shmem.hpp"
#include "alloclab/mm/vmalloc/free_space.hpp"
#include "alloclab/topology/cost_model.hpp"
#include "test_profiles.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

constexpr vt::vtime kNs = vt::kNanosecond;

// A virtual-clock run's set-up without the runner: the profile's machine as the model, table costs, virtual locks.
// Virtual CPU i runs as profile PU i.
struct VirtualRun {
  VirtualRun(std::shared_ptr<const MachineProfile> p, int cpus)
      : profile(std::move(p)),
        costs(profile, Costs::table, pus(cpus), 1.0),
        scope(&costs),
        machine(profile->topology(), Topology::host()),
        locks(LockConfig{}, false, false, &costs) {
    locks.reset_stats(cpus);
  }
  static std::vector<int> pus(int n) {
    std::vector<int> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = i;
    return v;
  }
  // Runs body(cpu) on `cpus` virtual CPUs; returns each CPU's clock when its body returned.
  std::vector<vt::vtime> run(int cpus, const std::function<void(int)>& body) {
    std::vector<vt::vtime> end(size_t(cpus), 0);
    vt::Simulator sim;
    sim.run(cpus, [&](int cpu) {
      body(cpu);
      end[size_t(cpu)] = sim.now();
    });
    return end;
  }
  vt::vtime op(Op o) const { return costs.op(o); }

  std::shared_ptr<const MachineProfile> profile;
  CostModel costs;
  CostScope scope;
  VirtualClockScope clock;
  Machine machine;
  LockDomain locks;
};

std::shared_ptr<const MachineProfile> one_socket(int cores) {
  return test::test_profile("package:1 numa:1 l3:1 core:" + std::to_string(cores) + " pu:1",
                            cores > 1 ? std::vector<std::string>{"same_llc"} : std::vector<std::string>{});
}

// The clock a body spends in f() on virtual CPU 0 alone.
vt::vtime cost_of(VirtualRun& v, const std::function<void()>& f) {
  vt::vtime spent = 0;
  v.run(1, [&](int) {
    const vt::vtime t0 = vt::Simulator::current()->now();
    f();
    spent = vt::Simulator::current()->now() - t0;
  });
  return spent;
}

TEST(VirtualCosts, ARadixTreeLookupCostsOneStepPerLevelWalked) {
  VirtualRun v(one_socket(1), 1);
  RadixTree tree;
  int item = 0;
  for (uint64_t index : {uint64_t(5), uint64_t(1) << 20}) ASSERT_EQ(tree.insert(index, &item, nullptr), 0);  // untimed
  const unsigned levels = tree.height();
  ASSERT_EQ(levels, 4u);  // 2^20 needs four levels of 64 slots
  const vt::vtime t = cost_of(v, [&] { EXPECT_EQ(tree.lookup(uint64_t(1) << 20), &item); });
  EXPECT_EQ(t, levels * (v.op(Op::tree_step) + v.op(Op::line_access)));
}

TEST(VirtualCosts, AFreeTreeSearchCostsOneStepPerNodeItVisited) {
  using namespace alloclab::vmalloc;
  constexpr unsigned long kPage = vmalloc::PAGE_SIZE;
  VirtualRun v(one_socket(1), 1);
  VmapCpu c;
  VaTree free;
  // Free areas of one page with one-page holes between them, then one large area at the end.
  for (unsigned long i = 0; i < 200; ++i) {
    VmapArea* va = kmem_cache_alloc_va(c);
    va->va_start = VMALLOC_START + 2 * i * kPage;
    va->va_end = va->va_start + kPage;
    ASSERT_TRUE(insert_vmap_area_augment(c, va, nullptr, free));
  }
  VmapArea* big = kmem_cache_alloc_va(c);
  big->va_start = VMALLOC_START + 400 * kPage;
  big->va_end = big->va_start + 64 * kPage;
  ASSERT_TRUE(insert_vmap_area_augment(c, big, nullptr, free));
  c.st = VmallocStats{};
  const vt::vtime t = cost_of(
      v, [&] { EXPECT_EQ(find_vmap_lowest_match(c, &free.root, 16 * kPage, kPage, VMALLOC_START, false), big); });
  ASSERT_GT(c.st.search_steps, 3u);  // the model's own count of the nodes it visited
  EXPECT_EQ(t, c.st.search_steps * (v.op(Op::tree_step) + v.op(Op::line_access)));
}  // the areas go with c's slab (KmemCache)

// augment_tree_propagate_from() writes subtree_max_size up the path: each parent pointer is on a line the level below
// holds, so the stores overlap as touch_each's accesses do (groups of misses_in_flight.core), each level a tree_step.
// CPU 0 builds the tree; CPU 1 grows a leaf so that every level up to the root changes.
TEST(VirtualCosts, AFreeTreePropagationOverlapsItsStoresUpThePath) {
  using namespace alloclab::vmalloc;
  constexpr unsigned long kPage = vmalloc::PAGE_SIZE;
  const auto propagate_on_cpu1 = [](std::optional<double> in_flight) {
    ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
    if (in_flight) test::profile_number(f, "misses_in_flight.core", *in_flight);
    VirtualRun v(std::make_shared<MachineProfile>(f), 2);
    VmapCpu c;
    VaTree free;
    std::vector<VmapArea*> areas;
    size_t levels = 0;
    vt::vtime spent = 0;
    v.run(2, [&](int cpu) {
      vt::Simulator& sim = *vt::Simulator::current();
      if (cpu == 0) {
        for (unsigned long i = 0; i < 200; ++i) {
          VmapArea* va = kmem_cache_alloc_va(c);
          va->va_start = VMALLOC_START + 2 * i * kPage;
          va->va_end = va->va_start + kPage;
          ASSERT_TRUE(insert_vmap_area_augment(c, va, nullptr, free));
          areas.push_back(va);
        }
        return;
      }
      ASSERT_TRUE(sim.block_until(1000000 * kNs));  // long after CPU 0's inserts
      VmapArea* leaf = areas.front();               // the lowest address: a leaf, 7-8 levels down
      for (const RbNode* n = &leaf->rb_node; n; n = rb::rb_parent(n)) ++levels;
      leaf->va_end += 1000 * kPage;  // larger than any subtree: every ancestor's subtree_max_size changes
      const vt::vtime t0 = sim.now();
      augment_tree_propagate_from(leaf);
      spent = sim.now() - t0;
    });
    return std::tuple{spent, levels, v.op(Op::tree_step), v.op(Op::line_access)};
  };
  const vt::vtime transfer = 20 * kNs;  // same_llc in the test profile
  const auto [grouped, levels, step, access] = propagate_on_cpu1(4.0);
  ASSERT_GE(levels, 6u);
  const vt::vtime groups = vt::vtime((levels + 3) / 4);
  EXPECT_EQ(grouped, vt::vtime(levels) * step + groups * (access + transfer));
  EXPECT_EQ(std::get<0>(propagate_on_cpu1(std::nullopt)), vt::vtime(levels) * (step + access + transfer));
}

TEST(VirtualCosts, ABitmapSearchCostsOneOpPerWordAndALineAccessPerLine) {
  VirtualRun v(one_socket(1), 1);
  std::vector<uint64_t> map(64, 0);
  for (size_t w = 0; w < 10; ++w) map[w] = ~uint64_t(0);  // bits 0..639 taken
  const vt::vtime t = cost_of(v, [&] { EXPECT_EQ(bitmap_find_next_zero_area_off(map, 64 * 64, 0, 64, 0, 0), 640u); });
  // Looking for a zero reads words 0..10 (lines 0 and 1); checking [640, 704) for a set bit reads word 10 again.
  EXPECT_EQ(t, 12 * v.op(Op::bitmap_word) + 3 * v.op(Op::line_access));
}

// A MemorySystem on the profile's machine.
std::unique_ptr<MemorySystem> memory(VirtualRun& v, uint64_t pages_per_node, Backing backing = Backing::none) {
  MemoryConfig cfg = MemoryConfig::uniform(v.machine, pages_per_node);
  cfg.backing = backing;
  return std::make_unique<MemorySystem>(v.machine, v.locks, cfg);
}

TEST(VirtualCosts, AListOperationTouchesTheHeadAndTheStructPagesItLinks) {
  VirtualRun v(one_socket(1), 1);
  auto ms = memory(v, 1024);
  Zone& z = ms->zone(0);
  PageList list;
  list_add(list, z.zone_mem_map, 7);  // untimed: on the controlling thread
  const vt::vtime three_lines = v.op(Op::list_op) + 3 * v.op(Op::line_access);
  // The head, the new page and the page it now precedes.
  EXPECT_EQ(cost_of(v, [&] { list_add(list, z.zone_mem_map, 9); }), three_lines);
  // The head, the page and its neighbour; then the head and the page alone.
  EXPECT_EQ(cost_of(v, [&] { list_del(list, z.zone_mem_map, 9); }), three_lines);
  EXPECT_EQ(cost_of(v, [&] { list_del(list, z.zone_mem_map, 7); }), v.op(Op::list_op) + 2 * v.op(Op::line_access));
  EXPECT_TRUE(list.empty());
}

TEST(VirtualCosts, AStructPageRangeStreamsFromItsNodeAtTheCoresBandwidth) {
  VirtualRun v(one_socket(1), 1);
  auto ms = memory(v, 4096);
  Zone& z = ms->zone(0);
  Page* block = z.zone_mem_map + 512;
  const vt::vtime t = cost_of(v, [&] { EXPECT_FALSE(check_new_pages(z, block, 9)); });
  // 512 x 64 bytes at the profile's 12 GB/s core bandwidth (test_profiles.hpp), its 512 reads overlapping.
  const vt::vtime stream = std::llround(512.0 * sizeof(Page) / 12.0 * 1000);
  ASSERT_GT(stream, 512 * v.op(Op::line_access));
  EXPECT_EQ(t, stream);
}

TEST(VirtualCosts, ALineWrittenByOneCpuCostsAnotherExactlyTheTransfer) {
  VirtualRun v(one_socket(2), 2);
  auto ms = memory(v, 1024);
  Page& page = ms->zone(0).zone_mem_map[3];
  vt::vtime read_cost = 0;
  v.run(2, [&](int cpu) {
    vt::Simulator& sim = *vt::Simulator::current();
    if (cpu == 0) {
      get_page(page);  // an atomic RMW: the line is now CPU 0's, modified
      return;
    }
    ASSERT_TRUE(sim.block_until(1000 * kNs));  // long after CPU 0's write
    const vt::vtime t0 = sim.now();
    EXPECT_EQ(page_ref_count(page), 1);
    read_cost = sim.now() - t0;
  });
  EXPECT_EQ(read_cost, v.op(Op::line_access) + v.costs.transfer(0, 1));
  EXPECT_EQ(v.costs.transfer(0, 1), 20 * kNs);  // same_llc in the test profile
  set_page_count(page, 0);
}

// CPU 0 writes five lines; then CPU 1 writes them all at once (touch_each): the accesses overlap in groups of the
// profile's misses_in_flight.core, each group paying one access and one transfer. A profile without the field
// overlaps nothing: five accesses and five transfers, as five touch() calls pay.
TEST(VirtualCosts, IndependentLinesOverlapTheirTransfersUpToTheMissesInFlight) {
  struct alignas(64) Line {
    uint64_t x = 0;
  };
  const auto cost_on_cpu1 = [](std::optional<double> in_flight, size_t n) {
    ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
    if (in_flight) test::profile_number(f, "misses_in_flight.core", *in_flight);
    VirtualRun v(std::make_shared<MachineProfile>(f), 2);
    std::vector<Line> lines(n);
    vt::vtime spent = 0;
    v.run(2, [&](int cpu) {
      vt::Simulator& sim = *vt::Simulator::current();
      if (cpu == 0) return vcost::touch_each(std::span(lines), true);
      ASSERT_TRUE(sim.block_until(1000 * kNs));  // long after CPU 0's writes
      const vt::vtime t0 = sim.now();
      vcost::touch_each(std::span(lines), true);
      spent = sim.now() - t0;
    });
    return std::pair(spent, v.op(Op::line_access));
  };
  const vt::vtime transfer = 20 * kNs;  // same_llc in the test profile
  const auto [grouped, access] = cost_on_cpu1(2.0, 5);
  EXPECT_EQ(grouped, 3 * (access + transfer));     // groups of 2, 2 and 1
  EXPECT_EQ(cost_on_cpu1(2.9, 5).first, grouped);  // a fractional count rounds down
  EXPECT_EQ(cost_on_cpu1(std::nullopt, 5).first, 5 * access + 5 * transfer);
  EXPECT_EQ(cost_on_cpu1(12.0, 1).first, access + transfer);  // one line: what touch() charges
}

// Cache capacity: a line stays in the LLC until the LLC of the CPU that used it last has taken in an LLC's worth of
// lines since (passes and page ops count every line they move; a touch counts a line from memory or another LLC;
// a hit counts nothing and renews the line), then its next access pays the DRAM latency of its memory's node. The
// profile: a 64 KiB LLC (1,024 lines) per socket, DRAM 100 ns local and 170 ns remote.
// With `private_levels`, each CPU has a 1 KiB L1D (16 lines) and a 4 KiB L2 (64 lines), and a line found in L2
// costs 5 ns, in the LLC 20 ns.
struct CapacityRun {
  explicit CapacityRun(bool with_llc, const std::string& topology = "package:2 numa:1 l3:1 core:1 pu:1",
                       bool private_levels = false)
      : v(profile(with_llc, topology, private_levels), 2) {}
  static std::shared_ptr<const MachineProfile> profile(bool with_llc, const std::string& topology,
                                                       bool private_levels) {
    ProfileFields f = test::profile_fields(topology, {topology.starts_with("package:2") ? "remote" : "same_llc"});
    if (with_llc) {
      test::profile_number(f, "cache_mib.llc", 1.0 / 16);
      test::profile_number(f, "dram_ns.local", 100);
      if (topology.starts_with("package:2")) test::profile_number(f, "dram_ns.remote", 170);
    }
    if (private_levels)
      for (const auto& [key, value] :
           {std::pair{"cache_kib.l1d", 1.0}, {"cache_kib.l2", 4.0}, {"cache_ns.l2", 5.0}, {"cache_ns.llc", 20.0}})
        test::profile_number(f, key, value);
    return std::make_shared<MachineProfile>(f);
  }
  // What the accesses cost when run as `steps`: each step is a write of `line` (its cost recorded) or a pass of
  // `lines` lines (not recorded), by CPU `by` (CPU 1 starts after CPU 0 has finished).
  struct Step {
    int by;
    const void* line;
    uint64_t lines;
  };
  std::vector<vt::vtime> costs(const std::vector<Step>& steps) {
    std::vector<vt::vtime> out;
    v.run(2, [&](int cpu) {
      vt::Simulator& sim = *vt::Simulator::current();
      if (cpu == 1) {
        ASSERT_TRUE(sim.block_until(1000 * vt::kMillisecond));
      }
      for (const Step& s : steps) {
        if (s.by != cpu) continue;
        if (s.line) {
          const vt::vtime t0 = sim.now();
          vcost::touch(s.line, true);
          out.push_back(sim.now() - t0);
        } else {
          v.costs.pass(s.lines, s.lines * 64, v.costs.node_of(cpu), Stream::load);
        }
      }
    });
    return out;
  }
  VirtualRun v;
};

TEST(VirtualCosts, ALineLeavesTheLlcAfterAnLlcWorthOfNewLines) {
  struct alignas(4096) Line {  // a page each: no miss of one is in the streamer's page of the other's
    uint64_t x = 0;
  };
  Line a, b;
  for (const bool with_llc : {true, false}) {
    CapacityRun r(with_llc);
    const vt::vtime hit = r.v.op(Op::line_access), dram = 100 * kNs;
    const auto t = r.costs({{0, &a, 0},          // first touch in the run: taken as cached
                            {0, nullptr, 1023},  // 1 + 1,023 lines taken in: a is the oldest, still there
                            {0, &a, 0},          // a hit, which renews a
                            {0, nullptr, 1024},  // 1,024 more: a is gone
                            {0, &a, 0},          // back from DRAM (not node memory: the CPU's own node)
                            {0, &a, 0},          // and cached again
                            {0, &b, 0},          // b enters: one line taken in
                            {0, nullptr, 1022},
                            {0, &a, 0},
                            {0, nullptr, 2},  // a's hit took in no line
                            {0, &b, 0}});     // b: 1,024 since
    // Without cache_mib.llc there is no capacity: every line stays.
    const std::vector<vt::vtime> expected =
        with_llc ? std::vector<vt::vtime>{hit, hit, hit + dram, hit, hit, hit, hit + dram}
                 : std::vector<vt::vtime>(7, hit);
    EXPECT_EQ(t, expected);
  }
}

// The private levels count the lines they take in as the LLC does (a hit in one takes in nothing there and renews the
// line), per CPU: a line the CPU used last costs line_access in its L1D, cache_ns.l2 once an L1D's worth has come in
// since, cache_ns.llc once an L2's worth has, and the DRAM latency once an LLC's worth has. Another CPU's access to it
// is a transfer, as without them.
TEST(VirtualCosts, ALineThatLeftTheL1dOrTheL2CostsTheLevelThatHasIt) {
  struct alignas(4096) Line {
    uint64_t x = 0;
  };
  Line a;
  CapacityRun r(true, "package:1 numa:1 l3:1 core:2 pu:1", true);
  const vt::vtime hit = r.v.op(Op::line_access), l2 = 5 * kNs, llc = 20 * kNs, dram = 100 * kNs;
  const auto t = r.costs({{0, &a, 0},
                          {0, nullptr, 15},  // 1 + 15 lines into L1D: a is the oldest, still there
                          {0, &a, 0},
                          {0, nullptr, 16},  // an L1D's worth: a has left it
                          {0, &a, 0},        // from L2, back into L1D (and no new line in L2)
                          {0, &a, 0},
                          {0, nullptr, 64},  // an L2's worth
                          {0, &a, 0},        // from the LLC
                          {0, nullptr, 1024},
                          {0, &a, 0},  // from DRAM
                          {0, nullptr, 16},
                          {1, &a, 0}});  // CPU 1: the transfer from CPU 0's cache, not a level of its own
  EXPECT_EQ(t, (std::vector<vt::vtime>{hit, hit, l2, hit, llc, hit + dram, hit + r.v.costs.transfer(0, 1)}));
}

// The L2 streamer: a CPU's miss in the same 4 KiB page of node memory as its previous miss (either way) was
// prefetched and costs its 64 bytes at the core's load bandwidth (the test profile's 12 GB/s: it has no core_load); a
// miss in another page pays the latency, and so does every miss of a heap object, whose 4 KiB page is the host heap's
// accident (virtual times must not depend on it).
TEST(VirtualCosts, AMissInThePageOfTheCpusLastMissWasPrefetched) {
  CapacityRun r(true);
  NodeMemory mem(r.v.machine, 0, 2 * 4096);  // set-up: page-aligned node memory, two pages
  const auto p = [&](int i) { return static_cast<const char*>(mem.data()) + 64 * i; };
  const auto q = [&](int i) { return p(64 + i); };
  struct alignas(4096) HeapPage {
    std::array<char, 4096> bytes{};
  };
  const auto heap = std::make_unique<HeapPage>();
  const auto h = [&](int i) { return heap->bytes.data() + 64 * i; };
  const vt::vtime hit = r.v.op(Op::line_access), dram = 100 * kNs, streamed = std::llround(64.0 / 12 * 1000);
  const auto t = r.costs({{0, p(0), 0},
                          {0, p(1), 0},
                          {0, p(9), 0},
                          {0, q(0), 0},
                          {0, h(0), 0},
                          {0, h(1), 0},
                          {0, nullptr, 1024},  // all six evicted
                          {0, p(0), 0},
                          {0, p(9), 0},
                          {0, p(1), 0},  // descending: the backward stream
                          {0, q(0), 0},
                          {0, h(0), 0},
                          {0, h(1), 0},    // the heap page's next line: not streamed
                          {0, p(1), 0}});  // cached again
  EXPECT_EQ(t, (std::vector<vt::vtime>{hit, hit, hit, hit, hit, hit, hit + dram, hit + streamed, hit + streamed,
                                       hit + dram, hit + dram, hit + dram, hit}));
}

TEST(VirtualCosts, AnEvictedLineComesBackFromItsNodesMemory) {
  CapacityRun r(true);
  NodeMemory far(r.v.machine, 1, 4096), near(r.v.machine, 0, 4096);  // set-up: the cost model learns their nodes
  const vt::vtime hit = r.v.op(Op::line_access);
  const auto t = r.costs({{0, far.data(), 0},
                          {0, near.data(), 0},
                          {0, nullptr, 1024},
                          {0, far.data(), 0},
                          {0, near.data(), 0}});  // fmt: skip
  EXPECT_EQ(t, (std::vector<vt::vtime>{hit, hit, hit + 170 * kNs, hit + 100 * kNs}));
}

TEST(VirtualCosts, CpusOfOneLlcEvictEachOthersLinesAndOtherLlcsDoNot) {
  struct alignas(64) Line {
    uint64_t x = 0;
  };
  Line a;
  // One LLC: CPU 1's pass evicts the line CPU 0 used.
  CapacityRun shared(true, "package:1 numa:1 l3:1 core:2 pu:1");
  const vt::vtime hit = shared.v.op(Op::line_access);
  EXPECT_EQ(shared.costs({{0, &a, 0}, {1, nullptr, 1024}, {1, &a, 0}}), (std::vector<vt::vtime>{hit, hit + 100 * kNs}));
  // Two sockets: CPU 1's pass fills its own LLC; the line is still in CPU 0's, and comes over as a transfer.
  CapacityRun apart(true);
  EXPECT_EQ(apart.costs({{0, &a, 0}, {1, nullptr, 1024}, {1, &a, 0}}),
            (std::vector<vt::vtime>{hit, hit + apart.v.costs.transfer(0, 1)}));
}

// Two CPUs stream a 2 MiB block's struct pages at once: on one node they share its bandwidth, on two nodes they do
// not. The node's 16 GB/s is less than two cores' 12 GB/s.
TEST(VirtualCosts, ConcurrentBulkWorkOnOneNodeSharesItsBandwidth) {
  auto profile = [](const std::string& topology, const std::vector<std::string>& classes) {
    ProfileFields f = test::profile_fields(topology, classes);
    test::profile_number(f, "bandwidth_gbs.node", 16);
    return std::make_shared<MachineProfile>(f);
  };
  const auto stream = [](VirtualRun& v, int cpus, const std::vector<int>& node_of_cpu) {
    auto ms = memory(v, 4096);
    return v.run(cpus, [&](int cpu) {
      Zone& z = ms->zone(node_of_cpu[size_t(cpu)]);
      EXPECT_FALSE(check_new_pages(z, z.zone_mem_map + 512 + 1024 * cpu, 9));  // inside a free block, not its head
    });
  };
  VirtualRun alone(profile("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"}), 1);
  const vt::vtime one = stream(alone, 1, {0})[0];
  VirtualRun shared(profile("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"}), 2);
  const std::vector<vt::vtime> both = stream(shared, 2, {0, 0});
  VirtualRun apart(profile("package:2 numa:1 l3:1 core:1 pu:1", {"remote"}), 2);
  const std::vector<vt::vtime> two_nodes = stream(apart, 2, {0, 1});
  EXPECT_EQ(both[0], one);  // the first found the node idle
  EXPECT_GT(both[1], one);  // the second got half the node: 8 GB/s instead of its core's 12
  EXPECT_EQ(both[1] - one,
            vt::vtime(std::llround(512.0 * 64 / 8 * 1000)) - vt::vtime(std::llround(512.0 * 64 / 12 * 1000)));
  EXPECT_EQ(two_nodes[0], one);
  EXPECT_EQ(two_nodes[1], one);
}

// A pass that checks, then writes struct pages updates each line in place (read, then written back: 128 bytes a page)
// and streams at the profile's update bandwidth; a pass that writes them unread (read for ownership, then written
// back: 128 bytes a page) at its store bandwidth; a read pass (64 bytes a page) at its load bandwidth; a profile
// without those figures streams each at the copy figures. Two writers on one node share its update bandwidth. The
// line accesses overlap the stream: a pass costs its stream, or its n x line_access where the stream is faster, never
// the sum.
TEST(VirtualCosts, AStructPagePassStreamsAtItsPatternsBandwidth) {
  auto profile = [](bool own, double load_gbs) {
    ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
    if (own) {  // the copy figures: 12 GB/s a core, 100 a node
      test::profile_number(f, "bandwidth_gbs.core_update", 20);
      test::profile_number(f, "bandwidth_gbs.node_update", 30);
      test::profile_number(f, "bandwidth_gbs.core_load", load_gbs);
      test::profile_number(f, "bandwidth_gbs.node_load", 90);
      test::profile_number(f, "bandwidth_gbs.core_store", 10);
      test::profile_number(f, "bandwidth_gbs.node_store", 80);
    }
    return std::make_shared<MachineProfile>(f);
  };
  // Each figure from a fresh run: a run's node bandwidth stays shared until its bulk work ends.
  vt::vtime lines = 0;  // 512 x line_access
  const auto pass = [&](bool own, int cpus, Stream s, double load_gbs = 16) {
    VirtualRun v(profile(own, load_gbs), cpus);
    lines = 512 * v.op(Op::line_access);
    auto ms = memory(v, 4096);
    return v.run(cpus, [&](int cpu) { memmap_access(ms->zone(0).zone_mem_map + 1024 * cpu, 512, s); });
  };
  const auto at = [](double bytes, double gbs) { return std::vector{vt::vtime(std::llround(bytes / gbs * 1000))}; };
  EXPECT_EQ(pass(true, 1, Stream::update), at(512 * 128, 20));
  EXPECT_EQ(pass(true, 1, Stream::store), at(512 * 128, 10));
  EXPECT_EQ(pass(true, 1, Stream::load), at(512 * 64, 16));
  ASSERT_LT(lines, at(512 * 64, 16)[0]);  // so the stream is what those cost
  EXPECT_EQ(pass(false, 1, Stream::update), at(512 * 128, 12));
  EXPECT_EQ(pass(false, 1, Stream::store), at(512 * 128, 12));
  EXPECT_EQ(pass(false, 1, Stream::load), at(512 * 64, 12));
  const std::vector<vt::vtime> both = pass(true, 2, Stream::update);
  EXPECT_EQ(both[0], at(512 * 128, 20)[0]);  // the first found the node idle
  EXPECT_EQ(both[1], at(512 * 128, 15)[0]);  // the second got half the node's 30 GB/s, less than its core's 20
  const std::vector<vt::vtime> fast = pass(true, 1, Stream::load, 1000);  // a 32 KiB stream of 33 ns
  ASSERT_GT(lines, at(512 * 64, 1000)[0]);
  EXPECT_EQ(fast, std::vector{lines});  // the line accesses are what it costs
}

// A page op costs its bytes (2 x 4 KiB) at the core's bandwidth, but never less than the profile's page_ns: the
// latency-bound op on a cold page. Concurrent ops on one node share its bandwidth, and without page_ns the
// bandwidth alone is charged.
TEST(VirtualCosts, APageOpCostsItsPageNsOrItsBandwidthWhicheverIsLonger) {
  auto profile = [](std::optional<double> copy_ns, std::optional<double> clear_ns) {
    ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
    test::profile_number(f, "bandwidth_gbs.node", 16);  // two cores at 12 GB/s would need 24
    if (copy_ns) test::profile_number(f, "page_ns.copy", *copy_ns);
    if (clear_ns) test::profile_number(f, "page_ns.clear", *clear_ns);
    return std::make_shared<MachineProfile>(f);
  };
  const auto ops = [](VirtualRun& v, int cpus, PageOp op, uint64_t n) {
    return v.run(cpus, [&](int) { vcost::pages(op, n, {0}); });
  };
  const auto stream = [](uint64_t n) { return vt::vtime(std::llround(double(n) * 2 * 4096 / 12 * 1000)); };  // 12 GB/s
  const vt::vtime stream_one = stream(1);                                          // 682.667 ns
  const vt::vtime stream_shared = vt::vtime(std::llround(2.0 * 4096 / 8 * 1000));  // 1024 ns at 16 / 2 GB/s
  // Each figure from a fresh run: a run's node bandwidth stays shared until its bulk work ends.
  const auto alone = [&](std::optional<double> copy_ns, std::optional<double> clear_ns, PageOp op, uint64_t n) {
    VirtualRun v(profile(copy_ns, clear_ns), 1);
    return ops(v, 1, op, n)[0];
  };
  EXPECT_EQ(alone(900, 300, PageOp::copy, 4), 4 * 900 * kNs);  // copy slower than the stream
  EXPECT_EQ(alone(900, 300, PageOp::clear, 4), stream(4));     // clear faster: the bandwidth sets the time
  EXPECT_EQ(alone(std::nullopt, std::nullopt, PageOp::copy, 1), stream_one);
  EXPECT_EQ(alone(std::nullopt, std::nullopt, PageOp::clear, 1), stream_one);
  VirtualRun v(profile(900, 300), 2);  // two copiers at once: each gets half the node, 1024 ns > 900 ns a page
  const std::vector<vt::vtime> both = ops(v, 2, PageOp::copy, 1);
  EXPECT_EQ(both[0], 900 * kNs);  // the first found the node idle
  EXPECT_EQ(both[1], stream_shared);
}

// A clear writes lines it never reads: a store stream, at the profile's store figures. Pages that follow one another
// pay page_ns once: a run of contiguous frames pays it for its first page only, and a run that starts where the same
// CPU's previous page op ended (same node, the next frame; for a copy, the next frame read as well as written) pays
// none; pages whose frames are not given pay it each.
TEST(VirtualCosts, PagesThatFollowOneAnotherPayTheColdPageLatencyOnce) {
  ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
  test::profile_number(f, "page_ns.clear", 900);  // above a page's stream, so what the floor charges shows
  test::profile_number(f, "page_ns.copy", 1500);
  test::profile_number(f, "bandwidth_gbs.core_store", 16);
  test::profile_number(f, "bandwidth_gbs.node_store", 64);
  const auto profile = std::make_shared<MachineProfile>(f);
  const vt::vtime stream = vt::vtime(std::llround(2 * 4096 / 16.0 * 1000));       // 512 ns a page at 16 GB/s
  const vt::vtime copy_stream = vt::vtime(std::llround(2 * 4096 / 12.0 * 1000));  // at the copy figure, 12 GB/s
  const auto clears = [&](std::vector<std::pair<uint64_t, uint64_t>> runs) {      // (first frame, pages) each
    VirtualRun v(profile, 1);
    return v.run(1, [&](int) {
      for (const auto& [pfn, n] : runs) vcost::pages(PageOp::clear, n, PageFrame{0, pfn});
    })[0];
  };
  EXPECT_EQ(clears({{kNoPfn, 4}}), 4 * 900 * kNs);  // scattered: each page cold
  EXPECT_EQ(clears({{8, 4}}), 4 * stream);          // contiguous: one cold page (900 ns), below the run's stream
  EXPECT_EQ(clears({{8, 1}, {9, 1}, {10, 2}}), 900 * kNs + 3 * stream);        // each run follows the last
  EXPECT_EQ(clears({{8, 1}, {10, 1}, {9, 1}}), 3 * 900 * kNs);                 // a gap, then a step back
  const auto copies = [&](std::vector<std::pair<uint64_t, uint64_t>> pages) {  // (frame written, frame read) each
    VirtualRun v(profile, 1);
    return v.run(1, [&](int) {
      for (const auto& [to, from] : pages) vcost::pages(PageOp::copy, 1, PageFrame{0, to}, PageFrame{0, from});
    })[0];
  };
  EXPECT_EQ(copies({{8, 100}, {9, 101}}), 1500 * kNs + copy_stream);  // both sides follow
  EXPECT_EQ(copies({{8, 100}, {9, 200}}), 2 * 1500 * kNs);            // the read side jumps
  // Another CPU's page op is not this CPU's predecessor.
  VirtualRun v(profile, 2);
  const std::vector<vt::vtime> two = v.run(2, [&](int cpu) { vcost::pages(PageOp::clear, 1, PageFrame{0, 8u + cpu}); });
  EXPECT_EQ(two, (std::vector<vt::vtime>{900 * kNs, 900 * kNs}));
}

// With page_ns.<op>_ascending in the profile, a page that follows the one before pays that figure where it is above
// the page's stream, and the stream where it is below; a page that follows nothing still pays page_ns.<op>.
TEST(VirtualCosts, PagesThatFollowOneAnotherPayTheAscendingFigure) {
  ProfileFields f = test::profile_fields("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
  test::profile_number(f, "page_ns.clear", 900);
  test::profile_number(f, "page_ns.clear_ascending", 700);  // above the 512 ns store stream of a page
  test::profile_number(f, "page_ns.copy", 1500);
  test::profile_number(f, "page_ns.copy_ascending", 300);  // below the 683 ns copy stream of a page
  test::profile_number(f, "bandwidth_gbs.core_store", 16);
  test::profile_number(f, "bandwidth_gbs.node_store", 64);
  VirtualRun v(std::make_shared<MachineProfile>(f), 1);
  const vt::vtime copy_stream = vt::vtime(std::llround(2 * 4096 / 12.0 * 1000));
  vt::vtime clears = 0, copies = 0;
  v.run(1, [&](int) {
    vcost::pages(PageOp::clear, 4, PageFrame{0, 8});   // one cold page, three that follow it
    vcost::pages(PageOp::clear, 1, PageFrame{0, 12});  // follows the run
    vcost::pages(PageOp::clear, 1, PageFrame{0, 3});   // follows nothing
    clears = vt::Simulator::current()->now();
    vcost::pages(PageOp::copy, 1, PageFrame{0, 20}, PageFrame{0, 100});
    vcost::pages(PageOp::copy, 1, PageFrame{0, 21}, PageFrame{0, 101});
    copies = vt::Simulator::current()->now() - clears;
  });
  EXPECT_EQ(clears, 900 * kNs + 3 * 700 * kNs + 700 * kNs + 900 * kNs);
  EXPECT_EQ(copies, 1500 * kNs + copy_stream);
}

// CPU 0 faults page 0 in and spends 100 us clearing it while it holds the page locked; CPU 1 reads the same page
// 50 us in, finds it in the page cache, locked, and sleeps until CPU 0's unlock_page wakes it one futex wake-up later
// (it would notice within a PAUSE if it polled).
TEST(VirtualCosts, LockPageSleepsUntilUnlockPageWakesIt) {
  VirtualRun v(one_socket(2), 2);
  auto ms = memory(v, 8192);
  ShmemConfig cfg;
  cfg.variant = ShmemVariant::lock_twice;
  cfg.nr_pages = 16;
  cfg.clear_ns = 100'000;
  ShmemFile file(*ms, v.locks, cfg);
  ShmemTask& t0 = file.add_task(0, 0);
  ShmemTask& t1 = file.add_task(1, 0);
  const std::vector<vt::vtime> end = v.run(2, [&](int cpu) {
    if (cpu == 1) {
      ASSERT_TRUE(vt::Simulator::current()->block_until(50'000 * kNs));
    }
    file.touch(cpu == 0 ? t0 : t1, 0);
  });
  EXPECT_EQ(t0.st.new_pages, 1u);
  EXPECT_EQ(t1.st.page_lock_waits, 1u);
  EXPECT_EQ(t1.st.pte_races, 1u);
  const vt::vtime wakeup = v.costs.wakeup();
  EXPECT_EQ(wakeup, 5000 * kNs);
  // CPU 0 unlocks just before its fault returns; CPU 1 runs a wake-up later and then finishes its own fault.
  EXPECT_GT(end[1], end[0] + wakeup - 200 * kNs);
  EXPECT_LT(end[1], end[0] + wakeup + 1000 * kNs);
  file.teardown(0);
  ms->drain_all_pages();
  EXPECT_TRUE(ms->check().ok);
}

// Eight CPUs fault the same pages: the ones that find a page locked sleep and are woken by unlock_page, many at once.
TEST(VirtualCosts, ManyCpusWaitingForPageLocksAllGetThem) {
  RunOptions opt;
  opt.clock = ClockKind::virtual_time;
  opt.machine = one_socket(8);
  const RunResult r = run("shmem_fault",
                          {{"threads", int64_t(8)},
                           {"pattern", std::string("overlap")},
                           {"pages_per_thread", int64_t(64)},
                           {"backing", std::string("none")},
                           {"clear_ns", int64_t(2000)}},
                          opt);
  EXPECT_FALSE(r.stopped);
  int64_t waits = 0, faults = 0;
  for (const auto& [k, v] : r.summary) {
    if (k == "page_lock_waits") waits = std::get<int64_t>(v);
    if (k == "faults") faults = std::get<int64_t>(v);
  }
  EXPECT_GT(waits, 0);
  EXPECT_GE(faults, 512);  // every page faulted in once at least
}

// Every scenario, twice, with the host's heap in a different state the second time: the same virtual times. Also
// on a profile with a small LLC, where lines leave the caches and come back (capacity, the streamer), and in a
// vmalloc_stress run whose purges walk thousands of heap-allocated vmap_areas.
TEST(VirtualCosts, VirtualTimesDoNotDependOnTheHostHeap) {
  const std::string topology = "package:2 numa:1 l3:1 core:1 pu:1";
  for (const auto& [with_llc, private_levels] : {std::pair{false, false}, {true, false}, {true, true}}) {
    SCOPED_TRACE(private_levels ? "with the private levels"
                 : with_llc     ? "with cache_mib.llc"
                                : "without cache_mib.llc");
    RunOptions opt;
    opt.clock = ClockKind::virtual_time;
    opt.machine = CapacityRun::profile(with_llc, topology, private_levels);
    const auto times = [&](const std::string& name, const std::map<std::string, Value>& params) {
      const RunResult r = run(name, params, opt);
      std::vector<double> t{r.elapsed_s};
      for (const WorkerRow& w : r.workers) t.push_back(w.elapsed_s);
      return t;
    };
    std::vector<std::pair<std::string, std::map<std::string, Value>>> cases;
    for (const ScenarioDef& def : scenarios()) cases.emplace_back(def.name, def.small);
    cases.emplace_back("vmalloc_stress", std::map<std::string, Value>{{"threads", int64_t(2)},
                                                                      {"ops", int64_t(2000)},
                                                                      {"pattern", std::string("stress_ng_pthread")},
                                                                      {"lazy_max_pages", int64_t(2000)}});
    for (const auto& [name, params] : cases) {
      const std::vector<double> first = times(name, params);
      std::vector<std::unique_ptr<char[]>> clutter;  // odd-sized blocks that shift where later allocations land
      for (size_t i = 0; i < 2000; ++i) clutter.push_back(std::make_unique<char[]>(24 + 8 * (i % 13)));
      for (size_t i = 0; i < clutter.size(); i += 3) clutter[i].reset();
      EXPECT_EQ(times(name, params), first) << name;
    }
  }
}

}  // namespace
