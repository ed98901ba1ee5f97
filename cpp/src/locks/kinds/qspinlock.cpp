// The qspinlock slow path with its native (MCS) queue, and the CPU numbers of the per-CPU queue nodes (see
// kinds/qspinlock.hpp, qspinlock_slowpath.hpp).
#include "alloclab/locks/kinds/qspinlock.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "alloclab/locks/qspinlock_slowpath.hpp"

namespace alloclab {

namespace {

std::atomic<int> cpus_used{0};  // CPU numbers ever handed out

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
      if (id_ >= kQspinlockMaxCpus) std::abort();  // 16383 threads in a slow path at once: beyond the tail's encoding
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

}  // namespace

int smp_processor_id() {
  static thread_local const ThisCpu cpu;
  return cpu.id();
}

int qspinlock_cpus_used() { return cpus_used.load(std::memory_order_acquire); }

template void QueuedSpinlock<McsQueue>::wait(Token&, bool) noexcept;

uint32_t Qspinlock::queued(const Token&) const noexcept {
  const uint32_t v = val().load(std::memory_order_acquire);
  uint32_t n = (v & kPendingVal) ? 1 : 0;
  if (!(v & kTailMask)) return n;
  // The queue is every node in use from which the next links reach the tail (a node has no link to its lock).
  const McsNode* last = decode_tail<McsNode>(v & kTailMask);
  const int cpus = qspinlock_cpus_used();
  for (int c = 0; c < cpus; ++c)
    for (uint32_t i = 0; i < qnodes<McsNode>[c].count.load(std::memory_order_relaxed) && i < kMaxNodes; ++i) {
      const McsNode* p = &qnodes<McsNode>[c].nodes[i];
      while (p && p != last) p = p->next_acquire();
      n += p == last;
    }
  return n;
}

}  // namespace alloclab
