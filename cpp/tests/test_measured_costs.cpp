// costs="measured": a segment between two sync points costs its host time, scaled from the host's clock to the
// profile's (a 2 GHz host segment on a 4 GHz profile takes half the virtual time). Host time varies from run to run,
// so the checks are bounds that cannot fail on a slow or preempted host: the charge is at least the ticks the body
// spun and at most the ticks between the test's own clock reads around the segment, both scaled by the same factor.
#include <gtest/gtest.h>

#include <cstdint>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/scheduler.hpp"
#include "alloclab/topology/cost_model.hpp"
#include "test_profiles.hpp"

using namespace alloclab;

namespace {

struct Charge {
  vt::vtime charged;  // the virtual time the segment advanced the CPU's clock
  uint64_t spun;      // host ticks the body spun for (a lower bound of the segment)
  uint64_t bracket;   // host ticks between reads just outside the segment (an upper bound)
};

// One segment of `spin` host ticks on virtual CPU 0 of a profile with clock.ghz = 2.5, host at `host_ghz`.
Charge measure(double host_ghz, uint64_t spin) {
  CostModel costs(test::test_profile("package:1 numa:1 l3:1 core:1 pu:1", {}), Costs::measured, {0}, host_ghz);
  CostScope scope(&costs);
  Charge c{0, spin, 0};
  vt::Simulator sim;
  sim.run(1, [&](int) {
    const uint64_t before = host_ticks();
    costs.restart_host_clock();
    const vt::vtime t0 = sim.now();
    spin_for_ticks(spin);  // no virtual clock scope: this spins the host
    costs.sync();
    c.charged = sim.now() - t0;
    c.bracket = host_ticks() - before;
  });
  return c;
}

// Virtual picoseconds for `ticks` host ticks on a host of `host_ghz` simulated on the 2.5 GHz test profile.
double scaled_ps(uint64_t ticks, double host_ghz) {
  return double(ticks) * clock_calibration().ns_per_tick * 1000.0 * host_ghz / 2.5;
}

TEST(MeasuredCosts, ASegmentCostsItsHostTimeScaledToTheProfilesClock) {
  const uint64_t spin = ns_to_ticks(200'000);
  for (const double host_ghz : {1.25, 2.5, 5.0}) {
    const Charge c = measure(host_ghz, spin);
    EXPECT_GE(double(c.charged) + 1, scaled_ps(c.spun, host_ghz)) << "host " << host_ghz << " GHz";
    EXPECT_LE(double(c.charged), scaled_ps(c.bracket, host_ghz) + 1) << "host " << host_ghz << " GHz";
  }
}

TEST(MeasuredCosts, TableCostsIgnoreHostTime) {
  CostModel costs(test::test_profile("package:1 numa:1 l3:1 core:1 pu:1", {}), Costs::table, {0}, 1.0);
  CostScope scope(&costs);
  vt::vtime charged = 1;
  vt::Simulator sim;
  sim.run(1, [&](int) {
    costs.restart_host_clock();
    const vt::vtime t0 = sim.now();
    spin_for_ticks(ns_to_ticks(200'000));
    costs.sync();
    charged = sim.now() - t0;
  });
  EXPECT_EQ(charged, 0);
}

}  // namespace
