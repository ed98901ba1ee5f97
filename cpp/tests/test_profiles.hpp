// Machine profiles for tests and benchmarks: complete, valid, with numbers that are only there to be different from
// each other. Shipped profiles (python/alloclab/profiles) are read by Python; C++ tests build their own here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "alloclab/topology/machine_profile.hpp"

namespace alloclab::test {

inline void profile_number(ProfileFields& f, const std::string& entry, double v) {
  f.numbers[entry + ".value"] = v;
  f.text[entry + ".source"] = "a test";
}

// A complete profile of `topology` with a transfer entry for each class in `classes` (20, 40, 80 ... ns, nearest
// first), a 2.5 GHz clock, 5 us wake-ups and op_cycles 2, 3, 4 ... in ALLOCLAB_OPS order.
inline ProfileFields profile_fields(const std::string& topology, const std::vector<std::string>& classes) {
  ProfileFields f;
  f.numbers["schema"] = 1;
  f.text["name"] = "test-box";
  f.text["description"] = "a machine for tests";
  f.text["topology"] = topology;
  f.text["topology_source"] = "made up";
  f.seeds = {"some-seed"};
  profile_number(f, "clock.ghz", 2.5);
  double ns = 10;
  for (const auto& c : classes) profile_number(f, "transfer_ns." + c, ns *= 2);
  profile_number(f, "wakeup_ns.futex", 5000);
  profile_number(f, "bandwidth_gbs.node", 100);
  profile_number(f, "bandwidth_gbs.core", 12);
  double cycles = 1;
#define ALLOCLAB_TEST_OP(name) profile_number(f, "op_cycles." #name, cycles += 1);
  ALLOCLAB_OPS(ALLOCLAB_TEST_OP)
#undef ALLOCLAB_TEST_OP
  return f;
}

inline std::shared_ptr<const MachineProfile> test_profile(const std::string& topology,
                                                          const std::vector<std::string>& classes) {
  return std::make_shared<MachineProfile>(profile_fields(topology, classes));
}

}  // namespace alloclab::test
