// Lock: one lock type whose primitive is chosen at run time, with lock_stat hooks.
//
// Models: the locks of the kernel's allocator paths (spinlock_t, struct mutex) and the user-space primitives a
// kernel engineer compares them with. The primitive of each lock is its lock class's kind in the run's LockConfig;
// the kinds are listed once in lock_kinds.hpp, each in its own file under kinds/ (what it is, its paper or kernel
// source, its fairness and its cost). Every acquisition goes through a LockToken owned by the caller (usually on
// its stack through LockGuard): it holds the kind's per-acquisition state (an MCS queue node, a ticket) and the
// acquisition timestamp, so no primitive needs thread-local storage.
// Layout: the kind's lock words fill the first cache line(s) of a Lock; the read-mostly metadata (domain, class,
// kind, flags) and lock_stat's last CPU sit on a line of their own, so spinning on the words never drags them along.
// When the run is oversubscribed (more workers than host PUs) spinning waiters sched_yield() so a preempted holder
// or queue successor gets the CPU; otherwise they spin with PAUSE. In a virtual-clock run the simulator's fibers
// use the lock's VirtualLock instead (virtual_lock.hpp, the kind's vhandoff()); the controlling thread's set-up and
// checks still use the kind's own code.
// Leaves out: interrupts (irqsave is a no-op in user space), lockdep, priority inheritance.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <type_traits>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/locks/lock_kinds.hpp"
#include "alloclab/locks/virtual_lock.hpp"

namespace alloclab {

// Per-acquisition state: one token per kind (the lock uses its own kind's) and lock_stat's acquisition time. Must
// outlive the critical section (it does, on the stack of the holder). Trivially constructible: nothing is written
// until an acquisition needs it.
struct LockToken {
#define ALLOCLAB_KIND_TOKEN(name, Type) [[no_unique_address]] Type::Token name;
  ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_TOKEN)
#undef ALLOCLAB_KIND_TOKEN
  uint64_t acquired_at;  // clock ticks, set at the acquisition when lock_stat is on
};
static_assert(std::is_trivially_default_constructible_v<LockToken>);

