// The interface of a lock kind, stated once: what Lock's dispatch (lock.hpp), the catalogue (lock_class.cpp) and the
// virtual-time hand-off (virtual_lock.cpp) call on every kind of ALLOCLAB_LOCK_KINDS. lock_kinds.hpp checks each
// kind of the list against LockKindType, so a kind that lacks a member, or has it with another signature, fails to
// compile there with its name. Each kind header includes this file, for the interface's types and the atomics.
//
// Members every kind has: kTraits; a Token (per-acquisition state the acquirer owns, e.g. an MCS queue node,
// trivially constructible: nothing is written until an acquisition needs it); enter() (fast path: true if
// acquired; a FIFO kind has queued the acquirer otherwise); try_enter() (never queues); wait() (after a failed
// enter(): returns holding the lock; `yield`: sched_yield between looks, for oversubscribed runs); leave();
// queued(holder) (waiters behind the holder whose token it is, 0 for kinds that do not queue); vhandoff() (its
// hand-off in virtual time, vhandoff.hpp). Optional: acquire(token, yield), the primitive's own blocking path for
// when nobody needs to know whether it contended (lock_stat off); a `numa_node` in the Token of a NUMA-aware kind,
// which the Lock fills with the acquirer's model node before enter()/try_enter(), with a kBase naming the kind it is
// on a 1-node model (its base lock); a read side (ReadSideKind below).
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "alloclab/locks/vhandoff.hpp"

namespace alloclab {

// What an uncontended acquisition or release does to memory, counted from the kind's real code: its locked
// read-modify-writes, and its plain loads and stores of the lines it owns (the lock word's, its queue node's). Virtual
// time charges the RMWs at the profile's atomic_rmw, or the accesses at line_access where those take longer
// (virtual_lock.cpp): an out-of-order core runs the accesses of lines it owns in the shadow of the locked RMWs around
// them (this project's Zen 4 VM, 2026-12-07: an MCS acquisition and release, its node's two stores and the load of
// `next` with its xchg and cmpxchg, 4.40 ns per pair; the two RMWs alone, 4.42 ns). A side without RMWs (a release
// store) pays its accesses.
struct LockOps {
  uint8_t rmws;
  uint8_t accesses;
};

// What the catalogue says of a kind; its name is its enumerator in ALLOCLAB_LOCK_KINDS.
struct LockKindTraits {
  bool fifo;             // the lock goes to the waiters in arrival order (queued() counts them)
  std::string_view doc;  // one line, for al.lock_kinds()
  LockOps lock;          // enter() finding the lock free (and a read side's enter_read() alike)
  LockOps unlock;        // leave() with nobody waiting (and leave_read() alike)
};

template <class K>
concept LockKindType = std::is_trivially_default_constructible_v<typename K::Token> &&
    requires(K& k, const K& held, typename K::Token& t, const typename K::Token& holder, bool yield,
             const VRelease& r) {
  { K::kTraits } -> std::convertible_to<LockKindTraits>;
  { k.enter(t) }
  noexcept->std::same_as<bool>;
  { k.try_enter(t) }
  noexcept->std::same_as<bool>;
  { k.wait(t, yield) }
  noexcept->std::same_as<void>;
  { k.leave(t) }
  noexcept->std::same_as<void>;
  { held.queued(holder) }
  noexcept->std::same_as<uint32_t>;
  { K::vhandoff(r) } -> std::same_as<VHandoff>;
};

// A reader-writer kind (rwsem) also has a shared read side, beside enter()/wait()/leave() as its write side:
// enter_read() (fast path: true if acquired; otherwise wait_read() continues from where it left the lock),
// try_enter_read() (never queues), wait_read() (returns holding the read side), leave_read().
template <class K>
concept ReadSideKind = LockKindType<K> && requires(K& k, typename K::Token& t, bool yield) {
  { k.enter_read(t) }
  noexcept->std::same_as<bool>;
  { k.try_enter_read(t) }
  noexcept->std::same_as<bool>;
  { k.wait_read(t, yield) }
  noexcept->std::same_as<void>;
  { k.leave_read(t) }
  noexcept->std::same_as<void>;
};

}  // namespace alloclab
