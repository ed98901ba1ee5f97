// The scenario catalogue: one factory per scenario file. registry.cpp lists them; add a line there for a new one.
#pragma once

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

}  // namespace alloclab
