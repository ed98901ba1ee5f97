// Lock: one lock type whose primitive is chosen at run time, with lock_stat hooks.
//
// Models: the locks of the kernel's allocator paths (spinlock_t, struct mutex) and the user-space primitives a
// kernel engineer compares them with:
//   mutex   futex mutex (Drepper's three-state): a short optimistic spin, then sleep; wake-ups race (not FIFO).
//   pthread glibc's pthread_mutex_t.
//   spin    test-and-test-and-set with bounded exponential backoff: unfair.
//   ticket  ticket spinlock: FIFO, all waiters spin on the owner field.
//   mcs     MCS queue lock: FIFO, each waiter spins on its own node (the queue of the kernel's qspinlock, whose
//           pending-bit and locked-byte fast paths are not modelled).
// Every acquisition goes through a LockToken owned by the caller (usually on its stack through LockGuard): it holds
// the MCS queue node, the ticket and the acquisition timestamp, so no primitive needs thread-local storage.
// When the run is oversubscribed (more workers than host PUs) spinning waiters sched_yield() so a preempted
// holder or queue successor gets the CPU; otherwise they spin with PAUSE.
// Leaves out: interrupts (irqsave is a no-op in user space), lockdep, priority inheritance.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <atomic>
#include <cstdint>

#include "alloclab/clock.hpp"
#include "alloclab/lock_domain.hpp"

namespace alloclab {

struct McsNode {
  std::atomic<McsNode*> next{nullptr};
  std::atomic<uint32_t> locked{0};
};

// Per-acquisition state. Must outlive the critical section (it does, on the stack of the holder).
struct LockToken {
  McsNode node;
  uint64_t acquired_at = 0;  // clock ticks, only with lock_stat on
  uint32_t ticket = 0;
};

inline void cpu_relax() noexcept { cpu_pause(); }

class alignas(64) Lock {
 public:
  Lock(LockDomain& domain, std::string_view cls);
  Lock(LockDomain& domain, LockClassId cls);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  void lock(LockToken& t) {
    if (enter(t)) {
      if (stat_) stat_acquired(t, 0, 0);
      return;
    }
    if (!stat_) {
      wait(t);
      return;
    }
    const uint64_t c0 = clock_ticks();
    wait(t);
    stat_acquired(t, c0, clock_ticks());  // the end of the wait is also the start of the hold
  }

  // Acquires only if free (pcp_spin_trylock). A failed trylock counts nothing in lock_stat, as in the kernel.
  bool trylock(LockToken& t) {
    if (!try_enter(t)) return false;
    if (stat_) stat_acquired(t, 0, 0);
    return true;
  }

  void unlock(LockToken& t) {
    if (stat_) stat_released(t);
    leave(t);
  }

  LockKind kind() const { return kind_; }
  LockClassId lock_class() const { return cls_; }
  const LockDomain& domain() const { return *domain_; }
  // Waiters queued behind the holder (ticket, mcs; 0 for the others). For tests that build a known queue order.
  uint32_t queued() const;

 private:
  bool enter(LockToken& t);      // fast path: true if acquired; ticket/mcs have queued themselves otherwise
  bool try_enter(LockToken& t);  // never queues
  void wait(LockToken& t);       // slow path after a failed enter()
  void leave(LockToken& t);
  void wake_one();  // mutex: futex wake of one sleeper
  // contended_at == 0: acquired without waiting; otherwise the wait ran from contended_at to acquired_at.
  void stat_acquired(LockToken& t, uint64_t contended_at, uint64_t acquired_at);
  void stat_released(LockToken& t);

  // Hot, read-mostly header.
  LockDomain* domain_;
  LockClassId cls_;
  LockKind kind_;
  bool stat_;
  bool yield_;
  std::atomic<int32_t> last_cpu_{-1};  // lock_stat's lock->cpu, for bounces
  // Primitive state (only the one of kind_ is used).
  std::atomic<uint32_t> word_{0};  // spin: 0/1; mutex: 0 free, 1 locked, 2 locked with waiters; ticket: owner
  std::atomic<uint32_t> next_ticket_{0};
  std::atomic<McsNode*> tail_{nullptr};
  std::atomic<McsNode*> head_{nullptr};  // mcs: the holder's node (written by the holder only), for queued()
  pthread_mutex_t pmutex_;
};

class LockGuard {
 public:
  explicit LockGuard(Lock& l) : l_(l) { l_.lock(t_); }
  ~LockGuard() { l_.unlock(t_); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& l_;
  LockToken t_;
};

}  // namespace alloclab

// ---- fast paths, inline ----------------------------------------------------------------------------------------
namespace alloclab {

inline bool Lock::enter(LockToken& t) {
  switch (kind_) {
    case LockKind::spin: return word_.exchange(1, std::memory_order_acquire) == 0;
    case LockKind::ticket:
      t.ticket = next_ticket_.fetch_add(1, std::memory_order_relaxed);
      return word_.load(std::memory_order_acquire) == t.ticket;
    case LockKind::mcs: {
      t.node.next.store(nullptr, std::memory_order_relaxed);
      t.node.locked.store(1, std::memory_order_relaxed);
      McsNode* prev = tail_.exchange(&t.node, std::memory_order_acq_rel);
      if (prev == nullptr) {
        head_.store(&t.node, std::memory_order_relaxed);
        return true;
      }
      prev->next.store(&t.node, std::memory_order_release);
      return false;
    }
    case LockKind::mutex: {
      uint32_t expected = 0;
      return word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
    }
    case LockKind::pthread: return pthread_mutex_trylock(&pmutex_) == 0;
  }
  return false;
}

inline void Lock::leave(LockToken& t) {
  switch (kind_) {
    case LockKind::spin: word_.store(0, std::memory_order_release); return;
    case LockKind::ticket: word_.store(t.ticket + 1, std::memory_order_release); return;
    case LockKind::mcs: {
      McsNode* succ = t.node.next.load(std::memory_order_acquire);
      if (succ == nullptr) {
        McsNode* me = &t.node;
        if (tail_.compare_exchange_strong(me, nullptr, std::memory_order_release, std::memory_order_relaxed)) return;
        while ((succ = t.node.next.load(std::memory_order_acquire)) == nullptr) cpu_relax();
      }
      head_.store(succ, std::memory_order_relaxed);
      succ->locked.store(0, std::memory_order_release);
      return;
    }
    case LockKind::mutex:
      if (word_.fetch_sub(1, std::memory_order_release) != 1) {
        word_.store(0, std::memory_order_release);
        wake_one();
      }
      return;
    case LockKind::pthread: pthread_mutex_unlock(&pmutex_); return;
  }
}

}  // namespace alloclab
