// The scenario catalogue: one factory per scenario file. registry.cpp lists them; add a line there for a new one.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "alloclab/lab/scenario.hpp"
#include "alloclab/mm/memory_system.hpp"

namespace alloclab {

ScenarioDef lock_zoo_scenario();
ScenarioDef pcp_refill_scenario();
ScenarioDef page_alloc_scenario();
ScenarioDef vmalloc_stress_scenario();
ScenarioDef hugetlb_boot_scenario();
ScenarioDef shmem_fault_scenario();
ScenarioDef cma_concurrent_scenario();

// Parameters every threaded scenario shares, declared once.
ParamSpec threads_param(int64_t def, std::string doc = "worker threads (more than host PUs: oversubscribed)");

// The page allocator's set-up that page_alloc and pcp_refill take from the same parameters: check, batch_rule,
// node_pages, pcp_batch, node (the node allocated from) and gfp (movable or kernel). Throws std::invalid_argument
// naming node_pages when it is not a multiple of pageblock_nr_pages (`node_pages_hint` ends the message).
struct PageAllocParams {
  PageAllocParams(const Params& p, std::string_view node_pages_hint)
      : check(mm::kCheckModeNames.parse(p.s("check"), "check")),
        rule(mm::kBatchRuleNames.parse(p.s("batch_rule"), "batch_rule")),
        node_pages(uint64_t(p.i("node_pages"))),
        pcp_batch(int(p.i("pcp_batch"))),
        node(int(p.i("node"))),
        gfp(p.s("gfp") == "kernel" ? mm::GFP_KERNEL : mm::GFP_HIGHUSER_MOVABLE) {
    if (node_pages % mm::pageblock_nr_pages)
      throw std::invalid_argument("node_pages: " + std::to_string(node_pages) + " is not a multiple of " +
                                  std::to_string(mm::pageblock_nr_pages) + " (pageblock_nr_pages)" +
                                  std::string(node_pages_hint));
  }
  // Sets the MemoryConfig fields these parameters choose: check, batch_rule, pcp_batch.
  void configure(mm::MemoryConfig& cfg) const {
    cfg.check = check;
    cfg.batch_rule = rule;
    cfg.pcp_batch = pcp_batch;
  }

  mm::CheckMode check;
  mm::BatchRule rule;
  uint64_t node_pages;
  int pcp_batch;
  int node;
  mm::gfp_t gfp;
};

// Releases the items a worker holds, in the order it got them, until stop() says to leave the rest (a worker stops
// with the run; finish() then releases the rest with RunEnv::interruption_point() as its stop); keeps the rest.
template <class T, class Release, class Stop>
void release_held(std::vector<T>& held, const Release& release, const Stop& stop) {
  size_t i = 0;
  for (; i < held.size() && !stop(); ++i) release(held[i]);
  held.erase(held.begin(), held.begin() + std::ptrdiff_t(i));
}

// The stop of release_held() in finish(): the run's interruption point (Ctrl-C ends the teardown).
inline auto teardown_stop(const RunEnv& env) {
  return [&env] {
    env.interruption_point();
    return false;
  };
}

}  // namespace alloclab
