// Topology: synthetic and XML models, placement policies, modulo mapping onto the host, node-local memory.
#include <gtest/gtest.h>
#include <hwloc.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>

#include "alloclab/topology/topology.hpp"

using namespace alloclab;

TEST(Topology, SyntheticCountsNodesAndPus) {
  auto t = Topology::synthetic("node:4 core:2 pu:1");
  EXPECT_EQ(t->nr_nodes(), 4);
  EXPECT_EQ(t->nr_pus(), 8);
  EXPECT_EQ(t->nr_cores(), 8);
  EXPECT_EQ(t->pus_of_node(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(t->node_of_pu(7), 3);
  EXPECT_EQ(t->tree(),
            "Machine (synthetic \"node:4 core:2 pu:1\"): 4 nodes, 8 cores, 8 PUs\n"
            "  NUMANode L#0: PU L#0-1\n  NUMANode L#1: PU L#2-3\n  NUMANode L#2: PU L#4-5\n  NUMANode L#3: PU L#6-7");
}

TEST(Topology, MalformedOrHugeSyntheticIsAnError) {
  for (const char* bad : {"", "node:4 banana:2", "node:x pu:1"}) {
    try {
      Topology::synthetic(bad);
      FAIL() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("topology: ", 0), 0u) << e.what();
    }
  }
  EXPECT_THROW(Topology::synthetic("node:1000 core:1000 pu:1"), std::invalid_argument);
}

TEST(Topology, XmlRoundTrip) {
  auto t = Topology::synthetic("pack:2 node:2 core:3 pu:2");
  char path[] = "/tmp/alloclab-topo-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(hwloc_topology_export_xml(t->raw(), path, 0), 0);
  auto x = Topology::from_xml(path);
  std::remove(path);
  EXPECT_EQ(x->nr_nodes(), 4);
  EXPECT_EQ(x->nr_pus(), 24);
  EXPECT_EQ(x->pus_of_node(3), (std::vector<int>{18, 19, 20, 21, 22, 23}));
  EXPECT_THROW(Topology::from_xml("/nonexistent/topo.xml"), std::invalid_argument);
}

TEST(Machine, CompactScatterAndListPlacement) {
  Machine m(Topology::synthetic("node:4 core:2 pu:1"), Topology::host());
  const auto compact = m.place(3, {});
  EXPECT_EQ(compact[2].model_pu, 2);
  EXPECT_EQ(compact[2].model_node, 1);
  const auto scatter = m.place(6, Placement::parse("scatter"));
  const int pus[] = {0, 2, 4, 6, 1, 3};
  for (int w = 0; w < 6; ++w) {
    EXPECT_EQ(scatter[size_t(w)].model_pu, pus[w]);
    EXPECT_EQ(scatter[size_t(w)].model_node, w % 4);
  }
  const auto list = m.place(2, {Placement::Policy::list, {7, 5}});
  EXPECT_EQ(list[0].model_node, 3);
  EXPECT_EQ(list[1].model_pu, 5);
  EXPECT_THROW(m.place(2, {Placement::Policy::list, {9, 0}}), std::invalid_argument);
  EXPECT_THROW(m.place(3, {Placement::Policy::list, {0}}), std::invalid_argument);
  EXPECT_THROW(Placement::parse("spread"), std::invalid_argument);
}

TEST(Machine, ModelMapsOntoHostModulo) {
  auto host = Topology::host();
  Machine m(Topology::synthetic("node:4 core:4 pu:1"), host);
  for (const Slot& s : m.place(16, {})) {
    EXPECT_EQ(s.host_pu, s.model_pu % host->nr_pus());
    EXPECT_EQ(s.host_node, s.model_node % host->nr_nodes());
  }
}

TEST(Machine, BindingRecordsTheCpuUsed) {
  Machine m(Topology::host(), Topology::host());
  const Slot s = m.place(1, {})[0];
  const BindOutcome b = m.bind_current_thread(s);
  EXPECT_GE(b.cpu_used, 0);
  if (b.ok)
    EXPECT_TRUE(b.error.empty());
  else
    EXPECT_FALSE(b.error.empty());
}

TEST(NodeMemory, ZeroFilledAndMovable) {
  Machine m(Topology::synthetic("node:2 pu:1"), Topology::host());
  NodeMemory a(m, 1, 1 << 20);
  ASSERT_NE(a.data(), nullptr);
  const auto* bytes = static_cast<const unsigned char*>(a.data());
  for (size_t i = 0; i < a.size(); i += 4096) ASSERT_EQ(bytes[i], 0);
  std::memset(a.data(), 1, a.size());
  NodeMemory b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(static_cast<const unsigned char*>(b.data())[12345], 1);
}
