// cna: the compact NUMA-aware lock as the Linux CNA series builds it: qspinlock's word, fast path and pending path,
// with CNA's queue policy in the slow path.
//
// Algorithm: D. Dice and A. Kogan, "Compact NUMA-aware Locks", EuroSys 2019, as A. Kogan grafts it into qspinlock
// ("locking/qspinlock: Introduce CNA into the slow path of qspinlock", kernel/locking/qspinlock_cna.h, v15, 2021):
// the kernel compiles qspinlock.c's slow path a second time with CNA's hooks; here the one slow path
// (qspinlock_slowpath.hpp) is instantiated with CnaQueue. The word, the fast path (one cmpxchg), the pending bit and
// the release (one byte store) are qspinlock's (kinds/qspinlock.hpp). The per-CPU queue nodes are CnaNode, an MCS
// node with the waiter's node and its own tail code (struct cna_node over struct qnode). Waiters queue in the main
// queue; the head, once it holds the lock, passes the head role (cna_lock_handoff): to the first waiter of its own
// node, moving the waiters before it to the end of a secondary queue; the `locked` value it hands over is 1 (no
// secondary queue) or the tail code of the secondary queue's last node, the queue being circular (its tail's next is
// its head). With no local waiter, or after kThreshold local passes in a row, the secondary queue goes in front of
// the main queue and its head gets the head role. A head alone in the main queue with a secondary queue makes the
// secondary queue the main one (cna_try_clear_tail: the word's tail becomes the secondary tail) instead of clearing
// the tail. A waiter's node is its worker's model node (the Token's numa_node, which the Lock sets, copied into the
// per-CPU node by init_node).
// Fairness: not FIFO: the pending waiter first, then the head the previous head chose; other nodes wait while a node
// keeps the lock, at most kThreshold passes. Cost: as qspinlock uncontended; with contention one line transfer per
// hand-off, mostly within a node, plus the head's reads of the waiter nodes it passes over, after it took the word
// and before its critical section. On one node it is qspinlock.
// Leaves out: the series' cna_wait_head_or_lock, which moves at most one remote waiter per head while the head spins
// on the word (cna_order_queue, the next waiter inheriting the head's node), so that the queue is sorted off the
// critical path: here the head scans the whole main queue when it passes the head role, the paper's policy; the
// series' time-based threshold (10 ms, a count here so that runs are deterministic), its priority waiters
// (irq/nmi/real-time tasks never moved) and its shuffle reduction (a random skip of the scan).
#pragma once

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/qspinlock.hpp"
#include "alloclab/locks/mcs_node.hpp"

namespace alloclab {

// struct cna_node: an MCS node (locked: 0 waiting, 1 head with no secondary queue, else the secondary queue's tail
// code), the waiter's node, its own tail code, and as the head the local passes in a row that made it the head.
struct CnaNode : McsNode {
  int32_t numa_node;
  uint32_t encoded_tail;    // encode_tail(cpu, idx): as the word's tail and as a `locked` value names this node
  uint32_t local_handoffs;  // set by the passer before the pass (as the series carries start_time to the next head)
};

// qspinlock_cna.h's hooks into the slow path (QueuedSpinlock's queue policy).
struct CnaQueue {
  struct Token {
    int32_t numa_node;  // set by the Lock before enter()
  };
  using Node = CnaNode;
  // Local passes in a row before the secondary queue goes first: the series' intra-node threshold (1 << 16 in its
  // early versions, a probability there, a count here so that runs are deterministic).
  static constexpr uint32_t kThreshold = 1u << 16;

  // cna_init_node: the node's model node and its tail code; no local passes yet.
  static void init_node(CnaNode& node, const Token& t, uint32_t tail) noexcept {
    node.numa_node = t.numa_node;
    node.encoded_tail = tail;
    node.local_handoffs = 0;
  }
  // cna_try_clear_tail (cna.cpp): with no secondary queue, qspinlock's; otherwise the secondary queue becomes the main
  // one (the word's tail its tail, its head the queue head). True if the lock is ours and the queue settled.
  static bool try_clear_tail(std::atomic_ref<uint32_t> word, uint32_t v, CnaNode& node) noexcept;
  // cna_lock_handoff (cna.cpp): the head, holding the lock, with `next` linked behind it, passes the head role to the
  // first waiter of its node (moving those before it to the secondary queue), or flushes the secondary queue.
  static void lock_handoff(CnaNode& node, CnaNode& next) noexcept;
};

struct CnaSpinlock : QueuedSpinlock<CnaQueue> {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "compact NUMA-aware lock (Dice & Kogan, EuroSys'19) as the Linux CNA series builds it: qspinlock's word "
          "and pending bit, and a queue head that passes on to the first waiter of its own node, moving the "
          "others to a secondary queue",
      // Uncontended: qspinlock's: the cmpxchg; the store of the locked byte.
      .lock = {.rmws = 1, .accesses = 0},
      .unlock = {.rmws = 0, .accesses = 1}};
  static constexpr std::string_view kBase = "qspinlock";  // what it is on a 1-node model

  uint32_t queued(const Token&) const noexcept { return 0; }  // not FIFO

  // Virtual time (vhandoff.hpp): owned at once. The pending waiter first: the oldest waiter, if nobody waited when it
  // came (it queued after the previous release), took the pending bit and gets the word after one transfer, whatever
  // its node. Otherwise the queue head, whom the releaser chose as it passed the head role: below kThreshold local
  // passes in a row, the oldest waiter of the releaser's node (a local batch), after the releaser's reads of the
  // other-node waiters it passes over that queued since the previous release (each waiter's node is read once, when
  // it moves to the secondary queue) and one transfer; otherwise (none local, or the threshold reached) the oldest
  // waiter, the secondary queue's head. The releaser's reads happen after it took the word, before its critical
  // section; the model charges them to the hand-off, the same time between two hand-offs. It treats every releaser
  // as a head that chose: one that took the word by the pending bit or the fast path chose nobody, and its queue's
  // head goes next whatever its node.
  static VHandoff vhandoff(const VRelease& r);
};
extern template void QueuedSpinlock<CnaQueue>::wait(Token&, bool) noexcept;

}  // namespace alloclab
