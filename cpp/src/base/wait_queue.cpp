// WaitQueue: the queue's own checks; blocking and waking are the simulator's (Simulator::block, Simulator::wake).
#include "alloclab/base/wait_queue.hpp"

#include <stdexcept>

#include "alloclab/base/scheduler.hpp"

namespace alloclab::vt {

WaitQueue::~WaitQueue() {
  for (Waiter& w : waiters_) w.queue = nullptr;
  waiters_.clear();
}

bool WaitQueue::wait() { return Simulator::on_a_fiber().block(*this); }

bool WaitQueue::wait_first() { return Simulator::on_a_fiber().block(*this, true); }

void WaitQueue::wake(const Waiter& w, vtime at) {
  Simulator& sim = Simulator::on_a_fiber();
  if (w.queue != this || sim.waiter_of(w.cpu) != &w)
    throw std::invalid_argument("waiter: cpu " + std::to_string(w.cpu) + " does not wait on '" + label_ + "'");
  sim.wake(*this, w, at);
}

void WaitQueue::wake(int cpu, vtime at) {
  Simulator& sim = Simulator::on_a_fiber();
  const Waiter* w = sim.waiter_of(cpu);
  if (!w || w->queue != this)
    throw std::invalid_argument("cpu: " + std::to_string(cpu) + " does not wait on '" + label_ + "'");
  sim.wake(*this, *w, at);
}

int WaitQueue::wake_one(vtime at) {
  if (waiters_.empty()) return -1;
  const int cpu = waiters_.front().cpu;
  wake(waiters_.front(), at);
  return cpu;
}

int WaitQueue::wake_all(vtime at) {
  int woken = 0;
  for (; !waiters_.empty(); ++woken) wake(waiters_.front(), at);
  return woken;
}

}  // namespace alloclab::vt
