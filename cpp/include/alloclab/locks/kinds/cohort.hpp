// cohort: C-BO-MCS, the cohort lock of a global test-and-test-and-set lock with backoff and one MCS lock per node.
//
// Algorithm: D. Dice, V. J. Marathe and N. Shavit, "Lock Cohorting: A General Technique for Designing NUMA Locks",
// PPoPP 2012 (section 3, C-BO-MCS); LiTL's src/cbomcs.c. The construction is cohort_base.hpp's with the `spin` kind
// (TtasSpinlock) as the global lock: a node keeps the lock for up to kLimit local hand-offs, then releases the global
// lock, which the local heads of every node (its own next waiter among them) race for with backoff.
// Fairness: none between nodes (the global lock is a race, usually won by the nearest), FIFO within a node's batch.
// Cost: uncontended, an exchange on the node's queue tail and one on the global word to acquire, a store to the
// global word and a compare-and-swap on the queue tail to release (three RMWs and a store; MCS needs two RMWs, the
// floor of one exchange and one store one). Contended, a local hand-off is an MCS pass within the node (two
// transfers: the release loads `next`, then stores into the successor's node); a global one, the release, the race,
// and a local pass.
// On one node it is an MCS lock that every kLimit hand-offs lets its next waiter take a free TTAS word.
// Leaves out: what cohort_base.hpp leaves out, and a fast path: we found none published for C-BO-MCS (the cohort
// papers above, LiTL's cbomcs.c take both levels every time). AHMCS's fast path (hmcs.hpp) is published for HMCS
// only; taking the global word alone when everything is free would be a design of our own, not C-BO-MCS.
#pragma once

#include "alloclab/locks/cohort_base.hpp"
#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/ttas.hpp"

namespace alloclab {

struct CohortSpinlock : CohortBase<TtasSpinlock, 64> {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "C-BO-MCS cohort lock (Dice, Marathe & Shavit, PPoPP'12): a per-node MCS lock under a global backoff lock; "
          "passed within the node up to a limit of hand-offs in a row",
      // Uncontended: the local MCS enqueue (two stores, an exchange), the global exchange and the batch store; the load
      // of next, the global store, the load of next again and the local cmpxchg.
      .lock = {.rmws = 2, .accesses = 3},
      .unlock = {.rmws = 1, .accesses = 3}};
  static constexpr std::string_view kBase = "mcs";  // what it is on a 1-node model

  // Virtual time (vhandoff.hpp): below the limit, the oldest waiter of the releaser's node gets the lock (the local
  // MCS pass with the global lock: owned at once, mcs_pass_at). Otherwise the global word is released and the oldest
  // waiter of each node (its local head) races for it on TtasSpinlock's backoff schedule: the first whose look reads
  // the line wins, woken at its look to pay the transfer and the exchange; a newcomer may take it first.
  static VHandoff vhandoff(const VRelease& r);
};

}  // namespace alloclab
