// The futex mutex's slow paths: the optimistic spin, the sleep and the wake-up (see kinds/futex_mutex.hpp).
#include "alloclab/locks/kinds/futex_mutex.hpp"

#include "alloclab/locks/futex.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

void FutexMutex::wait(Token&, bool yield) noexcept {
  // Optimistic spin (none when oversubscribed: the holder may need this CPU).
  for (int i = 0; i < kSpins && !yield; ++i) {
    uint32_t expected = 0;
    if (word.load(std::memory_order_relaxed) == 0 &&
        word.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
      return;
    cpu_pause();
  }
  // Mark "locked with waiters" and sleep while it stays so; an exchange that finds 0 took the lock (as 2: a later
  // release then wakes someone who may find nothing to do, which is the algorithm's price for no lost wake-ups).
  uint32_t c = word.exchange(2, std::memory_order_acquire);
  while (c != 0) {
    futex_wait(reinterpret_cast<uint32_t*>(&word), 2);
    c = word.exchange(2, std::memory_order_acquire);
  }
}

void FutexMutex::wake_one() noexcept { futex_wake(reinterpret_cast<uint32_t*>(&word), 1); }

}  // namespace alloclab
