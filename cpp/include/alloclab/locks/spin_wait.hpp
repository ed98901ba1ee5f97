// Spin-waiting: what a waiter does between two looks at a lock word.
//
// Models: cpu_relax() in the kernel's spin loops (PAUSE on x86). When the run is oversubscribed (more workers than
// host PUs), a spinner yields its CPU instead, so that the holder it waits for can run and the run still ends.
// spin_until() is a whole wait on a word other code changes (a page flag, a raw lock): on a virtual CPU it polls in
// virtual time instead, one PAUSE per look, yielding to the simulator between looks.
// Leaves out: the kernel's need_resched() checks (a spinlock waiter in the kernel never yields; a user-space
// waiter must, or an oversubscribed run would spin for whole scheduler slices).
#pragma once

#include <sched.h>

#include <functional>
#include <string_view>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/vclock.hpp"

namespace alloclab {

// One step of a spin-wait: PAUSE, or sched_yield() when `yield` (oversubscribed run).
inline void spin_relax(bool yield) noexcept {
  if (yield)
    sched_yield();
  else
    cpu_pause();
}

// On a virtual CPU: polls `pred` in virtual time (a PAUSE per failed look) until it holds; throws vt::Stopped when
// the run is stopped first. `label` (what is waited for, e.g. "PG_locked") must outlive the call.
void virtual_spin_until(const std::function<bool()>& pred, std::string_view label);

// Spins until `pred` holds: spin_relax(yield) between looks, or the virtual wait on the simulator's fibers.
// `pred` must only read (a failed look changes nothing).
template <class Pred>
void spin_until(Pred&& pred, bool yield, std::string_view label) {
  if (vt::current_cpu() >= 0) [[unlikely]] {
    virtual_spin_until(std::forward<Pred>(pred), label);
    return;
  }
  while (!pred()) spin_relax(yield);
}

}  // namespace alloclab
