// WaitEvent: a condition that workers wait for and another worker announces.
//
// Models: the kernel's completion and wait_event()/wake_up() pairs where model code waits outside a lock (padata's
// helpers waiting for their work, the caller's wait_for_completion()). On OS threads the waiters sleep on a
// condition variable, looking at a `stopped` predicate every 10 ms; on the simulator's fibers they block on a
// virtual wait queue, and an announcement wakes each of them one futex wake-up later (profile's wakeup_ns.futex).
// Leaves out: exclusive waits (wake_up wakes one), timeouts.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "alloclab/base/wait_queue.hpp"

namespace alloclab {

class WaitEvent {
 public:
  // `label` names what is waited for (deadlock messages in a virtual-clock run).
  explicit WaitEvent(std::string label) : queue_(std::move(label)) {}

  // Waits until `ready()` holds (called with the event's lock held, so it may read what announce() changes).
  // Returns true; false when `stopped` (may be empty) said so first, or the virtual-clock run was stopped.
  bool wait(const std::function<bool()>& ready, const std::function<bool()>& stopped);
  // Runs `change` under the event's lock, then wakes every waiter.
  void announce(const std::function<void()>& change);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  vt::WaitQueue queue_;  // virtual-clock waiters
};

}  // namespace alloclab
