// Shared set-up for the mm tests: a machine, a lock domain whose lock_stat counts the test thread, a MemorySystem,
// and check() after every test.
#pragma once

#include <string>

#include "support.hpp"

namespace mmtest {

using namespace alloclab;
using namespace alloclab::mm;

using support::error_of;
using support::lockstat_acquisitions;
using support::summary_bool;
using support::summary_int;
using support::summary_value;

// A MemorySystem on a synthetic machine; the test thread counts in lock_stat as worker 0 on model CPU 0.
class MmTest : public support::MemoryTest {
 protected:
  // `spin_yield`: spinning waiters yield (set it when the test runs more threads than the host has PUs).
  void build(const std::string& topo, MemoryConfig cfg, const std::string& lock_kind = "", bool spin_yield = false) {
    LockConfig lc;
    if (!lock_kind.empty()) {
      lc.set("zone->lock", lock_kind);
      lc.set("pcp->lock", lock_kind);
    }
    build_machine(topo, lc, spin_yield, 4);
    if (cfg.node_pages.empty()) cfg.node_pages.assign(size_t(machine->model().nr_nodes()), 0);
    build_memory(cfg);
    locks->attach(0, 0);
  }
  // Config with `pages` on node 0 only.
  MemoryConfig on_node0(uint64_t pages, int nodes = 1) {
    MemoryConfig c;
    c.node_pages.assign(size_t(nodes), 0);
    c.node_pages[0] = pages;
    return c;
  }
  void TearDown() override {
    if (ms) {
      const CheckReport r = ms->check();
      EXPECT_TRUE(r.ok) << r.summary();
    }
    LockDomain::detach();
    ms.reset();
  }
};

}  // namespace mmtest
