// Shared set-up for the mm tests: a machine, a lock domain whose lock_stat counts the test thread, a MemorySystem,
// and check() after every test.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/topology/topology.hpp"

namespace mmtest {

using namespace alloclab;
using namespace alloclab::mm;

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

inline const Value& summary_value(const RunResult& r, const std::string& key) {
  for (const auto& [k, v] : r.summary)
    if (k == key) return v;
  throw std::out_of_range("summary has no '" + key + "'");
}
inline int64_t summary_int(const RunResult& r, const std::string& key) {
  return std::get<int64_t>(summary_value(r, key));
}
inline uint64_t lockstat_acquisitions(const RunResult& r, const std::string& cls) {
  for (const auto& row : r.lockstat)
    if (row.cls == cls) return row.acquisitions;
  return 0;
}

// A MemorySystem on a synthetic machine; the test thread counts in lock_stat as worker 0 on model CPU 0.
class MmTest : public ::testing::Test {
 protected:
  // `spin_yield`: spinning waiters yield (set it when the test runs more threads than the host has PUs).
  void build(const std::string& topo, MemoryConfig cfg, const std::string& lock_kind = "", bool spin_yield = false) {
    machine = std::make_unique<Machine>(Topology::synthetic(topo), Topology::host());
    LockConfig lc;
    if (!lock_kind.empty()) {
      lc.set("zone->lock", lock_kind);
      lc.set("pcp->lock", lock_kind);
    }
    locks = std::make_unique<LockDomain>(lc, true, spin_yield);
    locks->reset_stats(4);
    if (cfg.node_pages.empty()) cfg.node_pages.assign(size_t(machine->model().nr_nodes()), 0);
    ms = std::make_unique<MemorySystem>(*machine, *locks, cfg);
    locks->attach(0, 0);
  }
  // Config with `pages` on node 0 only.
  MemoryConfig on_node0(uint64_t pages, int nodes = 1) {
    MemoryConfig c;
    c.node_pages.assign(size_t(nodes), 0);
    c.node_pages[0] = pages;
    return c;
  }
  uint64_t acquisitions(const std::string& cls) const {
    for (const auto& row : locks->rows())
      if (row.cls == cls) return row.acquisitions;
    return 0;
  }
  void TearDown() override {
    if (ms) {
      const CheckReport r = ms->check();
      EXPECT_TRUE(r.ok) << r.summary();
    }
    LockDomain::detach();
    ms.reset();
  }

  std::unique_ptr<Machine> machine;
  std::unique_ptr<LockDomain> locks;
  std::unique_ptr<MemorySystem> ms;
};

}  // namespace mmtest
