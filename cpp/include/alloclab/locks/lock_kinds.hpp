// Lock kinds: the one list of the primitives a lock class can use.
//
// ALLOCLAB_LOCK_KINDS is the list; the enum, the names (each kind's enumerator), the catalogue, the per-acquisition
// token and the dispatch in Lock are generated from it. Each kind is one type in kinds/ with the interface that
// kinds/kind.hpp states (LockKindType), checked below for every kind of the list. Adding a kind is one file in
// kinds/ (and its .cpp in src/locks/kinds/ if it has one) and one line here.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "alloclab/locks/kinds/cna.hpp"
#include "alloclab/locks/kinds/cohort.hpp"
#include "alloclab/locks/kinds/futex_mutex.hpp"
#include "alloclab/locks/kinds/hmcs.hpp"
#include "alloclab/locks/kinds/kmutex.hpp"
#include "alloclab/locks/kinds/mcs.hpp"
#include "alloclab/locks/kinds/pthread_mutex.hpp"
#include "alloclab/locks/kinds/qspinlock.hpp"
#include "alloclab/locks/kinds/rwsem.hpp"
#include "alloclab/locks/kinds/shfllock.hpp"
#include "alloclab/locks/kinds/ticket.hpp"
#include "alloclab/locks/kinds/ttas.hpp"

// X(name, type), the name being the enumerator; in the order al.lock_kinds() lists them: user-space baselines, the
// kernel's own, NUMA-aware.
#define ALLOCLAB_LOCK_KINDS(X) \
  X(mutex, FutexMutex)         \
  X(pthread, PthreadMutex)     \
  X(spin, TtasSpinlock)        \
  X(ticket, TicketSpinlock)    \
  X(mcs, McsSpinlock)          \
  X(qspinlock, Qspinlock)      \
  X(kmutex, KernelMutex)       \
  X(rwsem, Rwsem)              \
  X(cna, CnaSpinlock)          \
  X(cohort, CohortSpinlock)    \
  X(hmcs, HmcsSpinlock)        \
  X(shfllock, Shfllock)

namespace alloclab {

#define ALLOCLAB_KIND_CHECK(name, Type) \
  static_assert(LockKindType<Type>, #Type " (lock kind " #name "): lacks the interface of kinds/kind.hpp");
ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_CHECK)
#undef ALLOCLAB_KIND_CHECK

enum class LockKind : uint8_t {
#define ALLOCLAB_KIND_ENUM(name, Type) name,
  ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_ENUM)
#undef ALLOCLAB_KIND_ENUM
};

struct LockKindInfo {
  LockKind kind;
  std::string_view name;
  std::string_view doc;
  bool fifo;
  bool numa_aware;        // its Token carries the acquirer's node; on a 1-node model it degenerates to its base lock
  std::string_view base;  // that base lock's kind (a NUMA-aware kind only)
  bool read_side;  // it has a shared read side (enter_read, try_enter_read, wait_read, leave_read): Lock::lock_read
                   // shares it; on another kind a reader takes the lock exclusively
  LockOps lock;    // what an uncontended acquisition does to memory (LockKindTraits)
  LockOps unlock;  // and its release
};
std::span<const LockKindInfo> lock_kinds();
std::string_view to_string(LockKind k);
// Parses a kind name; throws std::invalid_argument naming `param`, the value and the allowed names.
LockKind parse_lock_kind(std::string_view name, std::string_view param);

}  // namespace alloclab
