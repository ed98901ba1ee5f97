// Bad input is a std::invalid_argument naming the parameter, before anything is allocated.
#include "mm_test_util.hpp"

using namespace mmtest;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string run_error(const std::map<std::string, Value>& params, const std::string& topo = "node:1 core:2 pu:1") {
  RunOptions opt;
  opt.model = Topology::synthetic(topo);
  return error_of([&] { run("pcp_refill", params, opt); });
}

}  // namespace

TEST(MmValidation, MemoryConfigErrorsNameTheField) {
  Machine m(Topology::synthetic("node:2 core:1 pu:1"), Topology::host());
  LockDomain locks(LockConfig{}, true, false);
  MemoryConfig c;
  c.node_pages = {1024};
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "node_pages: 1 entries"));
  c.node_pages = {1000, 0};
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "node_pages: 1000 for node 0"));
  c.node_pages = {0, 0};
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "node_pages: every node is empty"));
  c.node_pages = {1024, 1024};
  c.pcp_batch = -1;
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "pcp_batch: -1"));
  c.pcp_batch = 0;
  c.watermark_scale_factor = 0;
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "watermark_scale_factor: 0"));
  c.watermark_scale_factor = 10;
  c.percpu_pagelist_high_fraction = 3;
  EXPECT_TRUE(starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "percpu_pagelist_high_fraction: 3"));
  c.percpu_pagelist_high_fraction = 8;  // allowed under v6.x, not with 2.6.35's rules (no such sysctl)
  c.batch_rule = BatchRule::v2_6_35;
  EXPECT_TRUE(
      starts_with(error_of([&] { MemorySystem ms(m, locks, c); }), "percpu_pagelist_high_fraction: 8 is a v5.14+"));
}

TEST(MmValidation, MoreMemoryThanTheHostHasIsRefusedBeforeAllocating) {
  Machine m(Topology::synthetic("node:2 core:1 pu:1"), Topology::host());
  LockDomain locks(LockConfig{}, true, false);
  MemoryConfig c;
  // 2 x 2^32 - 1024 pages (16 TiB each) need about 512 GiB of struct pages.
  const uint64_t huge = (uint64_t(1) << 32) - 1024;
  c.node_pages = {huge, huge};
  const std::string e = error_of([&] { MemorySystem ms(m, locks, c); });
  EXPECT_TRUE(starts_with(e, "memory: this run needs ")) << e;
  EXPECT_NE(e.find("(node_pages: 8589932544 pages of 64-byte struct pages)"), std::string::npos) << e;
  EXPECT_NE(e.find(format_bytes(memory_available()) + " are available"), std::string::npos) << e;
}

TEST(MmValidation, EntryPointsRejectOutOfRangeArguments) {
  Machine m(Topology::synthetic("node:1 core:2 pu:1"), Topology::host());
  LockDomain locks(LockConfig{}, true, false);
  MemoryConfig c;
  c.node_pages = {2048};
  MemorySystem ms(m, locks, c);
  EXPECT_TRUE(starts_with(error_of([&] { ms.alloc_pages(0, 0, 11, GFP_KERNEL); }), "order: 11"));
  EXPECT_TRUE(starts_with(error_of([&] { ms.alloc_pages(2, 0, 0, GFP_KERNEL); }), "cpu: 2"));
  EXPECT_TRUE(starts_with(error_of([&] { ms.alloc_pages(0, 1, 0, GFP_KERNEL); }), "nid: 1"));
  EXPECT_TRUE(starts_with(error_of([&] { ms.free_pages(0, nullptr, 0); }), "page: "));
  EXPECT_TRUE(starts_with(error_of([&] { ms.start_isolate_page_range(100, 612, MIGRATE_MOVABLE); }), "pfn range"));
  EXPECT_TRUE(ms.check().ok);
}

TEST(MmValidation, ScenarioParametersAreNamed) {
  EXPECT_TRUE(starts_with(run_error({{"order", int64_t(11)}}), "order: ")) << run_error({{"order", int64_t(11)}});
  EXPECT_TRUE(starts_with(run_error({{"count", int64_t(-1)}}), "count: "));
  EXPECT_TRUE(starts_with(run_error({{"check", std::string("sometimes")}}), "check: "));
  EXPECT_TRUE(starts_with(run_error({{"batch_rule", std::string("v5.0")}}), "batch_rule: "));
  EXPECT_TRUE(starts_with(run_error({{"node_pages", int64_t(1000)}}), "node_pages: 1000"));
  EXPECT_TRUE(starts_with(run_error({{"node", int64_t(1)}}), "node: 1"));
  // More pages than the node holds.
  const std::string e = run_error({{"order", int64_t(9)}, {"count", int64_t(4096)}, {"node_pages", int64_t(1 << 18)}});
  EXPECT_TRUE(starts_with(e, "count: ")) << e;
  EXPECT_NE(e.find("node_pages=262144"), std::string::npos) << e;
  // Two workers on one model CPU would share its pcp.
  const std::string t = run_error({{"threads", int64_t(3)}});
  EXPECT_TRUE(starts_with(t, "threads: 3 workers")) << t;
  EXPECT_NE(t.find("synthetic"), std::string::npos);
}

TEST(MmValidation, PageAllocParametersAreNamed) {
  RunOptions opt;
  opt.model = Topology::synthetic("node:1 core:2 pu:1");
  auto err = [&](const std::map<std::string, Value>& p) { return error_of([&] { run("page_alloc", p, opt); }); };
  EXPECT_TRUE(starts_with(err({{"pattern", std::string("zigzag")}}), "pattern: "));
  EXPECT_TRUE(starts_with(err({{"share", 1.5}}), "share: "));
  EXPECT_TRUE(starts_with(err({{"node_pages", int64_t(700)}}), "node_pages: "));
  EXPECT_TRUE(starts_with(err({{"order", int64_t(10)}, {"share", 0.001}, {"node_pages", int64_t(2048)}}), "share: "));
}
