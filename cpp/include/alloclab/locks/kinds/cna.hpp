// cna: the compact NUMA-aware lock, an MCS lock whose releaser prefers a waiter of its own node.
//
// Algorithm: D. Dice and A. Kogan, "Compact NUMA-aware Locks", EuroSys 2019, as the Linux CNA series grafts it into
// qspinlock's slow path (A. Kogan, "locking/qspinlock: Introduce CNA into the slow path of qspinlock",
// kernel/locking/qspinlock_cna.h, v1-v15, 2019-2021). The lock is one MCS tail word; waiters form the main queue.
// At a release the holder scans the main queue for the first waiter of its own node; the waiters it passes over move
// to the end of a secondary queue, whose head rides along in the `locked` value handed to the successor (1: no
// secondary queue). With no local waiter, or after kThreshold local hand-offs in a row, the secondary queue is
// spliced back in front of the main queue and its head gets the lock. A waiter's node is its worker's model node.
// Fairness: not FIFO: other nodes wait while a node keeps the lock, at most kThreshold hand-offs. Cost: one line
// transfer per hand-off, mostly within a node, plus the releaser's reads of the waiter nodes it passes over (in its
// critical path). On one node it is MCS.
// Leaves out: the series' qspinlock word around the queue (pending bit, locked byte: see `qspinlock`), its per-CPU
// nodes (nodes live in the acquirer's token here), its later time-based threshold and priority (real-time) waiters.
#pragma once

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/mcs_node.hpp"

namespace alloclab {

struct CnaSpinlock {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "compact NUMA-aware MCS lock (Dice & Kogan, EuroSys'19; the Linux CNA qspinlock series): the releaser hands "
          "over to the first waiter of its own node, moving the others to a secondary queue"};
  // Local hand-offs in a row before the secondary queue goes first: the series' intra-node threshold (1 << 16, a
  // probability there, a count here so that runs are deterministic).
  static constexpr uint32_t kThreshold = 1u << 16;

  // struct cna_node: an MCS node (locked: 0 waiting, 1 passed with no secondary queue, else the secondary queue's
  // head), the waiter's node, and for a secondary queue's head the queue's tail.
  struct alignas(64) Token : McsNode {
    int32_t numa_node;  // set by the Lock before enter()
    Token* sec_tail;    // valid in the secondary queue's head
  };

  bool enter(Token& me) noexcept {
    if (mcs_enqueue(tail, me)) return false;
    me.locked().store(1, std::memory_order_relaxed);  // no secondary queue
    return true;
  }
  bool try_enter(Token& me) noexcept { return mcs_try_enqueue(tail, me, 1); }  // 1: no secondary queue
  void wait(Token& me, bool yield) noexcept { mcs_wait(me, yield); }
  void leave(Token& me) noexcept;  // cna.cpp
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp): owned at once. Below kThreshold local hand-offs in a row, the oldest waiter of the
  // releaser's node gets it (a local batch), after the releaser's reads of the other-node waiters it passes over that
  // queued since the previous release (each waiter's node is read once, when it is moved to the secondary queue) and
  // one transfer; otherwise (none local, or the threshold reached) the oldest waiter, the secondary queue's head.
  static VHandoff vhandoff(const VRelease& r);

  std::atomic<McsNode*> tail{nullptr};
  uint32_t local_handoffs = 0;  // hand-offs in a row within one node (the holder's only)
};

}  // namespace alloclab
