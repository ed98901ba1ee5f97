// The scenario catalogue: one factory per scenario file. registry.cpp lists them; add a line there for a new one.
#pragma once

#include <cstddef>
#include <vector>

#include "alloclab/lab/scenario.hpp"

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
