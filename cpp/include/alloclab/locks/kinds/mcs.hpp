// mcs: the MCS queue lock, the queue at the heart of the kernel's qspinlock (kernel/locking/mcs_spinlock.h).
//
// Algorithm: J. M. Mellor-Crummey and M. L. Scott, "Algorithms for Scalable Synchronization on Shared-Memory
// Multiprocessors", ACM TOCS 9(1), 1991; Concurrency Kit's ck_spinlock_mcs; LiTL's src/mcs.c. Each acquirer brings
// a queue node (here in its LockToken, on its stack, a cache line of its own) and swaps it into the tail; with a
// predecessor it links itself behind it and spins on its own node's flag, which the predecessor clears at release.
// Fairness: FIFO. Cost: one exchange to acquire; release is one CAS when nobody waits, else one store into the
// successor's node: a single line transfer per hand-off, whatever the number of waiters.
// Leaves out: qspinlock's pending bit and locked-byte fast path (the `qspinlock` kind will add them).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "alloclab/locks/spin_wait.hpp"
#include "alloclab/locks/vhandoff.hpp"

namespace alloclab {

struct McsSpinlock {
  static constexpr std::string_view kName = "mcs";
  static constexpr std::string_view kDoc =
      "MCS queued spinlock (the queue of qspinlock): FIFO, each waiter spins on its own node; the default for "
      "kernel spinlocks";
  static constexpr bool kFifo = true;

  // The queue node, one per acquisition, alone on its cache line (its owner spins on `locked`). Plain fields,
  // reached through std::atomic_ref, so that a token costs nothing until enter() initialises it.
  struct alignas(64) Token {
    Token* next_;
    uint32_t locked_;
    std::atomic_ref<Token*> next() noexcept { return std::atomic_ref<Token*>(next_); }
    std::atomic_ref<uint32_t> locked() noexcept { return std::atomic_ref<uint32_t>(locked_); }
    Token* next_acquire() const noexcept {
      return std::atomic_ref<Token* const>(next_).load(std::memory_order_acquire);
    }
  };

  bool enter(Token& me) noexcept {
    me.next().store(nullptr, std::memory_order_relaxed);
    me.locked().store(1, std::memory_order_relaxed);
    // Swap our node into the tail: with no predecessor the lock is ours. acq_rel: the node's initialisation is
    // published with the swap (a later waiter writes its next field), and the previous holder's section is ours.
    Token* prev = tail.exchange(&me, std::memory_order_acq_rel);
    if (prev == nullptr) return true;
    prev->next().store(&me, std::memory_order_release);  // link in; the predecessor hands over through it
    return false;
  }
  bool try_enter(Token& me) noexcept {
    me.next().store(nullptr, std::memory_order_relaxed);
    me.locked().store(1, std::memory_order_relaxed);
    // acq_rel, as enter()'s exchange (TSan found the acquire-only version: a later waiter writes our next).
    Token* expected = nullptr;
    return tail.compare_exchange_strong(expected, &me, std::memory_order_acq_rel, std::memory_order_relaxed);
  }
  // Spin on our own node until the predecessor clears it.
  void wait(Token& me, bool yield) noexcept {
    while (me.locked().load(std::memory_order_acquire) != 0) spin_relax(yield);
  }
  void leave(Token& me) noexcept {
    Token* succ = me.next().load(std::memory_order_acquire);
    if (succ == nullptr) {
      // No successor linked yet: if we are still the tail, the queue is empty and the lock is free.
      Token* self = &me;
      if (tail.compare_exchange_strong(self, nullptr, std::memory_order_release, std::memory_order_relaxed)) return;
      // Someone swapped in behind us but has not linked yet: wait for the link.
      while ((succ = me.next().load(std::memory_order_acquire)) == nullptr) cpu_pause();
    }
    succ->locked().store(0, std::memory_order_release);  // hand over: one store into the successor's line
  }
  // Waiters linked behind `holder` (the holder's own token; only while it holds the lock, so nodes are alive).
  uint32_t queued(const Token& holder) const noexcept {
    uint32_t n = 0;
    for (const Token* t = holder.next_acquire(); t; t = t->next_acquire()) ++n;
    return n;
  }

  // Virtual time (vhandoff.hpp): FIFO, owned by the oldest waiter at once, after one line transfer (the release's
  // store into the successor's node), whatever the number of waiters.
  static VHandoff vhandoff(const VRelease& r) {
    const vt::Waiter& next = r.waiters.front();
    VHandoff h;
    h.wake(next.cpu, r.now + r.transfer_to(next.cpu));
    h.owned = true;
    return h;
  }

  std::atomic<Token*> tail{nullptr};
};

}  // namespace alloclab
