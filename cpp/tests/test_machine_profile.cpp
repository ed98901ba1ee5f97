// MachineProfile: validation of every field (each error names its field), distance classes on synthetic
// topologies, the content hash.
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "alloclab/topology/machine_profile.hpp"
#include "test_profiles.hpp"

using namespace alloclab;

namespace {

constexpr auto fields = test::profile_fields;  // a complete profile of a topology, one transfer entry per class
constexpr auto number = test::profile_number;

const std::vector<std::string> kTwoSocketSmt = {"same_core", "same_llc", "remote"};

// The message of the std::invalid_argument that `f` raises ("" if none).
std::string error_of(const ProfileFields& f) {
  try {
    MachineProfile p(f);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

::testing::AssertionResult starts_with(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << s << "' does not start with '" << prefix << "'";
}

}  // namespace

TEST(MachineProfile, DistanceClassesOnTwoSocketsWithSmt) {
  const MachineProfile p(fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt));
  EXPECT_EQ(p.topology()->nr_pus(), 16);
  EXPECT_EQ(p.topology()->nr_nodes(), 2);
  EXPECT_EQ(p.distances().present(),
            (std::vector<DistanceClass>{DistanceClass::same_core, DistanceClass::same_llc, DistanceClass::remote}));
  EXPECT_EQ(p.distance(3, 3), DistanceClass::same_pu);
  EXPECT_EQ(p.distance(0, 1), DistanceClass::same_core);  // SMT siblings
  EXPECT_EQ(p.distance(0, 2), DistanceClass::same_llc);   // same package
  EXPECT_EQ(p.distance(7, 8), DistanceClass::remote);     // across packages
  EXPECT_EQ(p.transfer_ns(3, 3), 0);
  EXPECT_EQ(p.transfer_ns(0, 1), 20);
  EXPECT_EQ(p.transfer_ns(0, 2), 40);
  EXPECT_EQ(p.transfer_ns(15, 0), 80);
  EXPECT_EQ(p.value("clock.ghz"), 2.5);
  EXPECT_EQ(p.sources().at("clock.ghz"), "a test");
  EXPECT_EQ(p.seeds(), (std::vector<std::string>{"some-seed"}));
}

TEST(MachineProfile, SameNodeOnlyWhereANodeHoldsSeveralLlcs) {
  // One package of three nodes, two L3s (CCXs) per node: the Zen 1 layout.
  const MachineProfile p(fields("package:1 numa:3 l3:2 core:4 pu:1", {"same_llc", "same_node", "remote"}));
  EXPECT_EQ(p.distance(0, 3), DistanceClass::same_llc);
  EXPECT_EQ(p.distance(0, 4), DistanceClass::same_node);
  EXPECT_EQ(p.distance(0, 8), DistanceClass::remote);  // nodes in one package: one hop
  EXPECT_EQ(p.distance(0, 23), DistanceClass::remote);
  EXPECT_EQ(p.distances().node_hops(0, 2), 1);
}

TEST(MachineProfile, TwoHopsAcrossPackagesThatHoldSeveralNodes) {
  const PuDistances d(*Topology::synthetic("package:2 numa:2 l3:1 core:2 pu:1"));
  EXPECT_EQ(d.classify(0, 2), DistanceClass::remote);       // node 0 -> node 1, same package
  EXPECT_EQ(d.classify(0, 4), DistanceClass::remote_2hop);  // node 0 -> node 2, other package
  EXPECT_EQ(d.node_hops(1, 3), 2);
  EXPECT_EQ(d.pairs(DistanceClass::remote_2hop, 2), (std::vector<std::pair<int, int>>{{0, 4}, {0, 5}}));
}

TEST(MachineProfile, FourSocketsOfOneNodeEachAreOneHopApart) {
  // No L3 level: a node counts as one last-level cache.
  const PuDistances d(*Topology::synthetic("package:4 numa:1 core:2 pu:2"));
  EXPECT_EQ(d.classify(0, 1), DistanceClass::same_core);
  EXPECT_EQ(d.classify(0, 2), DistanceClass::same_llc);
  for (int b = 4; b < 16; ++b) EXPECT_EQ(d.classify(0, b), DistanceClass::remote) << b;
  EXPECT_EQ(d.present(),
            (std::vector<DistanceClass>{DistanceClass::same_core, DistanceClass::same_llc, DistanceClass::remote}));
}

TEST(MachineProfile, PuOutsideTheTopologyIsNamed) {
  const MachineProfile p(fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt));
  try {
    p.transfer_ns(0, 16);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(starts_with(e.what(), "pu: 16 is not a PU of this topology (allowed: 0..15)"));
  }
}

