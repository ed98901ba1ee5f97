// kmutex: the kernel's struct mutex (kernel/locking/mutex.c, kernel/locking/osq_lock.c, v6.x).
//
// Algorithm: the owner word holds the owning task with three flag bits (MUTEX_FLAG_WAITERS: unlock must wake someone;
// HANDOFF: unlock must hand the lock to the first waiter; PICKUP: handed off, the first waiter has yet to take it).
// Fast path: cmpxchg owner 0 -> current; unlock: cmpxchg current -> 0. Slow path (__mutex_lock_common): try, then
// spin optimistically while the owner runs, serialised on the OSQ (an MCS queue of spinners, so only its head polls
// the owner word); then join the wait list under wait_lock (a qspinlock) and sleep. A woken waiter retries; the first
// waiter that wakes and loses sets HANDOFF, spins once more, and the next unlock gives the lock to it directly
// (__mutex_handoff), so a waiter is never starved by spinners. A task is a thread (the address of a thread-local).
// Fairness: spinners and newcomers race, the wait list is FIFO, and hand-off bounds a starving waiter's wait.
// Cost: one cmpxchg each way uncontended; spinners cost a line transfer per hand-off, sleepers a futex wake-up.
// Leaves out: the owner-running check (user space cannot see whether the owner runs: a spinner gives up after kSpins
// looks, and never spins when the run is oversubscribed), OSQ unqueueing on need_resched, ww_mutex, lockdep.
#pragma once

#include "alloclab/base/tls.hpp"
#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/qspinlock.hpp"
#include "alloclab/locks/mcs_node.hpp"

namespace alloclab {

namespace detail {
// The calling thread's task_struct, which KernelMutex::current() names on every fast path (kmutex.cpp).
ALLOCLAB_TLS alignas(8) extern constinit thread_local char kmutex_task;
}  // namespace detail

struct KernelMutex {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "the kernel's mutex: cmpxchg fast path, optimistic spinning on the OSQ, then a FIFO wait list and sleep; the "
          "first waiter that loses after a wake-up gets the lock handed to it; the default for kernel mutexes",
      // Uncontended: the owner cmpxchg of mutex_lock's and of mutex_unlock's fast path.
      .lock = {.rmws = 1, .accesses = 0},
      .unlock = {.rmws = 1, .accesses = 0}};
  static constexpr int kSpins = 1024;  // looks at the owner word before a spinner gives up (the owner-running check)

  static constexpr uintptr_t kFlagWaiters = 0x01;  // MUTEX_FLAG_WAITERS
  static constexpr uintptr_t kFlagHandoff = 0x02;  // MUTEX_FLAG_HANDOFF
  static constexpr uintptr_t kFlagPickup = 0x04;   // MUTEX_FLAG_PICKUP
  static constexpr uintptr_t kFlags = 0x07;        // MUTEX_FLAGS

  // struct mutex_waiter: on the wait list while it sleeps.
  struct Waiter {
    Waiter* prev;
    Waiter* next;
    uintptr_t task;
    uint32_t woken;  // the futex it sleeps on: set by the wake-up
  };
  struct Token {
    McsNode osq;  // its node in the OSQ while it spins
    Waiter waiter;
  };

  bool enter(Token&) noexcept {
    uintptr_t expected = 0;
    return owner.compare_exchange_strong(expected, current(), std::memory_order_acquire, std::memory_order_relaxed);
  }
  // mutex_trylock.
  bool try_enter(Token&) noexcept { return trylock_or_owner(current(), false) == 0; }
  void wait(Token& t, bool yield) noexcept;  // kmutex.cpp: __mutex_lock_common
  void leave(Token&) noexcept {
    uintptr_t expected = current();
    if (!owner.compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed))
      unlock_slowpath();
  }
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp). A waiter spins for kSpins looks after it began waiting, then sleeps. At a release:
  // when the oldest sleeper has lost a race since it began waiting, it is the first waiter that woke, lost, set
  // HANDOFF and spins on the owner: the lock is its own after one line transfer. Otherwise the oldest spinner (the OSQ
  // is FIFO: its head polls the owner word) races for it after one line transfer, and the oldest sleeper is woken to
  // race too, a futex wake-up later.
  static VHandoff vhandoff(const VRelease& r);

  std::atomic<uintptr_t> owner{0};     // task | flags
  std::atomic<McsNode*> osq{nullptr};  // the optimistic spinners' queue
  Qspinlock wait_lock;                 // guards the wait list
  Waiter* wait_head = nullptr;         // the wait list, oldest first (under wait_lock; wait_head also read without)
  Waiter* wait_tail = nullptr;

 private:
  // The calling thread's task (aligned: the low bits are free for flags).
  static uintptr_t current() noexcept { return reinterpret_cast<uintptr_t>(&detail::kmutex_task); }
  // __mutex_trylock_common: takes the lock for `curr` if it is free, or handed off to `curr`; with `handoff` (the
  // first waiter) sets HANDOFF on a held lock. Returns 0 when acquired, else the owning task.
  uintptr_t trylock_or_owner(uintptr_t curr, bool handoff) noexcept;
  // mutex_optimistic_spin: true when it acquired. A waiter (already on the wait list) skips the OSQ.
  bool optimistic_spin(Token& t, uintptr_t curr, bool waiter) noexcept;
  void unlock_slowpath() noexcept;  // __mutex_unlock_slowpath: hand off or release, and wake the first waiter
  void lock_wait_lock() noexcept;
  void unlock_wait_lock() noexcept;
};

}  // namespace alloclab
