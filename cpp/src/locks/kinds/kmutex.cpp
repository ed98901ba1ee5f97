// The kernel mutex's slow paths: optimistic spinning, the wait list, sleep, hand-off (see kinds/kmutex.hpp).
#include "alloclab/locks/kinds/kmutex.hpp"

#include "alloclab/locks/futex.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

ALLOCLAB_TLS alignas(8) constinit thread_local char detail::kmutex_task = 0;

namespace {
std::atomic_ref<KernelMutex::Waiter*> first_ref(KernelMutex::Waiter*& head) {
  return std::atomic_ref<KernelMutex::Waiter*>(head);
}
}  // namespace

void KernelMutex::lock_wait_lock() noexcept {
  Qspinlock::Token t;
  if (!wait_lock.enter(t)) wait_lock.wait(t, false);
}

void KernelMutex::unlock_wait_lock() noexcept {
  Qspinlock::Token t;
  wait_lock.leave(t);
}

uintptr_t KernelMutex::trylock_or_owner(uintptr_t curr, bool handoff) noexcept {
  uintptr_t old = owner.load(std::memory_order_relaxed);
  for (;;) {  // loops only when a flag changed under us
    uintptr_t flags = old & kFlags;
    uintptr_t task = old & ~kFlags;
    if (task) {
      if (flags & kFlagPickup) {  // handed off: only to its addressee
        if (task != curr) return task;
        flags &= ~kFlagPickup;
      } else if (handoff) {  // the first waiter asks for the next unlock to hand the lock to it
        if (flags & kFlagHandoff) return task;
        flags |= kFlagHandoff;
      } else {
        return task;
      }
    } else {
      task = curr;
    }
    if (owner.compare_exchange_weak(old, task | flags, std::memory_order_acquire, std::memory_order_relaxed))
      return task == curr ? 0 : task;
  }
}

bool KernelMutex::optimistic_spin(Token& t, uintptr_t curr, bool waiter) noexcept {
  // osq_lock: queue behind the other spinners; only the OSQ's head polls the owner word.
  if (!waiter && mcs_enqueue(osq, t.osq)) mcs_wait(t.osq, false);
  bool acquired = false;
  for (int i = 0; i < kSpins; ++i) {
    if (trylock_or_owner(curr, false) == 0) {
      acquired = true;
      break;
    }
    cpu_pause();
  }
  // osq_unlock: the next spinner becomes the head.
  if (!waiter)
    if (McsNode* succ = mcs_successor_or_close(osq, t.osq)) mcs_pass(*succ, 1);
  return acquired;
}

// __mutex_lock_common. Call after enter() failed; returns holding the lock.
void KernelMutex::wait(Token& t, bool yield) noexcept {
  const uintptr_t curr = current();
  if (trylock_or_owner(curr, false) == 0) return;
  // Spin only where the owner can be running (an oversubscribed run's owner may wait for this CPU).
  if (!yield && optimistic_spin(t, curr, false)) return;

  lock_wait_lock();
  if (trylock_or_owner(curr, false) == 0) {
    unlock_wait_lock();
    return;
  }
  // __mutex_add_waiter: at the tail; the first waiter tells unlock to wake someone.
  Waiter& w = t.waiter;
  w = {wait_tail, nullptr, curr, 0};
  if (wait_tail)
    wait_tail->next = &w;
  else
    first_ref(wait_head).store(&w, std::memory_order_relaxed);
  wait_tail = &w;
  if (w.prev == nullptr) owner.fetch_or(kFlagWaiters, std::memory_order_relaxed);

  for (;;) {
    if (trylock_or_owner(curr, false) == 0) break;  // with wait_lock held
    unlock_wait_lock();
    // schedule(): sleep until a wake-up (consumed here), then retry.
    std::atomic_ref<uint32_t> woken(w.woken);
    while (woken.exchange(0, std::memory_order_acquire) == 0) futex_wait(&w.woken, 0);
    const bool first = first_ref(wait_head).load(std::memory_order_relaxed) == &w;
    if (trylock_or_owner(curr, first) == 0 || (first && !yield && optimistic_spin(t, curr, true))) {
      lock_wait_lock();
      break;
    }
    lock_wait_lock();
  }
  // __mutex_remove_waiter; an empty list clears every flag.
  if (w.prev)
    w.prev->next = w.next;
  else
    first_ref(wait_head).store(w.next, std::memory_order_relaxed);
  if (w.next)
    w.next->prev = w.prev;
  else
    wait_tail = w.prev;
  if (wait_head == nullptr) owner.fetch_and(~kFlags, std::memory_order_relaxed);
  unlock_wait_lock();
}

void KernelMutex::unlock_slowpath() noexcept {
  uintptr_t old = owner.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kFlagHandoff) break;
    // Release, keeping the flags; only a lock with waiters goes on to wake one.
    if (owner.compare_exchange_weak(old, old & kFlags, std::memory_order_release, std::memory_order_relaxed)) {
      if (old & kFlagWaiters) break;
      return;
    }
  }
  lock_wait_lock();
  Waiter* first = wait_head;
  if (old & kFlagHandoff) {
    // __mutex_handoff: the lock becomes the first waiter's, which picks it up (only the first waiter sets HANDOFF,
    // and it leaves the list only holding the lock, so `first` is that waiter).
    uintptr_t cur = owner.load(std::memory_order_relaxed);
    while (!owner.compare_exchange_weak(cur, (cur & kFlagWaiters) | first->task | kFlagPickup,
                                        std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
  // wake_up_q of the first waiter, under wait_lock: a waiter leaves the list (and its stack) only under it.
  if (first) {
    std::atomic_ref<uint32_t>(first->woken).store(1, std::memory_order_release);
    futex_wake(&first->woken, 1);
  }
  unlock_wait_lock();
}

VHandoff KernelMutex::vhandoff(const VRelease& r) {
  VHandoff h;
  const vt::vtime window = r.costs.spin_step() * vt::vtime(kSpins);
  const auto spinning = [&](const vt::Waiter& w) { return r.now < r.states[size_t(w.cpu)].began + window; };
  const vt::Waiter* sleeper = nullptr;
  const vt::Waiter* spinner = nullptr;
  for (const vt::Waiter& w : r.waiters) {
    if (spinning(w)) {
      if (!spinner) spinner = &w;
    } else if (!sleeper) {
      sleeper = &w;
    }
  }
  if (sleeper && r.states[size_t(sleeper->cpu)].lost > 0) {  // HANDOFF: the first waiter spins, the lock is its own
    h.wake(sleeper->cpu, r.now + r.transfer_to(sleeper->cpu));
    h.owned = true;
    return h;
  }
  if (spinner) h.wake(spinner->cpu, r.now + r.transfer_to(spinner->cpu));
  if (sleeper) h.wake(sleeper->cpu, r.now + r.costs.wakeup());
  return h;
}

}  // namespace alloclab
