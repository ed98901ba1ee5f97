// The list of scenarios, in the order `al.scenarios()` shows them.
#include <stdexcept>

#include "alloclab/base/suggest.hpp"

#include "scenarios/scenarios.hpp"

namespace alloclab {

ParamSpec threads_param(int64_t def, std::string doc) {
  return ParamSpec::integer("threads", def, 1, 1024, std::move(doc));
}

const std::vector<ScenarioDef>& scenarios() {
  // One scenario per line, so that adding one is a one-line change.
  // clang-format off
  static const std::vector<ScenarioDef> all = {
      lock_zoo_scenario(),
      pcp_refill_scenario(),
      page_alloc_scenario(),
      vmalloc_stress_scenario(),
      hugetlb_boot_scenario(),
      shmem_fault_scenario(),
      cma_concurrent_scenario(),
  };
  // clang-format on
  return all;
}

const ScenarioDef& find_scenario(const std::string& name) {
  for (const auto& d : scenarios())
    if (d.name == name) return d;
  std::string names;
  std::vector<std::string> known;
  for (const auto& d : scenarios()) {
    names += (names.empty() ? "" : ", ") + d.name;
    known.push_back(d.name);
  }
  throw std::invalid_argument("scenario: unknown scenario '" + name + "' (available: " + names + ")" +
                              did_you_mean(name, known));
}

}  // namespace alloclab