TEST(MachineProfile, HashIsStableAndFollowsTheNumbers) {
  const auto f = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  const MachineProfile p(f);
  // Golden value (checked against an independent FNV-1a of the canonical text): the same on every host. A change
  // here changes every result's provenance, so it must be deliberate.
  EXPECT_EQ(p.hash(), "2183e54210925687");
  EXPECT_EQ(MachineProfile(f).hash(), p.hash());
  auto words = f;  // names, descriptions and sources do not change what a simulation computes
  words.text["name"] = "other";
  words.text["description"] = "other";
  words.text["clock.ghz.source"] = "another source";
  EXPECT_EQ(MachineProfile(words).hash(), p.hash());
  auto value = f;
  value.numbers["transfer_ns.remote.value"] = 80.5;
  EXPECT_NE(MachineProfile(value).hash(), p.hash());
  auto topo = fields("package:2 numa:1 l3:1 core:5 pu:2", kTwoSocketSmt);
  EXPECT_NE(MachineProfile(topo).hash(), p.hash());
}

TEST(MachineProfile, OptionalDramLatencies) {
  auto f = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(f, "dram_ns.local", 90);
  number(f, "dram_ns.remote", 140);
  EXPECT_EQ(MachineProfile(f).value("dram_ns.remote"), 140);
  auto one = fields("package:1 numa:1 l3:1 core:4 pu:1", {"same_llc"});
  number(one, "dram_ns.remote", 140);
  EXPECT_TRUE(starts_with(error_of(one), "dram_ns.remote: not allowed: the topology has one NUMA node"));
}

TEST(MachineProfile, AnLlcSizeNeedsTheDramLatency) {
  auto f = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(f, "cache_mib.llc", 35.75);
  EXPECT_EQ(error_of(f),
            "cache_mib.llc: needs dram_ns.local, the latency of a line that has left the LLC (allowed: both, or "
            "neither)");
  number(f, "dram_ns.local", 81.2);
  const MachineProfile p(f);
  EXPECT_EQ(p.value("cache_mib.llc"), 35.75);
  const PuDistances& d = p.distances();
  EXPECT_EQ(d.nr_llcs(), 2);  // one L3 per socket
  EXPECT_EQ(d.llc(0), 0);
  EXPECT_EQ(d.llc(15), 1);
  auto zen = fields("package:1 numa:2 l3:2 core:4 pu:1", {"same_llc", "same_node", "remote"});
  const MachineProfile z(zen);
  EXPECT_EQ(z.distances().nr_llcs(), 4);
  EXPECT_EQ(z.distances().llc(13), 3);
}

// The private levels come with their latencies, on a machine with an LLC size, each smaller than the level below.
TEST(MachineProfile, PrivateCacheLevelsNeedTheirLatenciesAndTheLevelsBelow) {
  auto f = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(f, "cache_kib.l1d", 48);
  EXPECT_EQ(error_of(f),
            "cache_kib.l1d: needs cache_ns.l2, the latency of a line that has left L1D (allowed: both, or neither)");
  number(f, "cache_ns.l2", 5.3);
  EXPECT_EQ(error_of(f),
            "cache_kib.l1d: needs cache_mib.llc, the LLC, where a line that leaves the private caches goes (allowed: "
            "both, or neither)");
  number(f, "cache_mib.llc", 1.0 / 32);  // 32 KiB
  number(f, "dram_ns.local", 81.2);
  EXPECT_EQ(error_of(f), "cache_kib.l1d: 48 KiB is not allowed (allowed: less than cache_mib.llc, 32 KiB)");
  number(f, "cache_mib.llc", 60);
  EXPECT_EQ(MachineProfile(f).value("cache_ns.l2"), 5.3);
  number(f, "cache_kib.l2", 32);
  number(f, "cache_ns.llc", 30);
  EXPECT_EQ(error_of(f), "cache_kib.l2: 32 KiB is not allowed (allowed: more than cache_kib.l1d, 48 KiB)");
  number(f, "cache_kib.l2", 1280);
  EXPECT_EQ(MachineProfile(f).value("cache_kib.l2"), 1280);
  auto l2_alone = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(l2_alone, "cache_kib.l2", 1280);
  number(l2_alone, "cache_ns.llc", 30);
  EXPECT_EQ(error_of(l2_alone),
            "cache_kib.l2: needs cache_kib.l1d, the L1D size (L2 is the level below L1D) (allowed: both, or neither)");
  auto l2_latency = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(l2_latency, "cache_ns.l2", 5.3);
  EXPECT_EQ(error_of(l2_latency),
            "cache_ns.l2: needs cache_kib.l1d, the L1D size, which lines leave to be found in L2 (allowed: both, or "
            "neither)");
  auto no_l1d = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  number(no_l1d, "cache_ns.llc", 30);
  EXPECT_EQ(error_of(no_l1d),
            "cache_ns.llc: needs cache_kib.l2, the L2 size, which lines leave to be found in the LLC (allowed: both, "
            "or neither)");
}

