// Every registered scenario, with two workers on two model nodes, under every lock kind, in both clocks: the run
// completes, its own finish() invariants hold (it throws otherwise) and its lock counts are exact (the runner throws
// otherwise); a virtual-clock run is also identical when repeated. This is the test that `make test-tsan` relies on
// to put every scenario's concurrent paths and every primitive under ThreadSanitizer. The parameters are each
// scenario's declared `small` set, so a new scenario is covered at once.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <variant>

#include "alloclab/lab/runner.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock_class.hpp"
#include "test_profiles.hpp"

using namespace alloclab;

namespace {

TEST(EveryScenario, DeclaresSmallParametersThatItAccepts) {
  for (const ScenarioDef& def : scenarios()) {
    EXPECT_FALSE(def.small.empty()) << def.name << " declares no small parameters";
    EXPECT_NO_THROW(Params::resolve(def.params, def.small, def.name)) << def.name;
  }
}

// Everything a run says about what happened, virtual times included (doubles to the last bit); not the
// host-dependent provenance.
std::string fingerprint(const RunResult& r) {
  std::string s;
  const auto add = [&](const std::string& k, const Value& v) {
    char buf[64];
    if (const auto* d = std::get_if<double>(&v)) {
      std::snprintf(buf, sizeof buf, "%a", *d);
      s += k + "=" + buf + ";";
    } else {
      s += k + "=" + to_string(v) + ";";
    }
  };
  for (const auto& [k, v] : r.summary) add(k, v);
  for (const LockStatRow& row : r.lockstat)
    for (const Column<LockStatRow>& c : lockstat_columns()) add(row.cls + "." + c.name, c.get(row));
  for (const WorkerRow& w : r.workers)
    for (const Column<WorkerRow>& c : worker_columns()) add(std::to_string(w.slot.worker) + "." + c.name, c.get(w));
  return s;
}

class EveryScenarioEveryKind : public ::testing::TestWithParam<std::tuple<std::string, LockKind, ClockKind>> {};

TEST_P(EveryScenarioEveryKind, RunsWithTwoWorkersAndItsChecksHold) {
  const auto& [name, kind, clock] = GetParam();
  RunOptions opt;
  opt.clock = clock;
  if (clock == ClockKind::real)
    opt.model = Topology::synthetic("node:2 core:1 pu:1");
  else
    opt.machine = test::test_profile("package:2 numa:1 l3:1 core:1 pu:1", {"remote"});
  for (const LockClassDef& cls : lock_class_catalogue()) opt.locks.set(cls.name, to_string(kind));
  const RunResult r = run(name, find_scenario(name).small, opt);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.workers.size(), 2u);
  uint64_t ops = 0;
  for (const WorkerRow& w : r.workers) ops += w.ops;
  EXPECT_GT(ops, 0u);
  // The runner raised if lock_stat disagreed with a formula; every scenario but page_alloc (which promises no
  // exact counts: its rand pattern crosses pcp->high at seed-dependent times) has formulas, so says so.
  // Each summary figure once (Python reads the summary as a mapping: a second emission would silently win).
  bool exact = false;
  std::set<std::string> keys;
  for (const auto& [key, value] : r.summary) {
    EXPECT_TRUE(keys.insert(key).second) << name << " emits " << key << " twice";
    if (key == "lock_counts_exact") exact = std::holds_alternative<bool>(value) && std::get<bool>(value);
  }
  EXPECT_EQ(exact, name != "page_alloc") << name;
  if (clock == ClockKind::virtual_time) {
    EXPECT_GT(r.elapsed_s, 0.0);
    EXPECT_EQ(fingerprint(r), fingerprint(run(name, find_scenario(name).small, opt)));
  }
}

std::vector<LockKind> all_kinds() {
  std::vector<LockKind> v;
  for (const LockKindInfo& k : lock_kinds()) v.push_back(k.kind);
  return v;
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> v;
  for (const ScenarioDef& def : scenarios()) v.push_back(def.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, EveryScenarioEveryKind,
                         ::testing::Combine(::testing::ValuesIn(scenario_names()), ::testing::ValuesIn(all_kinds()),
                                            ::testing::Values(ClockKind::real, ClockKind::virtual_time)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param))) +
                                  "_" + std::string(kClockKindNames(std::get<2>(info.param)));
                         });

}  // namespace
