// mutex: a sleeping mutex on a futex (Drepper's three-state mutex), standing in for the kernel's struct mutex.
//
// Algorithm: U. Drepper, "Futexes Are Tricky" (2011), mutex #2 ("mutex3"): the word is 0 free, 1 locked, 2 locked
// with waiters. Fast path: CAS 0 -> 1. Slow path: a short optimistic spin (like mutex_optimistic_spin's), then
// exchange 2 and futex-wait while the word stays 2; release is fetch_sub, and only a word that was 2 wakes one
// sleeper. Fairness: none: a woken waiter races with newcomers (the kernel's mutex adds a hand-off to a starving
// waiter, which the `kmutex` kind will model). Cost: uncontended one CAS and one RMW; contended, a futex wake-up
// (microseconds) per hand-off to a sleeper.
// Leaves out: OSQ-serialised spinning and the owner-running check of the kernel's mutex.
#pragma once

#include "alloclab/locks/kinds/kind.hpp"

namespace alloclab {

struct FutexMutex {
  static constexpr LockKindTraits kTraits{.fifo = false,
                                          .doc =
                                              "sleeping mutex on a futex: spins briefly, then sleeps; woken waiters "
                                              "race (not FIFO), like the kernel's mutex "
                                              "without its handoff",
                                          // Uncontended: the cmpxchg; the fetch_sub.
                                          .lock = {.rmws = 1, .accesses = 0},
                                          .unlock = {.rmws = 1, .accesses = 0}};
  static constexpr int kSpins = 128;  // optimistic spin before sleeping, like mutex_optimistic_spin's budget

  struct Token {};

  bool enter(Token&) noexcept {
    uint32_t expected = 0;
    return word.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  bool try_enter(Token& t) noexcept { return enter(t); }
  void wait(Token&, bool yield) noexcept;  // futex_mutex.cpp: spin, then sleep
  void leave(Token&) noexcept {
    if (word.fetch_sub(1, std::memory_order_release) != 1) {  // it was 2: someone may sleep
      word.store(0, std::memory_order_release);
      wake_one();
    }
  }
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp): spinners within their kSpins PAUSEs race; the oldest sleeper is woken after a futex
  // wake-up, and races too.
  static VHandoff vhandoff(const VRelease& r) { return spin_then_sleep(r, kSpins); }

  std::atomic<uint32_t> word{0};  // 0 free, 1 locked, 2 locked with waiters

 private:
  void wake_one() noexcept;
};

}  // namespace alloclab
