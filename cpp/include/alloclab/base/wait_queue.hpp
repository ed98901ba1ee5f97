// WaitQueue: where a virtual CPU blocks until another wakes it, in virtual time.
//
// Models: what a sleeping lock waiter, a completion or a queued spinner waits on. A virtual CPU that waits stops
// running and is not charged; the CPU that wakes it says when: the waiter's clock becomes max(its own, `at`), so a
// hand-off costs what the waker's model says (release time + transfer, a wake-up latency, ...) and never moves a
// clock back. The queue keeps its waiters in arrival order with their CPU and the virtual time they blocked at, so a
// lock kind can wake the oldest (FIFO), every waiter, or the one it chooses (the nearest spinner, the same node
// first, ...). wait() and wake() are sync-point operations: they must run while no runnable CPU comes before the
// caller (right after Simulator::sync() always is such a point), so that checking a lock's state and then waiting
// happen at one virtual instant and no wake-up is lost; otherwise they throw std::logic_error.
// Leaves out: timeouts (use Simulator::block_until for sleeping, wait_until for polling), priorities.
#pragma once

#include <boost/intrusive/list.hpp>
#include <string>
#include <utility>

#include "alloclab/base/vclock.hpp"

namespace alloclab::vt {

class WaitQueue;

// One waiting virtual CPU: a node the simulator owns (one per CPU) and links into the queue it waits on.
struct Waiter : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
  int cpu = -1;                      // the virtual CPU that waits
  vtime since = 0;                   // its clock when it started waiting
  const WaitQueue* queue = nullptr;  // the queue it waits on; nullptr when not waiting or the queue is gone
};

using WaiterList = boost::intrusive::list<Waiter, boost::intrusive::constant_time_size<false>>;

class WaitQueue {
 public:
  // `label` names what is waited for in error messages ("zone->lock", "cma_mutex", "padata helpers").
  explicit WaitQueue(std::string label) : label_(std::move(label)) {}
  // Waiters still queued are unlinked and can no longer be woken (a deadlock names them as waiting on a destroyed
  // queue); destroy a queue only when nobody waits on it.
  ~WaitQueue();
  WaitQueue(const WaitQueue&) = delete;
  WaitQueue& operator=(const WaitQueue&) = delete;

  // Blocks the calling virtual CPU at the tail of the queue until a wake(): returns true. Returns false, without
  // waiting or after waiting, when the run is stopped (Simulator::stopped()). Call at a sync point.
  [[nodiscard]] bool wait();
  // The same at the head of the queue: for a woken waiter that lost its race and keeps its place (the kernel's rwsem
  // leaves a woken writer on its wait list until it gets the lock).
  [[nodiscard]] bool wait_first();

  // Wakes `w`, one of this queue's waiters (from waiters()), at virtual time `at`: its clock becomes max(its clock,
  // at), it becomes runnable and its wait() returns true. Call at a sync point. std::invalid_argument ("waiter: ...")
  // when `w` does not wait on this queue.
  void wake(const Waiter& w, vtime at);
  // The same for the waiter on virtual CPU `cpu`; std::invalid_argument ("cpu: ...") when it does not wait here.
  void wake(int cpu, vtime at);
  // Wakes the oldest waiter; returns its CPU, or -1 when nobody waits.
  int wake_one(vtime at);
  // Wakes every waiter, oldest first; returns how many.
  int wake_all(vtime at);

  // The waiters, oldest first (cpu, since). Valid until the next wait or wake on this queue.
  const WaiterList& waiters() const noexcept { return waiters_; }
  bool empty() const noexcept { return waiters_.empty(); }
  const std::string& label() const noexcept { return label_; }

 private:
  friend class Simulator;
  std::string label_;
  WaiterList waiters_;
};

}  // namespace alloclab::vt
