// spin: test-and-test-and-set spinlock with bounded exponential backoff.
//
// Algorithm: T. E. Anderson, "The Performance of Spin Lock Alternatives for Shared-Memory Multiprocessors", IEEE
// TPDS 1(1), 1990 (TTAS with backoff); Concurrency Kit's ck_spinlock_fas / ck_backoff. A waiter reads the word until
// it looks free, then tries one exchange; a failed try doubles its backoff (PAUSEs between reads) up to a bound.
// Fairness: none: a release is a race won by whichever spinner's exchange reaches the line first (on a NUMA machine
// usually the nearest one). Cost: one exchange to acquire, one store to release; under contention every release
// invalidates the line in every spinner's cache, and the spinners that read it free at once all try their exchange:
// their reads and failed exchanges take the line one after another (a storm the backoff spreads out).
// Leaves out: proportional backoff and the kernel's arch_spinlock fallbacks.
#pragma once

#include <algorithm>

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

struct TtasSpinlock {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc = "test-and-test-and-set spinlock with bounded exponential backoff: unfair, cheap",
      // Uncontended: the exchange; the release store.
      .lock = {.rmws = 1, .accesses = 0},
      .unlock = {.rmws = 0, .accesses = 1}};
  static constexpr uint32_t kMaxBackoff = 1024;  // PAUSEs between probes, at most

  struct Token {};  // nothing per acquisition

  // Fast path: true if the exchange found the lock free.
  bool enter(Token&) noexcept { return word.exchange(1, std::memory_order_acquire) == 0; }
  // Never waits: read first, so a held lock costs no write.
  bool try_enter(Token&) noexcept {
    return word.load(std::memory_order_relaxed) == 0 && word.exchange(1, std::memory_order_acquire) == 0;
  }
  // After a failed enter(): read until free, then try again; back off between reads after every lost race.
  void wait(Token&, bool yield) noexcept {
    uint32_t backoff = 1;
    for (;;) {
      while (word.load(std::memory_order_relaxed) != 0) {
        if (yield) {
          spin_relax(true);
        } else {
          for (uint32_t i = 0; i < backoff; ++i) cpu_pause();
          backoff = std::min(backoff * 2, kMaxBackoff);
        }
      }
      if (word.exchange(1, std::memory_order_acquire) == 0) return;
    }
  }
  void leave(Token&) noexcept { word.store(0, std::memory_order_release); }
  // Waiters are not queued: none to count.
  uint32_t queued(const Token&) const noexcept { return 0; }

  // Virtual time (vhandoff.hpp): a race, and the storm around it. The release's store first waits for the line to
  // serve what the last release queued on it (VHandoff::line_busy_until), then invalidates the word in every
  // spinner's cache. Each spinner looks at the word on its backoff schedule (1, 2, 4, ... kMaxBackoff PAUSEs apart
  // since it began waiting); the one whose first look after the store reads the line soonest wins (usually the
  // nearest, unless a far one looks sooner). Every other spinner that looks before the winner's read is served reads
  // the word free too: the line serves its read before the winner's exchange (a transfer each, which the winner waits
  // out), and its own exchange, which fails, after it (a transfer each from the winner, during the winner's hold,
  // which its release queues behind). The winner is woken at its look plus those reads, to pay the transfer and the
  // exchange itself; the lock stays free meanwhile: a newcomer may take it first. With one spinner there is no storm.
  // Leaves out: the looks of spinners later in their backoff (each a miss on the held word, off the hand-off), and a
  // newcomer's exchange on the free word queuing behind the storm (Lock's take() does not wait for line_busy_until).
  static VHandoff vhandoff(const VRelease& r) {
    VRelease store = r;
    store.now = std::max(r.now, r.line_busy_until);
    const auto next_look = [&](const vt::Waiter& w) {
      return ttas_next_look(store, r.states[size_t(w.cpu)].began, kMaxBackoff);
    };
    const vt::Waiter* win = first_to_look(store, [&](const vt::Waiter& x) { return int64_t(next_look(x)); });
    const vt::vtime read = next_look(*win) + r.transfer_to(win->cpu);  // the winner's read is served
    vt::vtime before = 0, after = 0;
    for (const vt::Waiter& w : r.waiters)
      if (&w != win && next_look(w) < read) {
        before += r.transfer_to(w.cpu);
        after += r.costs.transfer(win->cpu, w.cpu);
      }
    VHandoff h;
    h.wake(win->cpu, next_look(*win) + before);
    h.line_busy_until = h.wakes[0].at + r.transfer_to(win->cpu) + r.costs.op(Op::atomic_rmw) + after;
    return h;
  }

  std::atomic<uint32_t> word{0};  // 0 free, 1 held
};

}  // namespace alloclab
