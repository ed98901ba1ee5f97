// The rwsem's slow paths: the wait list, rwsem_mark_wake, hand-off, and its virtual-time hand-off (see
// kinds/rwsem.hpp).
#include "alloclab/locks/kinds/rwsem.hpp"

#include "alloclab/base/clock.hpp"
#include "alloclab/locks/futex.hpp"

namespace alloclab {

namespace {

// jiffies + RWSEM_WAIT_TIMEOUT, in host ticks.
uint64_t wait_timeout() noexcept {
  return host_ticks() + uint64_t(double(Rwsem::kWaitTimeoutNs) * clock_calibration().ticks_per_ns);
}

// The waker's side of a wake-up: the futex word, then FUTEX_WAKE. A reader may return (and its stack frame go) as
// soon as it sees the word; FUTEX_WAKE_PRIVATE does not touch the word, so waking a gone address is harmless.
void wake_up(Rwsem::Waiter& w) noexcept {
  uint32_t* word = &w.woken;
  std::atomic_ref<uint32_t>(*word).store(1, std::memory_order_release);
  futex_wake(word, 1);
}

// schedule() until a wake-up, consumed here.
void sleep_until_woken(Rwsem::Waiter& w) noexcept {
  std::atomic_ref<uint32_t> woken(w.woken);
  while (woken.exchange(0, std::memory_order_acquire) == 0) futex_wait(&w.woken, 0);
}

}  // namespace

void Rwsem::lock_wait_lock() noexcept {
  Qspinlock::Token t;
  if (!wait_lock.enter(t)) wait_lock.wait(t, false);
}

void Rwsem::unlock_wait_lock() noexcept {
  Qspinlock::Token t;
  wait_lock.leave(t);
}

uint32_t Rwsem::queued(const Token&) const noexcept {
  auto& self = const_cast<Rwsem&>(*this);  // wait_lock is taken and released: the list itself is only read
  self.lock_wait_lock();
  uint32_t n = 0;
  for (const Waiter* w = wait_head; w; w = w->next) ++n;
  self.unlock_wait_lock();
  return n;
}

void Rwsem::add_waiter(Waiter& w) noexcept {
  w.prev = wait_tail;
  w.next = nullptr;
  if (wait_tail)
    wait_tail->next = &w;
  else
    wait_head = &w;
  wait_tail = &w;
}

void Rwsem::unlink(Waiter& w) noexcept {
  if (w.prev)
    w.prev->next = w.next;
  else
    wait_head = w.next;
  if (w.next)
    w.next->prev = w.prev;
  else
    wait_tail = w.prev;
}

void Rwsem::mark_wake(WakeType type) noexcept {
  Waiter* first = wait_head;
  if (first->write) {  // a writer at the head is woken alone, to retry rwsem_try_write_lock
    if (type == WakeType::any) wake_up(*first);
    return;
  }
  long adjustment = 0;
  if (type != WakeType::read_owned) {
    // Grant the first reader before counting the others, so that a writer that stole the lock is seen at once.
    adjustment = kReaderBias;
    const long old = count.fetch_add(adjustment, std::memory_order_relaxed);
    if (old & kWriterLocked) {
      if (host_ticks() > first->timeout) {  // waited too long for writers: ask for a hand-off
        if (!(old & kFlagHandoff)) adjustment -= kFlagHandoff;
        first->handoff_set = true;
      }
      count.fetch_sub(adjustment, std::memory_order_relaxed);
      return;
    }
  }
  // Every reader of the list (writers are skipped: phase-fair), at most MAX_READERS_WAKEUP, leaves the list.
  Waiter* granted = nullptr;
  Waiter** granted_tail = &granted;
  long woken = 0;
  for (Waiter *w = wait_head, *next; w && woken < kMaxReadersWakeup; w = next) {
    next = w->next;
    if (w->write) continue;
    unlink(*w);
    w->next = nullptr;
    *granted_tail = w;
    granted_tail = &w->next;
    ++woken;
  }
  adjustment = woken * kReaderBias - adjustment;
  const long old = count.load(std::memory_order_relaxed);
  if (wait_head == nullptr) {
    adjustment -= kFlagWaiters;
    if (old & kFlagHandoff) adjustment -= kFlagHandoff;
  } else if (woken && (old & kFlagHandoff)) {  // a reader got it: writers need not be forced off any longer
    adjustment -= kFlagHandoff;
  }
  if (adjustment) count.fetch_add(adjustment, std::memory_order_relaxed);
  // The second pass: each reader holds the lock from here on (next is read before its grant frees the waiter).
  for (Waiter *w = granted, *next; w; w = next) {
    next = w->next;
    wake_up(*w);
  }
}

void Rwsem::cond_wake_waiter(long c) noexcept {
  if (c & kWriterLocked) return;
  mark_wake(c & kReaderMask ? WakeType::readers : WakeType::any);
}

bool Rwsem::try_write_lock(Waiter& w) noexcept {
  Waiter* first = wait_head;
  long c = count.load(std::memory_order_relaxed);
  long next;
  do {
    const bool has_handoff = c & kFlagHandoff;
    if (has_handoff && first->handoff_set && &w != first) return false;  // honour the first waiter's hand-off
    next = c;
    if (c & kLockMask) {
      if (has_handoff || host_ticks() <= w.timeout) return false;
      next |= kFlagHandoff;  // waited too long: no newcomer takes it now
    } else {
      next |= kWriterLocked;
      next &= ~kFlagHandoff;
      if (wait_head == &w && wait_tail == &w) next &= ~kFlagWaiters;  // list_is_singular
    }
  } while (!count.compare_exchange_weak(c, next, std::memory_order_acquire, std::memory_order_relaxed));
  if (next & kFlagHandoff) {
    first->handoff_set = true;
    return false;
  }
  unlink(w);
  return true;
}

void Rwsem::wake() noexcept {
  lock_wait_lock();
  if (wait_head) mark_wake(WakeType::any);
  unlock_wait_lock();
}

// rwsem_down_write_slowpath, without the optimistic spinning (the header). Call after enter() failed; returns
// holding the write side.
void Rwsem::wait(Token& t, bool) noexcept {
  Waiter& w = t.waiter;
  w = {nullptr, nullptr, true, false, wait_timeout(), 0};
  lock_wait_lock();
  add_waiter(w);
  if (wait_head != &w)
    cond_wake_waiter(count.load(std::memory_order_relaxed));
  else
    count.fetch_or(kFlagWaiters, std::memory_order_relaxed);
  while (!try_write_lock(w)) {
    unlock_wait_lock();
    sleep_until_woken(w);
    lock_wait_lock();
  }
  unlock_wait_lock();
}

// rwsem_down_read_slowpath. Call after enter_read() failed (its bias is in the count); returns holding the read
// side.
void Rwsem::wait_read(Token& t, bool) noexcept {
  const long c = t.count;
  const long rcnt = c >> 8;  // RWSEM_READER_SHIFT, this reader included
  // Reader optimistic lock stealing: not while other readers probably own it (a stream of readers must not starve
  // a sleeping writer); otherwise whenever no writer holds it and no hand-off is pending.
  const bool readers_own = rcnt > 1 && !(c & kWriterLocked);
  if (!readers_own && !(c & (kWriterLocked | kFlagHandoff))) {
    if (rcnt == 1 && (c & kFlagWaiters)) {  // the first reader in: wake the readers queued at the head
      lock_wait_lock();
      if (wait_head) mark_wake(WakeType::read_owned);
      unlock_wait_lock();
    }
    return;
  }
  Waiter& w = t.waiter;
  w = {nullptr, nullptr, false, false, wait_timeout(), 0};
  long adjustment = -kReaderBias;
  lock_wait_lock();
  if (wait_head == nullptr) {
    // No waiter and no writer: the bias already in the count is the read lock.
    if (!(count.load(std::memory_order_acquire) & kWriterLocked)) {
      unlock_wait_lock();
      return;
    }
    adjustment += kFlagWaiters;
  }
  add_waiter(w);
  // Waiting now, no longer holding a bias.
  const long now = count.fetch_add(adjustment, std::memory_order_relaxed) + adjustment;
  cond_wake_waiter(now);
  unlock_wait_lock();
  // Granted by rwsem_mark_wake (which took it off the list): the read side is ours.
  std::atomic_ref<uint32_t> granted(w.woken);
  while (granted.load(std::memory_order_acquire) == 0) futex_wait(&w.woken, 0);
}

VHandoff Rwsem::vhandoff(const VRelease& r) {
  VHandoff h;
  const vt::Waiter& first = r.waiters.front();
  if (!r.states[size_t(first.cpu)].read) {
    if (r.handoff) {  // HANDOFF: the head writer spins on the owner; the lock is its own
      h.wake(first.cpu, r.now + r.transfer_to(first.cpu));
      h.owned = true;
    } else {
      h.wake(first.cpu, r.now + r.costs.wakeup());
    }
    return h;
  }
  uint32_t readers = 0;
  for (const vt::Waiter& w : r.waiters)
    if (r.states[size_t(w.cpu)].read && ++readers == uint32_t(kMaxReadersWakeup)) break;
  h.wake(first.cpu, r.now + r.costs.wakeup());
  h.readers = readers;
  return h;
}

}  // namespace alloclab
