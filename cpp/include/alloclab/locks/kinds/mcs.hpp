// mcs: the MCS queue lock, the queue at the heart of the kernel's qspinlock (kernel/locking/mcs_spinlock.h).
//
// Algorithm: J. M. Mellor-Crummey and M. L. Scott, "Algorithms for Scalable Synchronization on Shared-Memory
// Multiprocessors", ACM TOCS 9(1), 1991; Concurrency Kit's ck_spinlock_mcs; LiTL's src/mcs.c. Each acquirer brings
// a queue node (mcs_node.hpp; here in its LockToken, on its stack, a cache line of its own) and swaps it into the tail;
// with a predecessor it links itself behind it and spins on its own node's flag, which the predecessor sets at release.
// Fairness: FIFO. Cost: one exchange to acquire; release is one CAS when nobody waits, else a load of its own node's
// `next` (the line its successor wrote when it linked in) and one store into the successor's node: two line
// transfers per hand-off, whatever the number of waiters.
// Leaves out: qspinlock's pending bit and locked-byte fast path (the `qspinlock` kind has them).
#pragma once

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/mcs_node.hpp"

namespace alloclab {

struct McsSpinlock {
  static constexpr LockKindTraits kTraits{
      .fifo = true,
      .doc = "MCS queued spinlock (the queue of qspinlock): FIFO, each waiter spins on its own node",
      // Uncontended: the node's two stores and the exchange of tail; the load of next and the cmpxchg of tail.
      .lock = {.rmws = 1, .accesses = 2},
      .unlock = {.rmws = 1, .accesses = 1}};

  // The queue node, one per acquisition, alone on its cache line (its owner spins on `locked`).
  struct alignas(64) Token : McsNode {};

  bool enter(Token& me) noexcept { return mcs_enqueue(tail, me) == nullptr; }
  bool try_enter(Token& me) noexcept { return mcs_try_enqueue(tail, me, 0); }
  // Spin on our own node until the predecessor passes the lock on.
  void wait(Token& me, bool yield) noexcept { mcs_wait(me, yield); }
  // Hand over to the successor (one store into its line), or leave the queue empty.
  void leave(Token& me) noexcept {
    if (McsNode* succ = mcs_successor_or_close(tail, me)) mcs_pass(*succ, 1);
  }
  // Waiters linked behind `holder` (the holder's own token; only while it holds the lock, so nodes are alive).
  uint32_t queued(const Token& holder) const noexcept { return mcs_count_behind(holder); }

  // Virtual time (vhandoff.hpp): FIFO, owned by the oldest waiter at once, after the release's load of `next` and its
  // store into the successor's node (mcs_pass_at), whatever the number of waiters.
  static VHandoff vhandoff(const VRelease& r) {
    const vt::Waiter& next = r.waiters.front();
    VHandoff h;
    h.wake(next.cpu, mcs_pass_at(r, next));
    h.owned = true;
    return h;
  }

  std::atomic<McsNode*> tail{nullptr};
};

}  // namespace alloclab
