// Lock slow paths and lock_stat hooks (see lock.hpp).
#include "alloclab/lock.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace alloclab {

namespace {
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, nullptr, nullptr, 0);
}
constexpr int kMutexSpins = 128;        // optimistic spin before sleeping, like mutex_optimistic_spin's budget
constexpr uint32_t kMaxBackoff = 1024;  // spin: PAUSEs between probes, at most
}  // namespace

Lock::Lock(LockDomain& domain, std::string_view cls) : Lock(domain, domain.class_id(cls)) {}

Lock::Lock(LockDomain& domain, LockClassId cls)
    : domain_(&domain), cls_(cls), kind_(domain.kind_of(cls)), stat_(domain.lockstat()), yield_(domain.spin_yield()) {
  pthread_mutex_init(&pmutex_, nullptr);
}

Lock::~Lock() { pthread_mutex_destroy(&pmutex_); }

bool Lock::try_enter(LockToken& t) {
  switch (kind_) {
    case LockKind::spin:
      return word_.load(std::memory_order_relaxed) == 0 && word_.exchange(1, std::memory_order_acquire) == 0;
    case LockKind::ticket: {
      // Free iff next == owner; the CAS on next fails if anyone took a ticket meanwhile.
      uint32_t owner = word_.load(std::memory_order_acquire);
      uint32_t expected = owner;
      if (!next_ticket_.compare_exchange_strong(expected, owner + 1, std::memory_order_acquire,
                                                std::memory_order_relaxed))
        return false;
      t.ticket = owner;
      return true;
    }
    case LockKind::mcs: {
      t.node.next.store(nullptr, std::memory_order_relaxed);
      t.node.locked.store(1, std::memory_order_relaxed);
      // acq_rel, as enter()'s exchange: the node becomes the tail, and a later waiter writes its next field, so
      // the initialisation above must be released with it (TSan found the acquire-only version).
      McsNode* expected = nullptr;
      if (!tail_.compare_exchange_strong(expected, &t.node, std::memory_order_acq_rel, std::memory_order_relaxed))
        return false;
      head_.store(&t.node, std::memory_order_relaxed);
      return true;
    }
    case LockKind::mutex:
    case LockKind::pthread: return enter(t);
  }
  return false;
}

void Lock::wait(LockToken& t) {
  switch (kind_) {
    case LockKind::spin: {
      uint32_t backoff = 1;
      for (;;) {
        while (word_.load(std::memory_order_relaxed) != 0) {
          if (yield_) {
            sched_yield();
          } else {
            for (uint32_t i = 0; i < backoff; ++i) cpu_relax();
            backoff = std::min(backoff * 2, kMaxBackoff);
          }
        }
        if (word_.exchange(1, std::memory_order_acquire) == 0) return;
      }
    }
    case LockKind::ticket:
      while (word_.load(std::memory_order_acquire) != t.ticket) {
        if (yield_)
          sched_yield();
        else
          cpu_relax();
      }
      return;
    case LockKind::mcs:
      while (t.node.locked.load(std::memory_order_acquire) != 0) {
        if (yield_)
          sched_yield();
        else
          cpu_relax();
      }
      return;
    case LockKind::mutex: {
      for (int i = 0; i < kMutexSpins && !yield_; ++i) {
        uint32_t expected = 0;
        if (word_.load(std::memory_order_relaxed) == 0 &&
            word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
          return;
        cpu_relax();
      }
      uint32_t c = word_.exchange(2, std::memory_order_acquire);
      while (c != 0) {
        futex(&word_, FUTEX_WAIT_PRIVATE, 2);
        c = word_.exchange(2, std::memory_order_acquire);
      }
      return;
    }
    case LockKind::pthread: pthread_mutex_lock(&pmutex_); return;
  }
}

void Lock::wake_one() { futex(&word_, FUTEX_WAKE_PRIVATE, 1); }

uint32_t Lock::queued() const {
  switch (kind_) {
    case LockKind::ticket: {
      const uint32_t next = next_ticket_.load(std::memory_order_acquire);
      const uint32_t owner = word_.load(std::memory_order_acquire);
      return next == owner ? 0 : next - owner - 1;
    }
    case LockKind::mcs: {
      // Walk from the holder's node; only called while the holder keeps the lock (tests), so nodes are alive.
      uint32_t n = 0;
      const McsNode* node = tail_.load(std::memory_order_acquire) ? head_.load(std::memory_order_relaxed) : nullptr;
      while (node && (node = node->next.load(std::memory_order_acquire)) != nullptr) ++n;
      return n;
    }
    default: return 0;
  }
}

void Lock::stat_acquired(LockToken& t, uint64_t contended_at, uint64_t acquired_at) {
  LockStatThread& th = tls_lockstat;
  if (th.domain != domain_) return;
  LockStatCounters& c = th.slots[cls_];
  const int32_t prev_cpu = last_cpu_.load(std::memory_order_relaxed);
  if (contended_at != 0) {
    const uint64_t waited = acquired_at - contended_at;
    ++c.contentions;
    if (prev_cpu != th.cpu) ++c.con_bounces;
    c.wait_total += waited;
    c.wait_min = std::min(c.wait_min, waited);
    c.wait_max = std::max(c.wait_max, waited);
  }
  ++c.acquisitions;
  if (prev_cpu != th.cpu) {
    ++c.acq_bounces;
    last_cpu_.store(th.cpu, std::memory_order_relaxed);
  }
  t.acquired_at = contended_at != 0 ? acquired_at : clock_ticks();
}

void Lock::stat_released(LockToken& t) {
  LockStatThread& th = tls_lockstat;
  if (th.domain != domain_) return;
  const uint64_t held = clock_ticks() - t.acquired_at;
  LockStatCounters& c = th.slots[cls_];
  c.hold_total += held;
  c.hold_min = std::min(c.hold_min, held);
  c.hold_max = std::max(c.hold_max, held);
}

}  // namespace alloclab
