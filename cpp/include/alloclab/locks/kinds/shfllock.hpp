// shfllock: the shuffle lock, a test-and-set word with an MCS queue of waiters that its head reorders by node.
//
// Algorithm: S. Kashyap, I. Calciu, X. Cheng, C. Min and T. Kim, "Scalable and Practical Locking with Shuffling",
// SOSP 2019 (the non-blocking ShflLock). The lock word is a test-and-set byte that anyone may take when it is free
// (newcomers steal); waiters queue in an MCS queue, and only the queue's head spins on the word. While it waits, off
// the critical path, the head shuffles the queue: it moves the waiters of its own node forward, right behind itself
// and the ones already grouped, so the next heads, and so the next owners, come from its node. After kMaxBatch heads
// in a row from one node it stops shuffling, and the queue's order brings the other nodes in. Only the head rewrites
// links, never the tail's (which a newcomer may be writing), and waiters spin on their own nodes, so the shuffle needs
// no lock of its own.
// Fairness: not FIFO: newcomers steal, a node's waiters go first for at most kMaxBatch heads. Cost: a hand-off is the
// head's read of the word after the release, one line transfer (mostly within a node), and its exchange; the queue's
// reordering costs the waiters, not the holder. On one node it is a test-and-set lock with an MCS queue of spinners.
// Leaves out: the blocking variant (waiters that sleep), the no-stealing flag that starving waiters set, and the
// shuffler role passed down the queue (the head alone shuffles here).
#pragma once

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/mcs_node.hpp"

namespace alloclab {

struct Shfllock {
  static constexpr LockKindTraits kTraits{.fifo = false,
                                          .doc =
                                              "ShflLock (Kashyap et al., SOSP'19): a test-and-set word and an MCS "
                                              "queue whose head, while it waits, moves its "
                                              "node's waiters forward",
                                          // Uncontended: a load and the cmpxchg of the word; its store.
                                          .lock = {.rmws = 1, .accesses = 1},
                                          .unlock = {.rmws = 0, .accesses = 1}};
  static constexpr std::string_view kBase = "qspinlock";  // what it is on a 1-node model
  static constexpr uint32_t kMaxBatch = 64;  // heads in a row from one node before the head stops shuffling

  struct alignas(64) Token : McsNode {
    int32_t numa_node;  // set by the Lock before enter()
  };

  // The word if it is free (a steal), else the queue; true if the word was taken.
  bool enter(Token& me) noexcept {
    if (try_enter(me)) return true;
    if (!mcs_enqueue(tail, me)) me.locked().store(1, std::memory_order_relaxed);  // the queue's head at once
    return false;
  }
  bool try_enter(Token&) noexcept {
    uint32_t expected = 0;
    return locked.load(std::memory_order_relaxed) == 0 &&
           locked.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void wait(Token& me, bool yield) noexcept;  // shfllock.cpp: head, shuffle, word, pass the head on
  void leave(Token&) noexcept { locked.store(0, std::memory_order_release); }
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp): the queue's head races for the word, woken at the release to pay the transfer and
  // its exchange (a newcomer may steal it first). Who heads the queue is the previous head's shuffle: below kMaxBatch
  // heads in a row from the releaser's node, the oldest waiter of that node; otherwise the oldest waiter.
  static VHandoff vhandoff(const VRelease& r);

  std::atomic<uint32_t> locked{0};      // the test-and-set word: 0 free, 1 held
  std::atomic<McsNode*> tail{nullptr};  // the waiters' queue
  uint32_t batch = 0;                   // heads in a row from one node (the queue head's only)

 private:
  void shuffle(Token& me) noexcept;
};

}  // namespace alloclab
