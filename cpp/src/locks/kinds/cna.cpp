// CNA's hooks into the qspinlock slow path: the head's pass with the secondary queue, and the head alone in the main
// queue (see kinds/cna.hpp; kernel/locking/qspinlock_cna.h of the CNA series, v15).
#include "alloclab/locks/kinds/cna.hpp"

#include "alloclab/locks/qspinlock_slowpath.hpp"

namespace alloclab {

namespace {

// The secondary queue's tail a `locked` value names (nullptr for 0 or 1: none); its next is the queue's head.
CnaNode* secondary_tail(uintptr_t locked) { return locked > 1 ? decode_tail<CnaNode>(uint32_t(locked)) : nullptr; }
CnaNode* next_of(McsNode& n) { return static_cast<CnaNode*>(n.next().load(std::memory_order_acquire)); }

// The first waiter of `head`'s node in the main queue from `next` (linked behind `head`, which holds the lock); the
// waiters before it move to the end of the secondary queue, which head.locked_ then names. nullptr when none is local
// (nothing moves). Stops at the first node whose next is not linked yet: the main queue's tail never moves.
CnaNode* find_local_successor(CnaNode& head, CnaNode& next) {
  if (next.numa_node == head.numa_node) return &next;
  CnaNode* last_moved = &next;
  for (CnaNode* cur = next_of(next); cur; cur = next_of(*cur)) {
    if (cur->numa_node == head.numa_node) {
      // Waiters next..last_moved go to the secondary queue's end; the queue stays circular.
      CnaNode* sec_tail = secondary_tail(head.locked_);
      CnaNode* sec_head = sec_tail ? next_of(*sec_tail) : &next;
      if (sec_tail) sec_tail->next().store(&next, std::memory_order_relaxed);
      last_moved->next().store(sec_head, std::memory_order_relaxed);
      head.locked_ = last_moved->encoded_tail;
      return cur;
    }
    last_moved = cur;
  }
  return nullptr;
}

}  // namespace

template void QueuedSpinlock<CnaQueue>::wait(Token&, bool) noexcept;

// cna_try_clear_tail: the head is alone in the main queue, the word `v` (its tail ours, locked and pending clear).
bool CnaQueue::try_clear_tail(std::atomic_ref<uint32_t> word, uint32_t v, CnaNode& node) noexcept {
  CnaNode* sec_tail = secondary_tail(node.locked_);
  if (!sec_tail) return McsQueue::try_clear_tail(word, v, node);  // both queues empty: qspinlock's
  // cna_splice_head: the secondary queue becomes the main one. Its circle is broken first (release with the word:
  // whoever queues behind the new tail links into a null next), and mended if someone queued behind us meanwhile.
  CnaNode* sec_head = next_of(*sec_tail);
  sec_tail->next().store(nullptr, std::memory_order_relaxed);
  if (!word.compare_exchange_strong(v, sec_tail->encoded_tail | QspinlockVal::kLockedVal, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
    sec_tail->next().store(sec_head, std::memory_order_relaxed);
    return false;
  }
  mcs_pass(*sec_head, 1);  // a remote hand-off: no secondary queue, no local passes
  return true;
}

// cna_lock_handoff with the paper's scan: a local successor, else the secondary queue, else the main queue's next.
void CnaQueue::lock_handoff(CnaNode& node, CnaNode& next) noexcept {
  if (node.local_handoffs < kThreshold)
    if (CnaNode* succ = find_local_successor(node, next)) {  // a local batch goes on, the secondary queue rides along
      succ->local_handoffs = node.local_handoffs + 1;
      mcs_pass(*succ, node.locked_ > 1 ? node.locked_ : 1);
      return;
    }
  if (CnaNode* sec_tail = secondary_tail(node.locked_)) {  // flush: the secondary queue goes in front of the main one
    CnaNode* sec_head = next_of(*sec_tail);
    sec_tail->next().store(&next, std::memory_order_relaxed);
    mcs_pass(*sec_head, 1);
    return;
  }
  mcs_pass(next, 1);
}

VHandoff CnaSpinlock::vhandoff(const VRelease& r) {
  VHandoff h;
  const vt::Waiter& oldest = r.waiters.front();
  if (oldest.since >= r.previous_release) {  // the pending waiter
    h.wake(oldest.cpu, r.now + r.transfer_to(oldest.cpu));
    h.owned = true;
    return h;
  }
  const vt::Waiter* win = r.batch < kThreshold ? oldest_on_node(r, r.node_of(r.releaser)) : nullptr;
  vt::vtime scan = 0;
  if (win) {
    h.batch = true;
    for (const vt::Waiter& w : r.waiters) {
      if (&w == win) break;
      if (w.since >= r.previous_release) scan += r.costs.transfer(w.cpu, r.releaser);
    }
  } else {
    win = &oldest;
  }
  h.wake(win->cpu, r.now + scan + r.transfer_to(win->cpu));
  h.owned = true;
  return h;
}

}  // namespace alloclab
