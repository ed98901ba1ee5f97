// Topology: synthetic and XML models, placement policies, modulo mapping onto the host, node-local memory.
#include <gtest/gtest.h>
#include <hwloc.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

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

// The message of the std::invalid_argument `f` throws ("" when it does not throw).
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, SyntheticSizeIsTheProductOfTheArities) {
  // Bare arities (no "type:") count as much as typed ones; a million PUs is refused before hwloc builds them.
  for (const char* big :
       {"8 8 8 16", "100 100 100", "node:2 core:4096 pu:1", "0x1000 2", "pack:99999999999999999999 1"})
    EXPECT_EQ(refusal([&] { Topology::synthetic(big); }).rfind("topology: synthetic description", 0), 0u) << big;
  EXPECT_EQ(Topology::synthetic("8 8 8 8")->nr_pus(), 4096);  // the cap itself is allowed
  EXPECT_EQ(Topology::synthetic("(memory=1GB) node:2(memory=2GB indexes=1,0) core:2 pu:2")->nr_pus(), 8);
  EXPECT_EQ(Topology::synthetic("pack:2 [numa] core:2 pu:1")->nr_nodes(), 2);
}

// An hwloc XML export of `synthetic` with the lines that contain any of `drop` removed.
std::string xml_without(const std::string& synthetic, const std::vector<std::string>& drop) {
  char* buf = nullptr;
  int len = 0;
  auto t = Topology::synthetic(synthetic);
  EXPECT_EQ(hwloc_topology_export_xmlbuffer(t->raw(), &buf, &len, 0), 0);
  std::istringstream in(std::string(buf, size_t(len)));
  hwloc_free_xmlbuffer(t->raw(), buf);
  std::string out, line;
  while (std::getline(in, line)) {
    bool keep = true;
    for (const auto& d : drop) keep = keep && line.find(d) == std::string::npos;
    if (keep) out += line + "\n";
  }
  return out;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char p[] = "/tmp/alloclab-topo-XXXXXX";
    const int fd = mkstemp(p);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
    close(fd);
    path = p;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

TEST(Topology, XmlWithoutPusOrWithPuLessNodesOrPackagesIsRefused) {
  const TempFile none(xml_without("pack:2 node:1 core:2 pu:1", {"type=\"PU\""}));
  EXPECT_EQ(refusal([&] { Topology::from_xml(none.path); }),
            "topology: XML topology '" + none.path +
                "' has no PUs (allowed: 1..4096 PUs, every NUMA node and package holding at least one)");
  // The second package's cores and PUs (os_index 2 and 3) removed: its node and the package itself hold none.
  const TempFile half(
      xml_without("pack:2 node:1 core:2 pu:1", {"type=\"PU\" os_index=\"2\"", "type=\"PU\" os_index=\"3\""}));
  EXPECT_NE(refusal([&] { Topology::from_xml(half.path); }).find("without PUs"), std::string::npos);
  const TempFile whole(xml_without("pack:2 node:1 core:2 pu:1", {}));
  EXPECT_EQ(Topology::from_xml(whole.path)->nr_pus(), 4);
}

TEST(Topology, XmlSizeIsBoundedBeforeHwlocReadsIt) {
  // 4097 PU objects: counted in the text and refused before hwloc parses a line.
  std::string many = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\">\n";
  for (int i = 0; i < 4097; ++i) many += "<object type=\"PU\" os_index=\"" + std::to_string(i) + "\"/>\n";
  const TempFile big(many + "</object>\n</topology>\n");
  EXPECT_EQ(refusal([&] { Topology::from_xml(big.path); }),
            "topology: XML topology '" + big.path + "' has 4097 PUs and 0 NUMA nodes (allowed: at most 4096 of each)");
  // A file above 64 MiB (sparse: nothing is written), a FIFO (opening it would wait for a writer), a device that
  // never ends, a directory.
  const TempFile huge("");
  ASSERT_EQ(truncate(huge.path.c_str(), (off_t(64) << 20) + 1), 0);
  EXPECT_NE(refusal([&] { Topology::from_xml(huge.path); }).find("bytes, allowed: at most 67108864, 64 MiB"),
            std::string::npos);
  const std::string fifo = huge.path + ".fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string fifo_error = refusal([&] { Topology::from_xml(fifo); });
  std::remove(fifo.c_str());
  EXPECT_NE(fifo_error.find("not a regular file: a FIFO"), std::string::npos) << fifo_error;
  EXPECT_NE(refusal([&] { Topology::from_xml("/dev/zero"); }).find("a character device"), std::string::npos);
  EXPECT_NE(refusal([&] { Topology::from_xml("/tmp"); }).find("a directory"), std::string::npos);
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
