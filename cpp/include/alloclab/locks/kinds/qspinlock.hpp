// qspinlock: the kernel's queued spinlock (kernel/locking/qspinlock.c, include/asm-generic/qspinlock_types.h, v6.x),
// the spinlock_t of every SMP x86 kernel since v4.2.
//
// Algorithm: W. Long and P. Zijlstra's qspinlock: one 4-byte word holds the locked byte (bits 0-7), the pending bit
// (bit 8) and the MCS tail (bits 16-31: 2 bits of per-CPU node index and 14 bits of CPU number + 1). Fast path: one
// cmpxchg 0 -> locked. The second contender does not queue: it sets the pending bit and spins on the word until the
// locked byte clears, then takes it (clear_pending_set_locked). Contenders beyond queue on per-CPU MCS nodes
// (mcs_node.hpp; four per CPU, one per nesting context): the tail is exchanged into the word, the node is linked
// behind its predecessor and spins on its own flag; the queue head spins on the word until locked and pending are
// both clear, takes the lock (clearing the tail if it is alone), and passes the head role to its successor. A "CPU"
// here is a thread: each thread that ever queues gets a CPU number of its own (returned when it exits).
// The word, its fast path and its slow path are QueuedSpinlock<QueuePolicy>, the queue's policy its hooks, as the
// kernel compiles qspinlock.c once natively and once more with other hooks (qspinlock_paravirt.h, and the CNA
// series' qspinlock_cna.h: kinds/cna.hpp). The slow path is in qspinlock_slowpath.hpp; this kind's policy is
// McsQueue, the native hooks (__try_clear_tail, __mcs_lock_handoff of the CNA series' refactoring).
// Fairness: FIFO among waiters (pending first, then the queue). Cost: one cmpxchg and one plain byte store
// uncontended (queued_spin_unlock's smp_store_release on the locked byte); with contention one line transfer per
// hand-off (the head spins on the lock word itself).
// The word is reached through std::atomic_ref, 4 bytes wide or, for the release, its locked byte alone: mixed-width
// atomics on one word, as the kernel's union in qspinlock_types.h does (x86 and arm64 order a byte store against a
// locked RMW on the containing word; ISO C++ leaves mixed widths unspecified, so this kind relies on the hardware as
// the kernel does). Little-endian hosts only: the locked byte is the word's first byte.
// Leaves out: paravirt spinning (pv_wait_node/pv_kick), the 8-bit xchg of the tail (a cmpxchg loop on the word here,
// the kernel's NR_CPUS >= 16K variant), qspinlock statistics.
#pragma once

#include <bit>

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/mcs.hpp"

namespace alloclab {

// The word's fields (asm-generic/qspinlock_types.h, NR_CPUS < 16K).
struct QspinlockVal {
  static constexpr uint32_t kLockedVal = 1u;          // _Q_LOCKED_VAL
  static constexpr uint32_t kLockedMask = 0xffu;      // _Q_LOCKED_MASK
  static constexpr uint32_t kPendingVal = 1u << 8;    // _Q_PENDING_VAL
  static constexpr uint32_t kTailOffset = 16;         // _Q_TAIL_OFFSET: index (2 bits), then CPU + 1 (14 bits)
  static constexpr uint32_t kTailMask = 0xffff0000u;  // _Q_TAIL_MASK
  static constexpr uint32_t kLockedPendingMask = kLockedMask | kPendingVal;
  static constexpr int kMaxNodes = 4;  // MAX_NODES: task, softirq, hardirq, nmi
};

// The queued spinlock over a queue policy, which provides (all static): Token (the kind's per-acquisition token);
// Node (the per-CPU queue node, an McsNode or derived from one: the kernel's struct qnode, which a policy's own node
// overlays); init_node(node, token, tail) (pv_init_node: after the node's next and locked are cleared, before it is
// published; `tail` is the node's code in the word); try_clear_tail(word, v, node) (the head, alone in the queue, its
// tail in `v` and locked and pending clear in it: take the lock, leaving the queue closed or handed on; false if the
// word changed, someone queued behind it); lock_handoff(node, next) (the head, holding the lock, passes the head
// role on; `next` is its linked successor).
template <class QueuePolicy>
struct QueuedSpinlock : QspinlockVal, QueuePolicy {
  using Token = typename QueuePolicy::Token;
  using Node = typename QueuePolicy::Node;