TEST(MachineProfile, OptionalPageOpCosts) {
  auto f = fields("package:1 numa:1 l3:1 core:4 pu:1", {"same_llc"});
  EXPECT_THROW(MachineProfile(f).value("page_ns.copy"), std::invalid_argument);  // absent: bandwidth alone
  number(f, "page_ns.copy", 1000);
  number(f, "page_ns.clear", 700);
  EXPECT_EQ(MachineProfile(f).value("page_ns.clear"), 700);
  number(f, "page_ns.clear", 0);
  EXPECT_TRUE(starts_with(error_of(f), "page_ns.clear: "));
  auto odd = fields("package:1 numa:1 l3:1 core:4 pu:1", {"same_llc"});
  number(odd, "page_ns.move", 10);
  EXPECT_TRUE(starts_with(error_of(odd), "page_ns.move: "));
}

TEST(MachineProfile, EveryBadFieldIsNamed) {
  const auto good = fields("package:2 numa:1 l3:1 core:4 pu:2", kTwoSocketSmt);
  ASSERT_EQ(error_of(good), "");
  struct Case {
    std::function<void(ProfileFields&)> spoil;
    std::string prefix;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {[](auto& f) { f.numbers.erase("schema"); }, "schema: missing (allowed: 1)"},
      {[](auto& f) { f.numbers["schema"] = 2; }, "schema: 2 is not supported (allowed: 1)"},
      {[](auto& f) { f.text.erase("name"); }, "name: missing"},
      {[](auto& f) { f.text["name"] = "my box"; }, "name: 'my box' (allowed: letters, digits"},
      {[](auto& f) { f.text["description"] = " "; }, "description: empty"},
      {[](auto& f) { f.numbers["topology_source"] = 3; }, "topology_source: expected a string, got 3"},
      {[](auto& f) { f.seeds.push_back(""); }, "seeds[1]: empty"},
      {[](auto& f) { f.text["topology"] = "package:2 banana:3"; }, "topology: malformed synthetic description"},
      {[](auto& f) { f.text["topology"] = "package:2 numa:1 core:257 pu:1"; },
       "topology: 'package:2 numa:1 core:257 pu:1' has 514 PUs and 2 NUMA nodes (allowed: at most 512 PUs and 16 "
       "nodes)"},
      {[](auto& f) { f.text["topology"] = "numa:17 core:1 pu:1"; },
       "topology: 'numa:17 core:1 pu:1' has 17 PUs and 17"},
      {[](auto& f) { f.numbers.erase("clock.ghz.value"); }, "clock.ghz.value: missing (every source needs its number"},
      {[](auto& f) { f.text.erase("wakeup_ns.futex.source"); }, "wakeup_ns.futex.source: missing"},
      {[](auto& f) { f.text["bandwidth_gbs.core.source"] = ""; }, "bandwidth_gbs.core.source: empty"},
      {[](auto& f) {
         f.numbers.erase("op_cycles.page_init.value");
         f.text.erase("op_cycles.page_init.source");
       },
       "op_cycles.page_init: missing (required: { value = <cycles>, source = \"...\" })"},
      {[](auto& f) { f.numbers["transfer_ns.remote.value"] = -5; },
       "transfer_ns.remote: -5 is not allowed (allowed: a finite number > 0, in ns)"},
      {[](auto& f) { f.numbers["bandwidth_gbs.node.value"] = 0; }, "bandwidth_gbs.node: 0 is not allowed"},
      {[&](auto& f) { f.numbers["wakeup_ns.futex.value"] = nan; }, "wakeup_ns.futex: nan is not allowed"},
      {[](auto& f) { f.text["clock.ghz.value"] = "2.5"; }, "clock.ghz.value: expected a number, got \"2.5\""},
      {[](auto& f) { f.numbers["clock.ghz.source"] = 1; }, "clock.ghz.source: expected a string, got 1"},
      {[](auto& f) { f.numbers["clock.ghz"] = 2.5; }, "clock.ghz: expected a table { value = <GHz>, source"},
      {[](auto& f) { f.numbers["clock"] = 2.5; }, "clock: expected a table of fields, got 2.5"},
      {[](auto& f) { f.text["clock.ghz.unit"] = "GHz"; }, "clock.ghz.unit: unknown key (allowed: value, source)"},
      {[](auto& f) { f.numbers["clock.mhz.value"] = 2500; }, "clock.mhz: unknown field (allowed in [clock]: ghz)"},
      {[](auto& f) { f.numbers["latency_ns.l1.value"] = 1; }, "latency_ns: unknown table (allowed: schema, name"},
      {[](auto& f) { f.text["owner"] = "me"; }, "owner: unknown field"},
      {[](auto& f) { number(f, "transfer_ns.same_node", 90); },
       "transfer_ns.same_node: not allowed: the topology has no two PUs at this distance (classes present: "
       "same_core, same_llc, remote)"},
      {[](auto& f) {
         f.numbers.erase("transfer_ns.same_core.value");
         f.text.erase("transfer_ns.same_core.source");
       },
       "transfer_ns.same_core: missing"},
  };
  for (const auto& c : cases) {
    auto f = good;
    c.spoil(f);
    EXPECT_TRUE(starts_with(error_of(f), c.prefix));
  }
}
