// McsNode: the queue node of the MCS lock, and the MCS queue operations every queued kind is built from.
//
// Models: kernel/locking/mcs_spinlock.h's struct mcs_spinlock (next, locked) and its two halves: an acquirer swaps
// its node into a queue's tail and links itself behind its predecessor; a holder passes the queue on by one store
// into its successor's node. `locked` is 0 while the node waits; the predecessor's pass stores a non-zero value,
// which some kinds use to say more than "your turn" (cohort: whether the global lock comes along; CNA: the tail of its
// secondary queue). The kinds built on it: mcs, qspinlock (per-CPU nodes), cna, cohort and hmcs (per-node queues),
// shfllock (a queue its head reorders). Plain fields reached through std::atomic_ref, so that a node costs nothing
// until an acquisition initialises it.
// Leaves out: the kernel's `count` (qspinlock keeps its own nesting count beside its per-CPU nodes).
#pragma once

#include <atomic>
#include <cstdint>

#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

struct McsNode {
  McsNode* next_;
  uintptr_t locked_;  // 0: waiting; non-zero: passed on (the value is the passer's message)

  std::atomic_ref<McsNode*> next() noexcept { return std::atomic_ref<McsNode*>(next_); }
  std::atomic_ref<uintptr_t> locked() noexcept { return std::atomic_ref<uintptr_t>(locked_); }
  McsNode* next_acquire() const noexcept {
    return std::atomic_ref<McsNode* const>(next_).load(std::memory_order_acquire);
  }
};

// Queues `me` at `tail` and links it behind its predecessor; returns the predecessor (nullptr: the queue was empty
// and `me` is its head). acq_rel: the node's initialisation is published with the swap (the successor writes our
// next), and an empty queue's previous holder's section is ours.
inline McsNode* mcs_enqueue(std::atomic<McsNode*>& tail, McsNode& me) noexcept {
  me.next().store(nullptr, std::memory_order_relaxed);
  me.locked().store(0, std::memory_order_relaxed);
  McsNode* prev = tail.exchange(&me, std::memory_order_acq_rel);
  if (prev) prev->next().store(&me, std::memory_order_release);  // link in; the predecessor passes on through it
  return prev;
}

// Makes `me` the head of the queue at `tail` only if the queue is empty (a trylock: it never waits), with `locked`
// preset to `message`; true if it did. acq_rel, as mcs_enqueue's swap (TSan found an acquire-only version: a later
// waiter writes our next).
inline bool mcs_try_enqueue(std::atomic<McsNode*>& tail, McsNode& me, uintptr_t message) noexcept {
  me.next().store(nullptr, std::memory_order_relaxed);
  me.locked().store(message, std::memory_order_relaxed);
  McsNode* expected = nullptr;
  return tail.compare_exchange_strong(expected, &me, std::memory_order_acq_rel, std::memory_order_relaxed);
}

// Spins on our own node until the predecessor passes the queue on; returns what it passed (non-zero).
inline uintptr_t mcs_wait(McsNode& me, bool yield) noexcept {
  uintptr_t v;
  while ((v = me.locked().load(std::memory_order_acquire)) == 0) spin_relax(yield);
  return v;
}

// The successor of `me`, the head of the queue at `tail`: nullptr when there is none and `me` was the tail, which is
// then reset (the queue is empty). Waits for a successor that swapped itself in but has not linked yet.
inline McsNode* mcs_successor_or_close(std::atomic<McsNode*>& tail, McsNode& me) noexcept {
  if (McsNode* succ = me.next().load(std::memory_order_acquire)) return succ;
  McsNode* self = &me;
  if (tail.compare_exchange_strong(self, nullptr, std::memory_order_release, std::memory_order_relaxed)) return nullptr;
  McsNode* succ;
  while ((succ = me.next().load(std::memory_order_acquire)) == nullptr) cpu_pause();
  return succ;
}

// Passes the queue on to `succ` with `message` (non-zero): one store into the successor's line.
inline void mcs_pass(McsNode& succ, uintptr_t message) noexcept {
  succ.locked().store(message, std::memory_order_release);
}

// Nodes linked behind `n` (while they cannot leave the queue: only for tests that build a known queue order).
inline uint32_t mcs_count_behind(const McsNode& n) noexcept {
  uint32_t count = 0;
  for (const McsNode* t = n.next_acquire(); t; t = t->next_acquire()) ++count;
  return count;
}

}  // namespace alloclab