  // queued_spin_lock's fast path: 0 -> locked.
  bool enter(Token&) noexcept {
    uint32_t expected = 0;
    return val().compare_exchange_strong(expected, kLockedVal, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // queued_spin_trylock: only when the whole word is 0 (nobody holds, pends or queues).
  bool try_enter(Token& t) noexcept { return val().load(std::memory_order_relaxed) == 0 && enter(t); }
  // queued_spin_lock_slowpath (qspinlock_slowpath.hpp, instantiated in the kind's .cpp): pending, or the queue.
  void wait(Token& t, bool yield) noexcept;
  // queued_spin_unlock: smp_store_release(&lock->locked, 0), a plain store of the locked byte.
  void leave(Token&) noexcept { locked().store(0, std::memory_order_release); }

  // The whole word (atomic_t val), and its locked byte (u8 locked: the first byte on a little-endian host).
  std::atomic_ref<uint32_t> val() const noexcept { return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word_)); }
  std::atomic_ref<uint8_t> locked() noexcept { return std::atomic_ref<uint8_t>(*reinterpret_cast<uint8_t*>(&word_)); }

  alignas(std::atomic_ref<uint32_t>::required_alignment) uint32_t word_ = 0;  // locked byte | pending bit | tail
};
static_assert(std::endian::native == std::endian::little, "qspinlock's locked byte is the first byte of its word");

// qspinlock.c's native queue: plain MCS.
struct McsQueue {
  struct Token {};  // the queue node is per CPU, not per acquisition
  using Node = McsNode;

  static void init_node(McsNode&, const Token&, uint32_t) noexcept {}
  // __try_clear_tail: locked, tail cleared, in one cmpxchg (acquire: the previous holder's section is ours).
  static bool try_clear_tail(std::atomic_ref<uint32_t> word, uint32_t v, McsNode&) noexcept {
    return word.compare_exchange_strong(v, QspinlockVal::kLockedVal, std::memory_order_acquire,
                                        std::memory_order_relaxed);
  }
  // __mcs_lock_handoff: arch_mcs_lock_handoff(&next->locked, 1).
  static void lock_handoff(McsNode&, McsNode& next) noexcept { mcs_pass(next, 1); }
};

struct Qspinlock : QueuedSpinlock<McsQueue> {
  static constexpr LockKindTraits kTraits{
      .fifo = true,
      .doc =
          "the kernel's queued spinlock: 4-byte word with locked byte, pending bit "
          "and MCS tail over per-CPU nodes; the "
          "second contender spins on the pending bit, the others queue (FIFO); the default for kernel "
          "spinlocks",
      // Uncontended: queued_spin_lock's cmpxchg; queued_spin_unlock's store of the locked byte.
      .lock = {.rmws = 1, .accesses = 0},
      .unlock = {.rmws = 0, .accesses = 1}};

  // The pending waiter plus the nodes queued behind the tail's predecessors (for tests; call while holding the lock).
  uint32_t queued(const Token&) const noexcept;

  // Virtual time (vhandoff.hpp): FIFO, owned by the oldest waiter at once after one line transfer. The pending
  // waiter and the queue head both spin on the lock word, so the releaser's store reaches the next owner in one
  // transfer; the head loaded (and prefetched) its own `next` while it waited, so unlike MCS's release (mcs_pass_at)
  // no load of a line its successor wrote lies on the hand-off; its store into that node comes after it has the lock.
  static VHandoff vhandoff(const VRelease& r) {
    const vt::Waiter& next = r.waiters.front();
    VHandoff h;
    h.wake(next.cpu, r.now + r.transfer_to(next.cpu));
    h.owned = true;
    return h;
  }
};
extern template void QueuedSpinlock<McsQueue>::wait(Token&, bool) noexcept;

}  // namespace alloclab
