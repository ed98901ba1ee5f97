// hmcs: the hierarchical MCS lock with two levels, an MCS lock per node under a root MCS lock, and AHMCS's fast path.
//
// Algorithm: M. Chabbi, M. Fagan and J. Mellor-Crummey, "High Performance Locks for Multi-level NUMA Systems",
// PPoPP 2015 (HMCS); LiTL's src/hmcs.c. A waiter queues at its node's MCS lock; the node's first waiter queues the
// node's own queue node at the root; within the node the lock (and the root with it) is passed on up to kLimit times
// in a row, then the root goes to the next node in the root's queue. With two levels this is the cohort construction
// (cohort_base.hpp) with an MCS global lock, C-MCS-MCS: it differs from `cohort` only in that nodes take the root in
// FIFO order instead of racing for it.
// Fast path: M. Chabbi and J. Mellor-Crummey, "Contention-conscious, locality-preserving locks", PPoPP 2016 (AHMCS;
// as in the HMCS code Chabbi contributed to MPICH's zm_hmcs, and LiTL's src/hyshmcs.c): an acquirer that finds its
// node's tail and the root's tail empty (the lock free, nobody waiting) queues its own node at the root directly,
// skipping its node's lock, and releases the root alone. The root is the one lock every holder holds (its node's
// queue node or, on the fast path, its own), so mutual exclusion is the root MCS lock's; the node locks and the batch
// of a node are untouched by a fast-path holder. Its release hands the root to the root queue's next entry: the node
// of the oldest waiter (each node's first waiter queued it there), never a batch.
// Our variant of the root's test: the papers' code reads the root's tail, then exchanges it (and an acquirer that
// lost the race in between waits at the root as a node of its own); here the read and the exchange are one
// compare-and-swap from empty, as LiTL's hyshmcs.c trylock does it. It succeeds only when the root was empty, which
// is when the exchange would have returned no predecessor, so the holder holds the root exactly as there; when it
// fails it has written nothing and the two-level path runs as without a fast path. Measured here, the read just
// before the exchange on the root's line cost about 8 ns an acquisition (kinds alone, 2026-12-01), the
// compare-and-swap nothing over MCS.
// Fairness: FIFO between nodes, FIFO within a node's batch, a batch at most kLimit.
// Cost uncontended (the fast path): a load and one compare-and-swap to acquire, one load and one compare-and-swap
// to release: MCS's two RMWs (instead of the two-level path's exchanges at both levels and two compare-and-swaps).
// Contended: a local hand-off is an MCS pass within the node, a root hand-off one to the next node (two transfers
// each: the release loads `next`, then stores into the successor's node). On one node it is MCS.
// Leaves out: more than two levels (the paper's hierarchy follows every level of the machine); AHMCS's adaptive
// depth (its hysteresis needs per-thread, per-lock memory of the depth last used, which a per-acquisition token on
// the stack does not keep) and its hardware-transactional elision.
#pragma once

#include "alloclab/locks/cohort_base.hpp"
#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/mcs.hpp"

namespace alloclab {

struct HmcsSpinlock : CohortBase<McsSpinlock, 64> {
  using Base = CohortBase<McsSpinlock, 64>;
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "hierarchical MCS lock, two levels (Chabbi, Fagan & Mellor-Crummey, PPoPP'15): a per-node MCS lock under a "
          "root MCS lock, passed within the node up to a limit of hand-offs in a row; AHMCS's fast path (PPoPP'16) "
          "takes the root alone when the lock is free",
      // Uncontended: the fast path: the load of the node's tail, the root node's two stores and the root's cmpxchg; the
      // load of next and the root's cmpxchg.
      .lock = {.rmws = 1, .accesses = 3},
      .unlock = {.rmws = 1, .accesses = 1}};
  static constexpr std::string_view kBase = "mcs";  // what it is on a 1-node model

  struct alignas(64) Token : Base::Token {
    bool at_root;  // the fast path: this acquisition queued its own node at the root, and no node lock
  };

  // The fast path (try_enter), else the two-level path. True if acquired; false: wait() (the two-level wait, Base's:
  // a fast path that fails never waits at the root).
  bool enter(Token& me) noexcept { return try_enter(me) || Base::enter(me); }
  // The fast path alone, never waiting: takes the root alone if the node's queue is empty (a relaxed read: only a
  // guess) and the root's compare-and-swap finds the root free (with the root busy the two-level try fails as well).
  // True if acquired; me.at_root says the same.
  bool try_enter(Token& me) noexcept {
    me.at_root = local_of(me).tail.load(std::memory_order_relaxed) == nullptr && mcs_try_enqueue(global.tail, me, 0);
    return me.at_root;
  }
  // On the fast path: the root's MCS release (one store into the next node's line, or a compare-and-swap when
  // nobody waits); otherwise the two-level release.
  void leave(Token& me) noexcept {
    if (!me.at_root)
      Base::leave(me);
    else if (McsNode* succ = mcs_successor_or_close(global.tail, me))
      mcs_pass(*succ, 1);
  }

  // Virtual time (vhandoff.hpp): owned at once, after an MCS pass (mcs_pass_at). A holder that took the lock free (the
  // fast path, VRelease::taken_free) hands the root to the oldest waiter (its node queued at the root first) and starts
  // no batch. Otherwise, below the limit, the oldest waiter of the releaser's node (the local pass); else the oldest
  // waiter of another node (the root's next node, whose local head queued there when it began waiting), or with none
  // the releaser's local successor, which takes the root anew.
  static VHandoff vhandoff(const VRelease& r);
};

}  // namespace alloclab