class Lock {
 private:
  // Calls f(kind state, kind token) for this lock's kind.
  template <class F>
  decltype(auto) with_kind(LockToken& t, F&& f) const {
    auto& s = const_cast<State&>(state_);
    switch (kind_) {
#define ALLOCLAB_KIND_CASE(name, Type) \
  case LockKind::name: return f(s.name, t.name);
      ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_CASE)
#undef ALLOCLAB_KIND_CASE
    }
    __builtin_unreachable();
  }
  // NUMA-aware kinds queue an acquirer by its model node: the attached worker's (0 for any other thread).
  template <class T>
  static void set_node(T& kt) {
    if constexpr (requires { kt.numa_node; }) kt.numa_node = tls_lockstat.node;
  }
  // The kind's read side, when Read and it has one (ReadSideKind); else its (exclusive) lock.
  template <bool Read, class K>
  static bool enter(K& k, typename K::Token& kt) {
    if constexpr (Read && ReadSideKind<K>)
      return k.enter_read(kt);
    else
      return k.enter(kt);
  }
  template <bool Read, class K>
  static bool try_enter(K& k, typename K::Token& kt) {
    if constexpr (Read && ReadSideKind<K>)
      return k.try_enter_read(kt);
    else
      return k.try_enter(kt);
  }
  template <bool Read, class K>
  static void wait(K& k, typename K::Token& kt, bool yield) {
    if constexpr (Read && ReadSideKind<K>)
      k.wait_read(kt, yield);
    else
      k.wait(kt, yield);
  }
  template <bool Read, class K>
  static void leave(K& k, typename K::Token& kt) {
    if constexpr (Read && ReadSideKind<K>)
      k.leave_read(kt);
    else
      k.leave(kt);
  }
  // The kind's uncontended attempt: its own acquire when it has one (pthread_mutex_lock, which returns owning the
  // lock), else enter(). True: acquired; false: wait() must follow.
  template <bool Read, class K>
  static bool attempt(K& k, typename K::Token& kt, bool yield) {
    if constexpr (!Read || !ReadSideKind<K>)
      if constexpr (requires { k.acquire(kt, yield); }) {
        k.acquire(kt, yield);
        return true;
      }
    return enter<Read>(k, kt);
  }

  // The uncontended acquisition inline, as the kernel's queued_spin_lock() before its out-of-line slowpath: a run
  // without lock_stat times the kind's own code, not a call chain around it.
  template <bool Read>
  void lock_as(LockToken& t) {
    if (vlock_ && vt::current_cpu() >= 0) [[unlikely]] {
      vlock(t, Read);
      return;
    }
    if (!stat_ && with_kind(t, [this](auto& k, auto& kt) {
          set_node(kt);
          return attempt<Read>(k, kt, yield_);
        })) [[likely]]
      return;
    lock_slow<Read>(t);
  }
  // lock_as() past its fast path: the wait of a run without lock_stat, or every acquisition of one with it.
  template <bool Read>
  [[gnu::noinline]] void lock_slow(LockToken& t) {
    if (!stat_) {
      with_kind(t, [this](auto& k, auto& kt) { wait<Read>(k, kt, yield_); });
      return;
    }
    if (with_kind(t, [](auto& k, auto& kt) {
          set_node(kt);
          return enter<Read>(k, kt);
        })) {
      stat_acquired(t, 0, 0, Read);
      return;
    }
    const uint64_t c0 = instrument_ticks();
    with_kind(t, [this](auto& k, auto& kt) { wait<Read>(k, kt, yield_); });
    stat_acquired(t, c0, instrument_ticks(), Read);  // the end of the wait is also the start of the hold
  }
  template <bool Read>
  bool trylock_as(LockToken& t) {
    if (vlock_ && vt::current_cpu() >= 0) [[unlikely]]
      return vtrylock(t, Read);
    if (!with_kind(t, [](auto& k, auto& kt) {
          set_node(kt);
          return try_enter<Read>(k, kt);
        }))
      return false;
    if (stat_) stat_acquired(t, 0, 0, Read);
    return true;
  }
  template <bool Read>
  void unlock_as(LockToken& t) {
    if (vlock_ && vt::current_cpu() >= 0) [[unlikely]] {
      vunlock(t, Read);
      return;
    }
    if (stat_) stat_released(t, Read);
    with_kind(t, [](auto& k, auto& kt) { leave<Read>(k, kt); });
  }

 public:
  Lock(LockDomain& domain, std::string_view cls);
  Lock(LockDomain& domain, LockClassId cls);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  // down_write for a reader-writer kind; the lock for every other kind.
  void lock(LockToken& t) { lock_as<false>(t); }
  // Acquires only if free (pcp_spin_trylock, down_write_trylock). A failed trylock counts nothing in lock_stat, as in
  // the kernel.
  bool trylock(LockToken& t) { return trylock_as<false>(t); }
  void unlock(LockToken& t) { unlock_as<false>(t); }

  // The read side (down_read, down_read_trylock, up_read): shared with other readers on a kind that has one (rwsem:
  // lock_kinds()' read_side), excluding and excluded by lock(). On any other kind a reader takes the lock
  // exclusively, as a writer would (mmap_sem on a spinlock: every fault serialised). lock_stat counts read
  // acquisitions in the class's read row ("<class>-R", as /proc/lock_stat prints them) either way.
  void lock_read(LockToken& t) { lock_as<true>(t); }
  bool trylock_read(LockToken& t) { return trylock_as<true>(t); }
  void unlock_read(LockToken& t) { unlock_as<true>(t); }

  LockKind kind() const { return kind_; }
  LockClassId lock_class() const { return cls_; }
  const LockDomain& domain() const { return *domain_; }
  // Waiters queued behind the holder whose token this is (FIFO kinds; rwsem: its wait list, on threads; 0 for the
  // others). For tests that build a
  // known queue order; call it only while that holder keeps the lock.
  uint32_t queued(const LockToken& holder) const {
    if (vlock_ && vt::current_cpu() >= 0) return vqueued();
    return with_kind(const_cast<LockToken&>(holder), [](const auto& k, const auto& kt) { return k.queued(kt); });
  }

 private:
  // contended_at == 0: acquired without waiting; otherwise the wait ran from contended_at to acquired_at. `read`:
  // counted in the class's read row.
  void stat_acquired(LockToken& t, uint64_t contended_at, uint64_t acquired_at, bool read);
  void stat_released(LockToken& t, bool read);
  // The virtual-clock side (virtual_lock.cpp), on the simulator's fibers. vlock() throws vt::Stopped when the run is
  // stopped while it waits. `read`: the read side (shared on a kind with one).
  void vlock(LockToken& t, bool read);
  bool vtrylock(LockToken& t, bool read);
  void vunlock(LockToken& t, bool read);
  uint32_t vqueued() const;

  // The lock words of this lock's kind (one member is constructed, by kind_), alone on their line(s).
  union State {
    State() {}
    ~State() {}
#define ALLOCLAB_KIND_STATE(name, Type) Type name;
    ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_STATE)
#undef ALLOCLAB_KIND_STATE
  };
  alignas(64) State state_;
  // Read-mostly metadata, on a line of its own.
  alignas(64) LockDomain* domain_;
  LockClassId cls_;
  LockKind kind_;
  bool stat_;
  bool yield_;
  bool read_side_;                      // the kind has a shared read side (lock_kinds()' read_side)
  std::atomic<int32_t> last_cpu_{-1};   // lock_stat's lock->cpu, for bounces
  std::atomic<int32_t> last_node_{-1};  // the previous holder's model node, for hand-offs (-1: none among workers)
  std::unique_ptr<VirtualLock> vlock_;  // in a virtual-clock run's domain only
};

class LockGuard {
 public:
  explicit LockGuard(Lock& l) : l_(l) { l_.lock(t_); }
  ~LockGuard() { l_.unlock(t_); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& l_;
  LockToken t_;
};

}  // namespace alloclab
