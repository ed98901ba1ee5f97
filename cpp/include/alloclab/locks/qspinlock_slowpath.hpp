// queued_spin_lock_slowpath, written once for every queue policy (kinds/qspinlock.hpp's QueuedSpinlock), and the
// per-CPU queue nodes it queues on. Included only by the .cpp of a kind built on it (qspinlock.cpp, cna.cpp), which
// instantiates the slow path with its policy, as the kernel includes qspinlock.c a second time with CNA's hooks
// (kernel/locking/qspinlock.c, _GEN_CNA_LOCK_SLOWPATH in the CNA series).
//
// Models: kernel/locking/qspinlock.c's queued_spin_lock_slowpath (v6.x) with the CNA series' hook points
// (A. Kogan, "locking/qspinlock: Refactor the qspinlock slow path", v15, 2021): pv_init_node -> init_node,
// try_clear_tail, mcs_lock_handoff -> lock_handoff. Per-CPU nodes: one array per node type (the kernel's qnodes,
// which the CNA series enlarges to 32 bytes so that struct cna_node overlays struct qnode).
// Leaves out: pv_wait_node, pv_kick_node and pv_wait_head_or_lock (the CNA series uses the last to order the queue
// while the head spins; kinds/cna.hpp says what it does instead), qstat counters.
#pragma once

#include <atomic>
#include <cstdint>

#include "alloclab/locks/kinds/qspinlock.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

constexpr int kQspinlockMaxCpus = (1 << 14) - 1;  // the tail's 14-bit CPU field holds CPU + 1

// The calling thread's CPU number (qspinlock.cpp): the smallest free one, taken on its first slow path and freed at
// its exit.
int smp_processor_id();
// CPU numbers handed out so far (a bound for walks over the per-CPU nodes).
int qspinlock_cpus_used();

// A CPU's queue nodes of one type, one per nesting context, and how many are in use (qnodes[0].mcs.count in the
// kernel).
template <class Node>
struct alignas(64) PerCpuQnodes {
  Node nodes[QspinlockVal::kMaxNodes];
  std::atomic<uint32_t> count{0};
};
template <class Node>
inline PerCpuQnodes<Node> qnodes[kQspinlockMaxCpus];

// encode_tail / decode_tail: (CPU, index) <-> the word's tail field.
constexpr uint32_t encode_tail(int cpu, int idx) {
  return (uint32_t(cpu + 1) << (QspinlockVal::kTailOffset + 2)) | (uint32_t(idx) << QspinlockVal::kTailOffset);
}
template <class Node>
Node* decode_tail(uint32_t tail) {
  const int cpu = int(tail >> (QspinlockVal::kTailOffset + 2)) - 1;
  const int idx = int((tail >> QspinlockVal::kTailOffset) & 3);
  return &qnodes<Node>[cpu].nodes[idx];
}

// queued_spin_lock_slowpath. Call after enter() failed; returns holding the lock.
template <class QueuePolicy>
void QueuedSpinlock<QueuePolicy>::wait(Token& t, bool yield) noexcept {
  uint32_t v = val().load(std::memory_order_relaxed);
  // A pending -> locked hand-over in progress: look once more (_Q_PENDING_LOOPS = 1).
  if (v == kPendingVal) v = val().load(std::memory_order_relaxed);
  // Anyone pending or queued: queue.
  if ((v & ~kLockedMask) == 0) {
    // 0,0,* -> 0,1,*: we are the pending waiter.
    v = val().fetch_or(kPendingVal, std::memory_order_acquire);
    if ((v & ~kLockedMask) == 0) {
      // Wait for the owner to go (the locked byte to clear), then take it: *,1,0 -> *,0,1.
      if (v & kLockedMask)
        while (val().load(std::memory_order_acquire) & kLockedMask) spin_relax(yield);
      val().fetch_add(kLockedVal - kPendingVal, std::memory_order_relaxed);  // clear_pending_set_locked
      return;
    }
    // Someone pended or queued meanwhile: undo our pending bit if we set it, and queue.
    if (!(v & kPendingVal)) val().fetch_and(~kPendingVal, std::memory_order_relaxed);
  }

  // The queue: this CPU's next free node.
  PerCpuQnodes<Node>& mine = qnodes<Node>[smp_processor_id()];
  const int idx = int(mine.count.fetch_add(1, std::memory_order_relaxed));
  const uint32_t tail = encode_tail(int(&mine - qnodes<Node>), idx);
  Node& node = mine.nodes[idx];
  node.locked().store(0, std::memory_order_relaxed);
  node.next().store(nullptr, std::memory_order_relaxed);
  QueuePolicy::init_node(node, t, tail);
  // The lock may have become free meanwhile.
  if (!try_enter(t)) {
    // xchg_tail: publish our node as the tail (release: the node's initialisation with it), keep the other fields.
    uint32_t old = val().load(std::memory_order_relaxed);
    while (!val().compare_exchange_weak(old, (old & ~kTailMask) | tail, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
    }
    McsNode* next = nullptr;
    if (old & kTailMask) {  // a predecessor: link in and wait to become the head
      decode_tail<Node>(old)->next().store(&node, std::memory_order_release);
      mcs_wait(node, yield);
      next = node.next().load(std::memory_order_acquire);
    }
    // The head: wait for the owner and the pending waiter to go.
    while ((v = val().load(std::memory_order_acquire)) & kLockedPendingMask) spin_relax(yield);
    // Alone in the queue: take the lock and close (or hand on) the queue at once.
    if ((v & kTailMask) == tail && QueuePolicy::try_clear_tail(val(), v, node)) {
      mine.count.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    // Others queued behind us: set the locked byte, then make a successor the head.
    val().fetch_or(kLockedVal, std::memory_order_acquire);  // set_locked
    if (!next)
      while ((next = node.next().load(std::memory_order_acquire)) == nullptr) cpu_pause();
    QueuePolicy::lock_handoff(node, static_cast<Node&>(*next));
  }
  mine.count.fetch_sub(1, std::memory_order_relaxed);  // release the node
}

}  // namespace alloclab
