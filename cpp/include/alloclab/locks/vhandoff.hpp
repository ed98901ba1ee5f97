// Hand-offs in virtual time: what a lock kind decides when its holder releases it with waiters queued.
//
// Models: the moment of a release as each primitive's hardware protocol plays it out. In a virtual-clock run a
// waiting CPU blocks on the lock's wait queue instead of spinning (virtual_lock.hpp); at a release the kind's
// vhandoff() (in its own file under kinds/, beside its real code) says whom to wake, at which virtual time, and
// whether the lock is theirs already (a FIFO hand-off: newcomers queue behind them) or free until they retry (a
// race: a newcomer who gets there first takes it, and the woken waiter queues again). The rules are built from the
// profile's costs only: line transfers by distance, PAUSE, the futex wake-up.
// Leaves out: spinners' reads between releases (they hit their own cached copy and cost nothing to others), the
// releaser's futex_wake system call, MESI states other than owned/shared.
#pragma once

#include <algorithm>
#include <array>
#include <span>

#include "alloclab/base/wait_queue.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

// Per virtual CPU, about the acquisition it waits for.
struct VWaitState {
  vt::vtime began = 0;  // when it began waiting: its spin budget and backoff run from here, across lost races
  uint32_t lost = 0;    // races it was woken for and lost to another CPU since it began (a starving waiter's sign)
  bool read = false;    // it waits for a reader-writer kind's read side (Lock::lock_read)
};

// What a kind sees at a release.
struct VRelease {
  int releaser;                        // the virtual CPU releasing
  vt::vtime now;                       // the release time
  const vt::WaiterList& waiters;       // the queued waiters, oldest first (never empty)
  const CostModel& costs;              // the run's profile
  std::span<const VWaitState> states;  // indexed by virtual CPU
  uint32_t batch = 0;              // hand-offs in a row the kind kept within one node (VHandoff::batch), before this
  vt::vtime previous_release = 0;  // the lock's release before this one (0: none)
  bool handoff = false;            // rwsem: the head waiter has set RWSEM_FLAG_HANDOFF (VirtualLock::handoff)
  bool taken_free = false;         // the releaser took the lock free, not from a hand-off (VirtualLock::taken_free):
                                   // hmcs's fast path
  vt::vtime line_busy_until = 0;   // the lock word's line still serves reads queued at an earlier release until then
                                   // (VirtualLock::line_busy_until; 0: none queued)

  vt::vtime transfer_to(int cpu) const { return costs.transfer(releaser, cpu); }
  int node_of(int cpu) const { return costs.node_of(cpu); }
  bool local(const vt::Waiter& w) const { return node_of(w.cpu) == node_of(releaser); }
};

// What a kind decides: at most two wake-ups (a spinner and a sleeper), or a reader-writer kind's grant of the read
// side to its queued readers.
struct VHandoff {
  struct Wake {
    int cpu;
    vt::vtime at;
  };
  std::array<Wake, 2> wakes{};
  int nr_wakes = 0;
  bool owned = false;    // the lock belongs to wakes[0].cpu from the release on (FIFO kinds)
  bool batch = false;    // NUMA-aware kinds: this hand-off continues the batch within one node (the next release sees
                         // VRelease::batch + 1); otherwise the batch restarts at 0
  uint32_t readers = 0;  // a reader-writer kind: the first `readers` waiters for the read side (oldest first, writers
                         // skipped) hold it from the release on, each woken at wakes[0].at (nr_wakes is 1)
  vt::vtime line_busy_until = 0;  // a kind whose waiters re-read the word (ticket, TTAS): when the line has served
                                  // the last of this release's re-reads; a later write to the word queues behind them

  void wake(int cpu, vt::vtime at) { wakes[size_t(nr_wakes++)] = {cpu, at}; }
};

// The waiter whose look at the lock lands first: probe(w) is when waiter w next reads the lock word (it then pays
// the line's transfer from the releaser); the earliest probe + transfer wins, ties by CPU id. Returns nullptr when
// probe() rules every waiter out (returns a negative time).
template <class Probe>
const vt::Waiter* first_to_look(const VRelease& r, Probe&& probe) {
  const vt::Waiter* best = nullptr;
  vt::vtime best_at = 0;
  for (const vt::Waiter& w : r.waiters) {
    const int64_t p = probe(w);
    if (p < 0) continue;
    const vt::vtime at = vt::vtime(p) + r.transfer_to(w.cpu);
    if (!best || at < best_at || (at == best_at && w.cpu < best->cpu)) {
      best = &w;
      best_at = at;
    }
  }
  return best;
}

// When waiter `w` holds an MCS queue's lock that the release passes to it (mcs_spin_unlock): the releaser first
// loads its node's `next`, which `w` wrote when it linked in behind it (the line comes from w's cache), then stores
// into w's node, on which w spins (the line goes back): two transfers between them. qspinlock's queue head loads and
// prefetches `next` while it waits, off the hand-off (W. Long, "locking/qspinlock: Prefetch the next node cacheline",
// v4.5, 81b5598665a2: loading the next CPU's node "can be expensive and add to the latency of locking operation").
inline vt::vtime mcs_pass_at(const VRelease& r, const vt::Waiter& w) {
  return r.now + r.costs.transfer(w.cpu, r.releaser) + r.transfer_to(w.cpu);
}

// The oldest waiter on `node`, nullptr when none waits there.
inline const vt::Waiter* oldest_on_node(const VRelease& r, int node) {
  for (const vt::Waiter& w : r.waiters)
    if (r.node_of(w.cpu) == node) return &w;
  return nullptr;
}

// A test-and-test-and-set spinner's next look at the lock word at or after the release: it began waiting at `began`
// and looks 1, 2, 4, ... `max_backoff` spin steps apart (TtasSpinlock's backoff, also the cohort lock's global).
inline vt::vtime ttas_next_look(const VRelease& r, vt::vtime began, uint32_t max_backoff) {
  const vt::vtime step = r.costs.spin_step();
  vt::vtime t = began;
  for (uint32_t backoff = 1; t < r.now && backoff < max_backoff; backoff *= 2) t += step * backoff;
  if (t < r.now) t += (r.now - t + step * max_backoff - 1) / (step * max_backoff) * (step * max_backoff);
  return t;
}

// Sleeping locks (the futex mutex, pthread_mutex): a waiter spins for `spin_steps` PAUSEs after it began waiting,
// then sleeps. At a release, the spinner that looks first races for the lock (woken at its next probe), and the
// oldest sleeper is woken one futex wake-up later (FUTEX_WAKE of one, as the mutex's release does when its word
// says a waiter sleeps). Neither owns the lock: both retry, and a newcomer may win.
inline VHandoff spin_then_sleep(const VRelease& r, int spin_steps) {
  VHandoff h;
  const vt::vtime step = r.costs.spin_step();
  const vt::vtime window = step * vt::vtime(spin_steps);
  const auto spinning = [&](const vt::Waiter& w) { return r.now < r.states[size_t(w.cpu)].began + window; };
  const auto next_probe = [&](const vt::Waiter& w) {
    const vt::vtime began = r.states[size_t(w.cpu)].began;
    return began + (r.now - began + step - 1) / step * step;
  };
  if (const vt::Waiter* s =
          first_to_look(r, [&](const vt::Waiter& w) { return spinning(w) ? int64_t(next_probe(w)) : int64_t(-1); }))
    h.wake(s->cpu, next_probe(*s));
  for (const vt::Waiter& w : r.waiters)
    if (!spinning(w)) {
      h.wake(w.cpu, r.now + r.costs.wakeup());
      break;
    }
  return h;
}

}  // namespace alloclab
