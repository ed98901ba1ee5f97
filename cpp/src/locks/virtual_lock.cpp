// Lock on the simulator's fibers: acquisition, try, release and hand-off in virtual time (see virtual_lock.hpp).
#include <array>
#include <stdexcept>
#include <utility>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/locks/lock.hpp"

namespace alloclab {

namespace {

// The lock kind's hand-off rule at a release.
VHandoff handoff(LockKind k, const VRelease& r) {
  switch (k) {
#define ALLOCLAB_KIND_HANDOFF(name, Type) \
  case LockKind::name: return Type::vhandoff(r);
    ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_HANDOFF)
#undef ALLOCLAB_KIND_HANDOFF
  }
  __builtin_unreachable();
}

// Takes the free lock `v` for `cpu`: one atomic RMW on the lock word, which first comes from its last writer's
// cache. Call at a sync point.
void take(VirtualLock& v, int cpu, CostModel& m) {
  v.holder = cpu;
  const vt::vtime fetch = v.last >= 0 ? m.transfer(v.last, cpu) : 0;
  v.last = cpu;
  m.pay(m.op(Op::atomic_rmw) + fetch);
}

}  // namespace

void Lock::vlock(LockToken& t) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const CostModel::SyncPoint sp(m);
  if (v.holder < 0) {
    take(v, self, m);
    if (stat_) stat_acquired(t, 0, 0);
    return;
  }
  if (v.holder == self)
    throw std::logic_error("virtual lock: cpu " + std::to_string(self) + " takes " + v.queue.label() +
                           ", which it holds already (a self-deadlock)");
  const uint64_t contended_at = clock_ticks();
  domain_->vwait_state(self) = {m.now()};
  for (;;) {
    if (!v.queue.wait()) throw vt::Stopped();
    m.restart_host_clock();       // the host time it spent blocked is not its work
    if (v.holder == self) break;  // handed over at the wake-up time
    if (v.holder < 0) {           // a race it won: the lock is still free when it looks
      take(v, self, m);
      break;
    }
    // Another CPU got there first: wait again (its spin budget and backoff run on from when it began).
    ++domain_->vwait_state(self).lost;
  }
  if (stat_) stat_acquired(t, contended_at, clock_ticks());
}

bool Lock::vtrylock(LockToken& t) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const CostModel::SyncPoint sp(m);
  if (v.holder >= 0) {
    // A failed try reads the word (the trylock kinds read before they write): the line comes to this CPU.
    m.pay(m.op(Op::line_access) + (v.last >= 0 ? m.transfer(v.last, self) : 0));
    return false;
  }
  take(v, self, m);
  if (stat_) stat_acquired(t, 0, 0);
  return true;
}

void Lock::vunlock(LockToken& t) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const CostModel::SyncPoint sp(m);
  if (v.holder != self)
    throw std::logic_error("virtual lock: cpu " + std::to_string(self) + " releases " + v.queue.label() +
                           ", held by cpu " + std::to_string(v.holder));
  if (stat_) stat_released(t);
  const vt::vtime now = m.now();
  v.holder = -1;
  v.last = self;
  if (v.queue.empty()) {
    v.batch = 0;  // released to nobody: a NUMA-aware kind's batch ends
  } else {
    const VHandoff h =
        handoff(kind_, VRelease{self, now, v.queue.waiters(), m, domain_->vwait_states(), v.batch, v.released_at});
    v.batch = h.batch ? v.batch + 1 : 0;
    if (h.owned) {
      v.holder = h.wakes[0].cpu;
      v.last = h.wakes[0].cpu;
    }
    // Latest first: a CPU woken at the release time itself may come before this one (a lower id), and a wake-up
    // must come from the first CPU in virtual time.
    std::array<VHandoff::Wake, 2> wakes = h.wakes;
    if (h.nr_wakes == 2 && wakes[0].at < wakes[1].at) std::swap(wakes[0], wakes[1]);
    for (int i = 0; i < h.nr_wakes; ++i) v.queue.wake(wakes[size_t(i)].cpu, wakes[size_t(i)].at);
  }
  v.released_at = now;
  m.pay(m.op(Op::atomic_rmw));  // the release's store (or RMW) on the word it holds
}

uint32_t Lock::vqueued() const {
  if (!lock_kinds()[size_t(kind_)].fifo) return 0;
  uint32_t n = 0;
  for (auto it = vlock_->queue.waiters().begin(); it != vlock_->queue.waiters().end(); ++it) ++n;
  return n;
}

}  // namespace alloclab
