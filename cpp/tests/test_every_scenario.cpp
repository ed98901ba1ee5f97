// Every registered scenario, with two workers on two model nodes, under every lock kind: the run completes, its own
// finish() invariants hold (it throws otherwise) and every `*_exact` summary flag is true. This is the test that
// `make test-tsan` relies on to put every scenario's concurrent paths and every primitive under ThreadSanitizer.
// A scenario added to the registry without an entry in kSmall fails here by name.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <variant>

#include "alloclab/lab/runner.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock_class.hpp"

using namespace alloclab;

namespace {

// Two workers and a few milliseconds of work per scenario.
const std::map<std::string, std::map<std::string, Value>> kSmall = {
    {"lock_zoo", {{"threads", int64_t(2)}, {"iterations", int64_t(2000)}}},
    {"pcp_refill", {{"threads", int64_t(2)}, {"count", int64_t(256)}}},
    {"page_alloc", {{"threads", int64_t(2)}, {"iterations", int64_t(2000)}, {"node_pages", int64_t(8192)}}},
    {"cma_concurrent", {{"regions", int64_t(2)}, {"pages_per_region", int64_t(2048)}}},
    {"hugetlb_boot", {{"pages", int64_t(64)}, {"multiplier", int64_t(1)}}},
    {"vmalloc_stress", {{"threads", int64_t(2)}, {"ops", int64_t(2000)}, {"lazy_max_pages", int64_t(256)}}},
    {"shmem_fault", {{"threads", int64_t(2)}, {"pages_per_thread", int64_t(1024)}}},
};

TEST(EveryScenario, HasSmallParametersHere) {
  for (const ScenarioDef& def : scenarios()) EXPECT_TRUE(kSmall.contains(def.name)) << def.name << " has no entry";
}

class EveryScenarioEveryKind : public ::testing::TestWithParam<std::tuple<std::string, LockKind>> {};

TEST_P(EveryScenarioEveryKind, RunsWithTwoWorkersAndItsChecksHold) {
  const auto& [name, kind] = GetParam();
  RunOptions opt;
  opt.model = Topology::synthetic("node:2 core:1 pu:1");
  for (const LockClassDef& cls : lock_class_catalogue()) opt.locks.set(cls.name, to_string(kind));
  const RunResult r = run(name, kSmall.at(name), opt);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.workers.size(), 2u);
  uint64_t ops = 0;
  for (const WorkerRow& w : r.workers) ops += w.ops;
  EXPECT_GT(ops, 0u);
  for (const auto& [key, value] : r.summary)
    if (key.ends_with("_exact") && std::holds_alternative<bool>(value)) {
      EXPECT_TRUE(std::get<bool>(value)) << key;
    }
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> v;
  for (const ScenarioDef& def : scenarios()) v.push_back(def.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, EveryScenarioEveryKind,
                         ::testing::Combine(::testing::ValuesIn(scenario_names()),
                                            ::testing::Values(LockKind::mutex, LockKind::pthread, LockKind::spin,
                                                              LockKind::ticket, LockKind::mcs)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param)));
                         });

}  // namespace
