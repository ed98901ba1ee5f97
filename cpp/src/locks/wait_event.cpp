// WaitEvent on OS threads and on the simulator's fibers (see wait_event.hpp).
#include "alloclab/locks/wait_event.hpp"

#include <chrono>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

bool WaitEvent::wait(const std::function<bool()>& ready, const std::function<bool()>& stopped) {
  if (vt::current_cpu() >= 0) {
    CostModel& m = *current_costs();
    const CostModel::SyncPoint sp(m);
    while (!ready()) {
      if (!queue_.wait()) return false;
      m.restart_host_clock();
    }
    return true;
  }
  std::unique_lock<std::mutex> g(mu_);
  while (!ready()) {
    if (stopped && stopped()) return false;
    cv_.wait_for(g, std::chrono::milliseconds(10));
  }
  return true;
}

void WaitEvent::announce(const std::function<void()>& change) {
  if (vt::current_cpu() >= 0) {
    CostModel& m = *current_costs();
    const CostModel::SyncPoint sp(m);
    change();
    queue_.wake_all(m.now() + m.wakeup());
    return;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    change();
  }
  cv_.notify_all();
}

}  // namespace alloclab
