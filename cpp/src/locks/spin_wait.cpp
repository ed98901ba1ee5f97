// Spin-waits in virtual time (see spin_wait.hpp).
#include "alloclab/locks/spin_wait.hpp"

#include "alloclab/base/scheduler.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

void virtual_spin_until(const std::function<bool()>& pred, std::string_view label) {
  CostModel& m = *current_costs();
  m.sync();
  if (!vt::Simulator::current()->wait_until(pred, m.spin_step(), label)) throw vt::Stopped();
  m.restart_host_clock();
}

}  // namespace alloclab
