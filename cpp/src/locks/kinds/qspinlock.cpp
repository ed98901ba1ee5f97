// The qspinlock slow path and its per-CPU queue nodes (see kinds/qspinlock.hpp).
#include "alloclab/locks/kinds/qspinlock.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "alloclab/locks/spin_wait.hpp"

namespace alloclab {

namespace {

// --- Per-CPU queue nodes ---

constexpr int kMaxCpus = (1 << 14) - 1;  // the tail's 14-bit CPU field holds CPU + 1

// A CPU's nodes, one per nesting context, and how many are in use (qnodes[0].mcs.count in the kernel).
struct alignas(64) PerCpuQnodes {
  McsNode nodes[Qspinlock::kMaxNodes];
  std::atomic<uint32_t> count{0};
};
PerCpuQnodes qnodes[kMaxCpus];
std::atomic<int> cpus_used{0};  // CPU numbers ever handed out (queued() looks no further)

// The CPU number of the calling thread: the smallest free one, taken on its first slow path and freed at its exit.
class ThisCpu {
 public:
  ThisCpu() {
    const std::lock_guard g(mu());
    if (!free_list().empty()) {
      id_ = free_list().back();
      free_list().pop_back();
    } else {
      id_ = cpus_used.load(std::memory_order_relaxed);
      if (id_ >= kMaxCpus) std::abort();  // 16383 threads in a slow path at once: beyond the tail's encoding
      cpus_used.store(id_ + 1, std::memory_order_release);
    }
  }
  ~ThisCpu() {
    const std::lock_guard g(mu());
    free_list().push_back(id_);
  }
  int id() const { return id_; }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<int>& free_list() {
    static std::vector<int> l;
    return l;
  }
  int id_;
};

int smp_processor_id() {
  static thread_local const ThisCpu cpu;
  return cpu.id();
}

uint32_t encode_tail(int cpu, int idx) {
  return (uint32_t(cpu + 1) << (Qspinlock::kTailOffset + 2)) | (uint32_t(idx) << Qspinlock::kTailOffset);
}
McsNode* decode_tail(uint32_t tail) {
  const int cpu = int(tail >> (Qspinlock::kTailOffset + 2)) - 1;
  const int idx = int((tail >> Qspinlock::kTailOffset) & 3);
  return &qnodes[cpu].nodes[idx];
}

}  // namespace

// --- The slow path ---

// queued_spin_lock_slowpath. Call after enter() failed; returns holding the lock.
void Qspinlock::wait(Token& t, bool yield) noexcept {
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
  PerCpuQnodes& mine = qnodes[smp_processor_id()];
  const int idx = int(mine.count.fetch_add(1, std::memory_order_relaxed));
  const uint32_t tail = encode_tail(int(&mine - qnodes), idx);
  McsNode& node = mine.nodes[idx];
  node.locked().store(0, std::memory_order_relaxed);
  node.next().store(nullptr, std::memory_order_relaxed);
  // The lock may have become free meanwhile.
  if (!try_enter(t)) {
    // xchg_tail: publish our node as the tail (release: the node's initialisation with it), keep the other fields.
    uint32_t old = val().load(std::memory_order_relaxed);
    while (!val().compare_exchange_weak(old, (old & ~kTailMask) | tail, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
    }
    McsNode* next = nullptr;
    if (old & kTailMask) {  // a predecessor: link in and wait to become the head
      decode_tail(old)->next().store(&node, std::memory_order_release);
      mcs_wait(node, yield);
      next = node.next().load(std::memory_order_acquire);
    }
    // The head: wait for the owner and the pending waiter to go.
    while ((v = val().load(std::memory_order_acquire)) & kLockedPendingMask) spin_relax(yield);
    // Alone in the queue: take the lock and clear the tail at once.
    if ((v & kTailMask) == tail &&
        val().compare_exchange_strong(v, kLockedVal, std::memory_order_acquire, std::memory_order_relaxed)) {
      mine.count.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    // Others queued behind us: set the locked byte, then make our successor the head.
    val().fetch_or(kLockedVal, std::memory_order_acquire);  // set_locked
    if (!next)
      while ((next = node.next().load(std::memory_order_acquire)) == nullptr) cpu_pause();
    mcs_pass(*next, 1);
  }
  mine.count.fetch_sub(1, std::memory_order_relaxed);  // release the node
}

uint32_t Qspinlock::queued(const Token&) const noexcept {
  const uint32_t v = val().load(std::memory_order_acquire);
  uint32_t n = (v & kPendingVal) ? 1 : 0;
  if (!(v & kTailMask)) return n;
  // The queue is every node in use from which the next links reach the tail (a node has no link to its lock).
  const McsNode* last = decode_tail(v & kTailMask);
  const int cpus = cpus_used.load(std::memory_order_acquire);
  for (int c = 0; c < cpus; ++c)
    for (uint32_t i = 0; i < qnodes[c].count.load(std::memory_order_relaxed) && i < kMaxNodes; ++i) {
      const McsNode* p = &qnodes[c].nodes[i];
      while (p && p != last) p = p->next_acquire();
      n += p == last;
    }
  return n;
}

}  // namespace alloclab
