// CNA's release: the scan for a local successor, the secondary queue and its flush (see kinds/cna.hpp).
#include "alloclab/locks/kinds/cna.hpp"

namespace alloclab {

namespace {

using Token = CnaSpinlock::Token;

Token* as_cna(McsNode* n) { return static_cast<Token*>(n); }
// The secondary queue's head a `locked` value carries (nullptr for 1: none).
Token* secondary(uintptr_t locked) { return locked > 1 ? reinterpret_cast<Token*>(locked) : nullptr; }

// find_successor: the first waiter of `me`'s node in the main queue after `me` (whose next is set); the waiters
// before it move to the end of the secondary queue, whose head `me.locked` then names. nullptr when none is local
// (nothing moves).
Token* find_successor(Token& me) {
  Token* next = as_cna(me.next().load(std::memory_order_acquire));
  if (next->numa_node == me.numa_node) return next;
  Token* first_moved = next;
  Token* last_moved = next;
  for (Token* cur = as_cna(next->next().load(std::memory_order_acquire)); cur;
       cur = as_cna(cur->next().load(std::memory_order_acquire))) {
    if (cur->numa_node == me.numa_node) {
      last_moved->next().store(nullptr, std::memory_order_relaxed);
      if (Token* head = secondary(me.locked_))
        head->sec_tail->next().store(first_moved, std::memory_order_relaxed);
      else
        me.locked_ = reinterpret_cast<uintptr_t>(first_moved);
      secondary(me.locked_)->sec_tail = last_moved;
      return cur;
    }
    last_moved = cur;
  }
  return nullptr;
}

}  // namespace

// cna_lock_handoff with the paper's unlock: a local successor, else the secondary queue, else the main queue.
void CnaSpinlock::leave(Token& me) noexcept {
  if (me.next().load(std::memory_order_acquire) == nullptr) {
    // No successor in sight: close the lock, or make the secondary queue the main one.
    McsNode* self = &me;
    Token* head = secondary(me.locked_);
    McsNode* new_tail = head ? head->sec_tail : nullptr;
    const uint32_t batch = local_handoffs;
    local_handoffs = 0;  // before the lock can be someone else's
    if (tail.compare_exchange_strong(self, new_tail, std::memory_order_release, std::memory_order_relaxed)) {
      if (head) mcs_pass(*head, 1);
      return;
    }
    local_handoffs = batch;  // a successor came: still ours
    while (me.next().load(std::memory_order_acquire) == nullptr) cpu_pause();
  }
  Token* succ = local_handoffs < kThreshold ? find_successor(me) : nullptr;
  if (succ) {  // a local batch goes on, the secondary queue rides along
    ++local_handoffs;
    mcs_pass(*succ, me.locked_);
  } else if (Token* head = secondary(me.locked_)) {  // flush: the secondary queue goes first
    local_handoffs = 0;
    head->sec_tail->next().store(me.next().load(std::memory_order_acquire), std::memory_order_relaxed);
    mcs_pass(*head, 1);
  } else {
    local_handoffs = 0;
    mcs_pass(*me.next().load(std::memory_order_acquire), 1);
  }
}

VHandoff CnaSpinlock::vhandoff(const VRelease& r) {
  VHandoff h;
  const vt::Waiter* win = r.batch < kThreshold ? oldest_on_node(r, r.node_of(r.releaser)) : nullptr;
  vt::vtime scan = 0;
  if (win) {
    h.batch = true;
    for (const vt::Waiter& w : r.waiters) {
      if (&w == win) break;
      if (w.since >= r.previous_release) scan += r.costs.transfer(w.cpu, r.releaser);
    }
  } else {
    win = &r.waiters.front();
  }
  h.wake(win->cpu, r.now + scan + r.transfer_to(win->cpu));
  h.owned = true;
  return h;
}

}  // namespace alloclab
