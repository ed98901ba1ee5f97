// ShflLock's waiting side: the head's shuffle, its wait for the word, and the head role passed on (see
// kinds/shfllock.hpp).
#include "alloclab/locks/kinds/shfllock.hpp"

namespace alloclab {

namespace {
int32_t node_of(const McsNode* n) { return static_cast<const Shfllock::Token*>(n)->numa_node; }
}  // namespace

// Moves the waiters of `me`'s node forward, each right behind the last one already grouped behind `me`; keeps the
// others in their order. Call as the queue's head. Rewrites the links of nodes that have a successor only: the tail's
// next belongs to the newcomer that links behind it.
void Shfllock::shuffle(Token& me) noexcept {
  if (batch >= kMaxBatch) return;  // let the queue's order bring the other nodes in
  McsNode* last = &me;             // the end of the group of our node's waiters behind us
  McsNode* prev = &me;             // the node before `cur`
  McsNode* cur = me.next().load(std::memory_order_acquire);
  while (cur) {
    McsNode* next = cur->next().load(std::memory_order_acquire);
    if (!next) break;  // cur may be the tail: it stays
    if (node_of(cur) != me.numa_node) {
      prev = cur;
    } else if (prev == last) {  // already in the group
      prev = last = cur;
    } else {  // unlink cur from behind prev, relink it behind last
      prev->next().store(next, std::memory_order_relaxed);
      cur->next().store(last->next().load(std::memory_order_relaxed), std::memory_order_relaxed);
      last->next().store(cur, std::memory_order_release);
      last = cur;
    }
    cur = next;
  }
}

// Call after enter() failed: wait to head the queue, shuffle, take the word, and make the next waiter the head.
void Shfllock::wait(Token& me, bool yield) noexcept {
  mcs_wait(me, yield);
  shuffle(me);
  while (!try_enter(me)) spin_relax(yield);
  const uint32_t run = batch;
  batch = 0;  // before the queue can have another head
  if (McsNode* succ = mcs_successor_or_close(tail, me)) {
    batch = node_of(succ) == me.numa_node ? run + 1 : 0;
    mcs_pass(*succ, 1);
  }
}

VHandoff Shfllock::vhandoff(const VRelease& r) {
  VHandoff h;
  const vt::Waiter* head = r.batch < kMaxBatch ? oldest_on_node(r, r.node_of(r.releaser)) : nullptr;
  if (head)
    h.batch = true;
  else
    head = &r.waiters.front();
  h.wake(head->cpu, r.now);
  return h;
}

}  // namespace alloclab
