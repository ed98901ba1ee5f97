// Spin-waiting: what a waiter does between two looks at a lock word.
//
// Models: cpu_relax() in the kernel's spin loops (PAUSE on x86). When the run is oversubscribed (more workers than
// host PUs), a spinner yields its CPU instead, so that the holder it waits for can run and the run still ends.
// Leaves out: the kernel's need_resched() checks (a spinlock waiter in the kernel never yields; a user-space
// waiter must, or an oversubscribed run would spin for whole scheduler slices).
#pragma once

#include <sched.h>

#include "alloclab/base/clock.hpp"

namespace alloclab {

// One step of a spin-wait: PAUSE, or sched_yield() when `yield` (oversubscribed run).
inline void spin_relax(bool yield) noexcept {
  if (yield)
    sched_yield();
  else
    cpu_pause();
}

}  // namespace alloclab
