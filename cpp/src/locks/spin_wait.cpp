// Spin-waits in virtual time (see spin_wait.hpp).
#include "alloclab/locks/spin_wait.hpp"

#include "alloclab/base/scheduler.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

void virtual_spin_until(const std::function<bool()>& pred, std::string_view label) {
  CostModel& m = *current_costs();
  const CostModel::SyncPoint sp(m);  // the host time it spent waiting is not its work
  if (!vt::Simulator::current()->wait_until(pred, m.spin_step(), label)) throw vt::Stopped();
}

}  // namespace alloclab
