// Lock on the simulator's fibers: acquisition, try, release and hand-off in virtual time (see virtual_lock.hpp).
#include <algorithm>
#include <stdexcept>
#include <vector>

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

// What `ops` (a kind's uncontended acquisition or release) cost: its locked RMWs at the profile's atomic_rmw, or its
// plain accesses at line_access where those take longer; the accesses run in the RMWs' shadow (LockOps).
vt::vtime cost(const CostModel& m, LockOps ops) {
  return std::max(ops.rmws * m.op(Op::atomic_rmw), ops.accesses * m.op(Op::line_access));
}

// Takes the free lock `v` for `cpu`, exclusively or (`shared`) as one more reader: `kind`'s uncontended acquisition
// (LockKindTraits::lock), on the lock word, which first comes from its last writer's cache. Call at a sync point. It
// does not wait for reads queued on the line (VirtualLock::line_busy_until concerns hand-offs; ticket.hpp says why a
// free ticket lock has none, ttas.hpp leaves a newcomer's exchange during the storm out).
void take(VirtualLock& v, int cpu, CostModel& m, bool shared, LockKind kind) {
  if (shared) {
    ++v.readers;
  } else {
    v.holder = cpu;
    v.taken_free = true;
  }
  const vt::vtime fetch = v.last >= 0 ? m.transfer(v.last, cpu) : 0;
  v.last = cpu;
  m.pay(cost(m, lock_kinds()[size_t(kind)].lock) + fetch);
}

// Nobody holds it, reader or writer.
bool free(const VirtualLock& v) { return v.holder < 0 && v.readers == 0; }

// A reader takes it at once (down_read's fast path, or its reader lock stealing): no writer holds it, no hand-off
// is pending, and nobody waits or no other reader holds it.
bool readable(const VirtualLock& v) { return v.holder < 0 && !v.handoff && (v.queue.empty() || v.readers == 0); }

}  // namespace

void Lock::vlock(LockToken& t, bool read) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const bool shared = read && read_side_;
  const CostModel::SyncPoint sp(m);
  if (shared ? readable(v) : free(v) && !v.handoff) {
    take(v, self, m, shared, kind_);
    if (stat_) stat_acquired(t, 0, 0, read);
    return;
  }
  if (v.holder == self)
    throw std::logic_error("virtual lock: cpu " + std::to_string(self) + " takes " + v.queue.label() +
                           ", which it holds already (a self-deadlock)");
  const uint64_t contended_at = stat_ ? instrument_ticks() : 0;
  VWaitState& ws = domain_->vwait_state(self);
  ws = {m.now(), 0, shared};
  bool lost = false;
  for (;;) {
    // A reader-writer kind's writer that lost keeps its place at the head of the wait list.
    if (!(lost && read_side_ ? v.queue.wait_first() : v.queue.wait())) throw vt::Stopped();
    m.restart_host_clock();       // the host time it spent blocked is not its work
    if (shared) break;            // granted the read side by the release that woke it (VHandoff::readers)
    if (v.holder == self) break;  // handed over at the wake-up time
    if (free(v)) {                // a race it won: the lock is still free when it looks
      take(v, self, m, false, kind_);
      break;
    }
    // Another CPU got there first: wait again (its spin budget and backoff run on from when it began).
    ++ws.lost;
    lost = true;
    // rwsem_try_write_lock: a writer that has waited RWSEM_WAIT_TIMEOUT asks for the next release to be its own.
    if (read_side_ && m.now() - ws.began > Rwsem::kWaitTimeoutNs * vt::kNanosecond) v.handoff = true;
  }
  if (v.holder == self) v.handoff = false;
  if (stat_) stat_acquired(t, contended_at, instrument_ticks(), read);
}

bool Lock::vtrylock(LockToken& t, bool read) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const bool shared = read && read_side_;
  const CostModel::SyncPoint sp(m);
  if (!(shared ? readable(v) : free(v) && !v.handoff)) {
    // A failed try reads the word (the trylock kinds read before they write): the line comes to this CPU.
    m.pay(m.op(Op::line_access) + (v.last >= 0 ? m.transfer(v.last, self) : 0));
    return false;
  }
  take(v, self, m, shared, kind_);
  if (stat_) stat_acquired(t, 0, 0, read);
  return true;
}

void Lock::vunlock(LockToken& t, bool read) {
  CostModel& m = *domain_->costs();
  VirtualLock& v = *vlock_;
  const int self = vt::current_cpu();
  const bool shared = read && read_side_;
  if (shared ? v.readers == 0 || v.holder >= 0 : v.holder != self)
    throw std::logic_error("virtual lock: cpu " + std::to_string(self) + " releases " + v.queue.label() +
                           (shared ? "'s read side, held by no reader" : ", held by cpu " + std::to_string(v.holder)));
  const CostModel::SyncPoint sp(m);
  if (stat_) stat_released(t, read);  // the hold ends now: lock_stat's read is free (instrument_ticks())
  const vt::vtime now = m.now();
  // up_read is an RMW on the count word, which the other readers' RMWs may have taken away since down_read.
  const vt::vtime fetch = shared && v.last >= 0 ? m.transfer(v.last, self) : 0;
  if (shared)
    --v.readers;
  else
    v.holder = -1;
  v.last = self;
  if (!free(v)) {
    // Other readers still hold it: nobody to wake.
  } else if (v.queue.empty()) {
    v.batch = 0;  // released to nobody: a NUMA-aware kind's batch ends
  } else {
    VRelease r{self, now, v.queue.waiters(), m, domain_->vwait_states(), v.batch, v.released_at};
    r.handoff = v.handoff;
    r.taken_free = v.taken_free;
    r.line_busy_until = v.line_busy_until;
    const VHandoff h = handoff(kind_, r);
    v.batch = h.batch ? v.batch + 1 : 0;
    v.line_busy_until = std::max(v.line_busy_until, h.line_busy_until);
    if (h.readers > 0) {
      // rwsem_mark_wake: the first h.readers reading waiters hold the read side from now on (writers stay queued).
      std::vector<int> granted;
      for (const vt::Waiter& w : v.queue.waiters())
        if (domain_->vwait_states()[size_t(w.cpu)].read && granted.size() < h.readers) granted.push_back(w.cpu);
      v.readers += uint32_t(granted.size());
      v.handoff = false;
      for (const int cpu : granted) v.queue.wake(cpu, h.wakes[0].at);
    } else {
      if (h.owned) {
        v.holder = h.wakes[0].cpu;
        v.last = h.wakes[0].cpu;
        v.handoff = false;
        v.taken_free = false;
      }
      // Latest first: a CPU woken at the release time itself may come before this one (a lower id), and a wake-up
      // must come from the first CPU in virtual time.
      const size_t latest = h.nr_wakes == 2 && h.wakes[0].at < h.wakes[1].at ? 1 : 0;
      for (size_t i = 0; i < size_t(h.nr_wakes); ++i) v.queue.wake(h.wakes[latest ^ i].cpu, h.wakes[latest ^ i].at);
    }
  }
  v.released_at = now;
  m.pay(cost(m, lock_kinds()[size_t(kind_)].unlock) + fetch);  // the kind's release, on the word it holds
}

uint32_t Lock::vqueued() const {
  if (!lock_kinds()[size_t(kind_)].fifo) return 0;
  uint32_t n = 0;
  for (auto it = vlock_->queue.waiters().begin(); it != vlock_->queue.waiters().end(); ++it) ++n;
  return n;
}

}  // namespace alloclab
