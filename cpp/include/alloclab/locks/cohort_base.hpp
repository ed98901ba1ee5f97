// CohortBase: the lock-cohorting construction, a global lock and one MCS queue per NUMA node.
//
// Models: D. Dice, V. J. Marathe and N. Shavit, "Lock Cohorting: A General Technique for Designing NUMA Locks",
// PPoPP 2012 (C-BO-MCS), and its two-level reading in M. Chabbi, M. Fagan and J. Mellor-Crummey, "High Performance
// Locks for Multi-level NUMA Systems", PPoPP 2015 (HMCS): a waiter first takes its node's local MCS lock; the local
// lock's holder takes the global lock (the first of a node's batch) or inherits it from its local predecessor. At a
// release, a holder with a local successor passes it the local lock *with* the global one, up to kLimit hand-offs in
// a row; otherwise it releases the global lock, then passes the local lock alone (its successor must take the global
// lock itself). The global lock must be thread-oblivious (released by another thread than the one that took it):
// `Global` is a kind whose token belongs to the node (a TTAS word for C-BO-MCS; the node's own queue node at the
// root for HMCS). A waiter's node is its worker's model node, folded modulo kMaxNodes. Uncontended, an acquisition
// takes both levels and its release gives both back (hmcs.hpp adds AHMCS's fast path, which takes the root alone).
// Leaves out: more than two levels, and the cohort detection of locks whose local queue cannot tell (MCS can).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "alloclab/locks/mcs_node.hpp"
#include "alloclab/topology/machine_profile.hpp"

namespace alloclab {

template <class Global, uint32_t kLimit>
struct CohortBase {
  static constexpr int kMaxNodes = MachineProfile::kMaxNodes;
  static constexpr uint32_t kBatchLimit = kLimit;  // local hand-offs in a row, at most
  // What a local predecessor passes (McsNode::locked): the local lock alone, or the global lock with it. A local
  // head that queued at the global lock in enter() marks its own node kGlobalQueued.
  static constexpr uintptr_t kAcquireGlobal = 1;
  static constexpr uintptr_t kWithGlobal = 2;
  static constexpr uintptr_t kGlobalQueued = 3;

  struct alignas(64) Token : McsNode {
    int32_t numa_node;  // set by the Lock before enter()
  };
  // One node's cohort: its local MCS queue, its batch and its hold on the global lock.
  struct alignas(64) Local {
    std::atomic<McsNode*> tail{nullptr};
    uint32_t batch = 0;                   // local hand-offs since the node took the global lock (its local holder's)
    typename Global::Token global_token;  // how the node holds the global lock
  };

  CohortBase() : locals(new Local[kMaxNodes]) {}

  // Takes the local lock, and the global one when the local queue was empty and it is free; false: wait().
  bool enter(Token& me) noexcept {
    Local& l = local_of(me);
    if (mcs_enqueue(l.tail, me)) return false;
    if (global.enter(l.global_token)) {
      l.batch = 0;
      return true;
    }
    me.locked().store(kGlobalQueued, std::memory_order_relaxed);
    return false;
  }
  bool try_enter(Token& me) noexcept {
    Local& l = local_of(me);
    if (!mcs_try_enqueue(l.tail, me, kAcquireGlobal)) return false;
    if (global.try_enter(l.global_token)) {
      l.batch = 0;
      return true;
    }
    // The global lock is busy: give the local lock back (a local waiter that came meanwhile takes the global itself).
    if (McsNode* succ = mcs_successor_or_close(l.tail, me)) mcs_pass(*succ, kAcquireGlobal);
    return false;
  }
  // The local lock (unless ours already), then the global one (unless inherited).
  void wait(Token& me, bool yield) noexcept {
    Local& l = local_of(me);
    uintptr_t got = me.locked().load(std::memory_order_acquire);
    if (got == 0) got = mcs_wait(me, yield);
    if (got == kWithGlobal) return;
    if (got == kGlobalQueued || !global.enter(l.global_token)) global.wait(l.global_token, yield);
    l.batch = 0;
  }
  void leave(Token& me) noexcept {
    Local& l = local_of(me);
    if (l.batch < kBatchLimit)
      if (McsNode* succ = me.next().load(std::memory_order_acquire)) {
        ++l.batch;
        mcs_pass(*succ, kWithGlobal);
        return;
      }
    global.leave(l.global_token);
    if (McsNode* succ = mcs_successor_or_close(l.tail, me)) mcs_pass(*succ, kAcquireGlobal);
  }
  uint32_t queued(const Token&) const noexcept { return 0; }

  Local& local_of(const Token& me) noexcept { return locals[size_t(me.numa_node) % kMaxNodes]; }

  Global global;
  std::unique_ptr<Local[]> locals;  // one per node
};

}  // namespace alloclab
