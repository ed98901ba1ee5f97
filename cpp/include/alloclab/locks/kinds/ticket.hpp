// ticket: ticket spinlock, as x86 Linux used before qspinlock (v2.6.25-v4.1, arch/x86/include/asm/spinlock.h).
//
// Algorithm: J. M. Mellor-Crummey and M. L. Scott, TOCS 1991 (section 2.2); Concurrency Kit's ck_spinlock_ticket.
// An acquirer takes the next ticket with one fetch-and-add and spins until the owner field shows it; the releaser
// increments the owner. Fairness: FIFO. Cost: one RMW to acquire, one store to release; but every waiter spins on
// the owner line, so each release invalidates it in N caches and the next owner's read queues behind the others'
// re-reads: the hand-off grows with the number of waiters (Boyd-Wickizer et al., "Non-scalable locks are
// dangerous", Ottawa Linux Symposium 2012).
// Leaves out: the paravirt "slowpath" bit and proportional backoff.
#pragma once

#include <algorithm>

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

struct TicketSpinlock {
  static constexpr LockKindTraits kTraits{
      .fifo = true,
      .doc = "ticket spinlock (Linux x86 before 4.2): FIFO, every waiter spins on one line",
      // Uncontended: fetch_add of next and a load of owner; the store of owner.
      .lock = {.rmws = 1, .accesses = 1},
      .unlock = {.rmws = 0, .accesses = 1}};

  struct Token {
    uint32_t ticket;  // set by enter() or try_enter()
  };

  // Fast path: take a ticket; true if it is being served already (otherwise the waiter is queued by its ticket).
  bool enter(Token& t) noexcept {
    t.ticket = next.fetch_add(1, std::memory_order_relaxed);
    return owner.load(std::memory_order_acquire) == t.ticket;
  }
  // Takes a ticket only if it would be served at once: the CAS on next fails if anyone took one meanwhile.
  bool try_enter(Token& t) noexcept {
    const uint32_t served = owner.load(std::memory_order_acquire);
    uint32_t expected = served;
    if (!next.compare_exchange_strong(expected, served + 1, std::memory_order_acquire, std::memory_order_relaxed))
      return false;
    t.ticket = served;
    return true;
  }
  void wait(Token& t, bool yield) noexcept {
    while (owner.load(std::memory_order_acquire) != t.ticket) spin_relax(yield);
  }
  void leave(Token& t) noexcept { owner.store(t.ticket + 1, std::memory_order_release); }
  // Tickets handed out behind the one being served.
  uint32_t queued(const Token&) const noexcept {
    const uint32_t taken = next.load(std::memory_order_acquire);
    const uint32_t served = owner.load(std::memory_order_acquire);
    return taken == served ? 0 : taken - served - 1;
  }

  // Virtual time (vhandoff.hpp): FIFO, owned by the oldest waiter at once. The release invalidates the owner line
  // in every waiter's cache and all of them read it again; the line serves the reads one at a time, nearest first
  // (ties by CPU), and the next owner sees its ticket once its own read is served: the hand-off grows with the
  // number of waiters. The reads queued behind the next owner's are still served after it has the lock, so the
  // line is busy with them until every waiter's read is done (VHandoff::line_busy_until): the next release's store
  // to the word, and so its hand-off, queues behind them. Every release thus costs the line one read per waiter,
  // the serialisation Boyd-Wickizer et al. model (a hand-off time of c per waiting core), whatever the queue's order.
  // A ticket lock is free again only after every waiter of its last release has owned it, each hand-off starting
  // after the reads of the one before: an acquisition of the free lock never queues behind re-reads.
  static VHandoff vhandoff(const VRelease& r) {
    const vt::Waiter& next = r.waiters.front();
    const vt::vtime own = r.transfer_to(next.cpu);
    const vt::vtime start = std::max(r.now, r.line_busy_until);
    vt::vtime at = start;
    vt::vtime busy = start;
    for (const vt::Waiter& w : r.waiters) {
      const vt::vtime t = r.transfer_to(w.cpu);
      if (t < own || (t == own && w.cpu <= next.cpu)) at += t;
      busy += t;
    }
    VHandoff h;
    h.wake(next.cpu, at);
    h.owned = true;
    h.line_busy_until = busy;
    return h;
  }

  std::atomic<uint32_t> owner{0};  // the ticket being served
  std::atomic<uint32_t> next{0};   // the next ticket to hand out
};

}  // namespace alloclab
