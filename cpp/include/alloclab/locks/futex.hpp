// futex: sleeping on a 32-bit word until another thread changes it and wakes the sleepers (futex(2), private).
//
// Models: the kernel's sleep/wake-up of a blocked task (schedule() and wake_up_process()) as user space does it.
// Leaves out: timeouts, requeueing, priority inheritance.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace alloclab {

// Sleeps while *word == expected (returns at once otherwise, or on a spurious wake-up: callers re-check).
inline void futex_wait(uint32_t* word, uint32_t expected) noexcept {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
// Wakes up to `n` sleepers on `word`.
inline void futex_wake(uint32_t* word, int n) noexcept {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

}  // namespace alloclab
