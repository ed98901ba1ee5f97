// hmcs: the hierarchical MCS lock with two levels, an MCS lock per node under a root MCS lock.
//
// Algorithm: M. Chabbi, M. Fagan and J. Mellor-Crummey, "High Performance Locks for Multi-level NUMA Systems",
// PPoPP 2015 (HMCS); LiTL's src/hmcs.c. A waiter queues at its node's MCS lock; the node's first waiter queues the
// node's own queue node at the root; within the node the lock (and the root with it) is passed on up to kLimit times
// in a row, then the root goes to the next node in the root's queue. With two levels this is the cohort construction
// (cohort_base.hpp) with an MCS global lock, C-MCS-MCS: it differs from `cohort` only in that nodes take the root in
// FIFO order instead of racing for it.
// Fairness: FIFO between nodes, FIFO within a node's batch, a batch at most kLimit. Cost: a local hand-off is one
// transfer within the node, a root hand-off one transfer to the next node. On one node it is MCS.
// Leaves out: more than two levels (the paper's hierarchy follows every level of the machine), and the adaptive AHMCS.
#pragma once

#include "alloclab/locks/cohort_base.hpp"
#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/mcs.hpp"

namespace alloclab {

struct HmcsSpinlock : CohortBase<McsSpinlock, 64> {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "hierarchical MCS lock, two levels (Chabbi, Fagan & Mellor-Crummey, PPoPP'15): a per-node MCS lock under a "
          "root MCS lock, passed within the node up to a limit of hand-offs in a row"};

  // Virtual time (vhandoff.hpp): owned at once, after one line transfer. Below the limit, the oldest waiter of the
  // releaser's node (the local pass); otherwise the oldest waiter of another node (the root's next node, whose local
  // head queued there when it began waiting), or with none the releaser's local successor, which takes the root anew.
  static VHandoff vhandoff(const VRelease& r);
};

}  // namespace alloclab
