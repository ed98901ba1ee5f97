// pthread: glibc's pthread_mutex_t (default type), the user-space baseline most code uses.
//
// Algorithm: glibc nptl's lowlevellock (a futex three-state lock much like the `mutex` kind, with its own spin and
// wake policy). Fairness: none. Cost: a library call per lock and unlock on top of the atomics. Used as it is:
// trylock only where lock_stat must see whether the acquisition contended, pthread_mutex_lock directly otherwise.
// Leaves out: robust, recursive, priority-inheritance and adaptive mutex types.
#pragma once

#include <pthread.h>

#include "alloclab/locks/kinds/kind.hpp"

namespace alloclab {

struct PthreadMutex {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc = "glibc pthread_mutex_t (default type): futex-based, what most user-space code uses",
      // Uncontended: glibc 2.36's in a multithreaded process (x86-64 disassembly): the load of the type, the cmpxchg,
      // the owner store and the __nusers add; the load of the type, the owner store, the __nusers sub, the type again
      // and the exchange.
      .lock = {.rmws = 1, .accesses = 3},
      .unlock = {.rmws = 1, .accesses = 4}};

  struct Token {};

  PthreadMutex() noexcept { pthread_mutex_init(&m, nullptr); }
  ~PthreadMutex() { pthread_mutex_destroy(&m); }
  PthreadMutex(const PthreadMutex&) = delete;
  PthreadMutex& operator=(const PthreadMutex&) = delete;

  bool enter(Token&) noexcept { return pthread_mutex_trylock(&m) == 0; }
  bool try_enter(Token& t) noexcept { return enter(t); }
  void wait(Token&, bool) noexcept { pthread_mutex_lock(&m); }
  // The primitive's own path when nobody needs to know whether it contended (lock_stat off).
  void acquire(Token&, bool) noexcept { pthread_mutex_lock(&m); }
  void leave(Token&) noexcept { pthread_mutex_unlock(&m); }
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp): the default type does not spin; the oldest sleeper is woken after a futex wake-up
  // and races with newcomers.
  static VHandoff vhandoff(const VRelease& r) { return spin_then_sleep(r, 0); }

  pthread_mutex_t m;
};

}  // namespace alloclab
