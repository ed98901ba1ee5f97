// VirtualLock: a Lock's state in a virtual-clock run.
//
// Models: a lock as the simulated machine sees it: who holds it, which CPU's cache holds its word, and who waits.
// A Lock of a virtual-clock run's domain (lock_domain.hpp) gets one; on the simulator's fibers lock(), trylock() and
// unlock() use it instead of the kind's atomics (which stay for set-up and checks on the controlling thread). An
// acquisition finds the lock free and takes it (an atomic RMW, plus the line's transfer from its last writer), or
// blocks on the wait queue until a release hands it over or lets it race (the kind's vhandoff(), vhandoff.hpp).
// Every step happens at a sync point, so the lock's history is the same in every run of the same inputs; lock_stat
// times are virtual times.
// Read side (Lock::lock_read) of a kind that has one (rwsem): readers share the lock (`readers` of them, no holder),
// a writer waits until every reader has left. Each down_read and up_read is an atomic RMW on the count word, whose
// line comes from its last writer: readers on different CPUs bounce it, as they do mm->mmap_sem's. A reader takes
// it at once when no writer holds it and no hand-off is pending and either nobody waits or no other reader holds
// it (the kernel's fast path and its reader lock stealing); otherwise it queues, and a release that leaves the lock
// free lets the kind's vhandoff() wake a writer or grant the queued readers. A writer that lost the race for a free
// lock after waiting RWSEM_WAIT_TIMEOUT sets `handoff`: no newcomer takes the lock, and the next release gives it to
// the head waiter.
// Leaves out: what the kinds' real code does between hand-offs (a spinner's own cached reads), try-lock storms; a
// woken waiter leaves the queue at its wake-up and one that lost its race queues again at the tail (the kernel's
// rwsem and mutex keep a woken waiter in its place on the list); rwsem_cond_wake_waiter when a waiter queues.
#pragma once

#include <string>

#include "alloclab/base/wait_queue.hpp"

namespace alloclab {

struct VirtualLock {
  explicit VirtualLock(std::string label) : queue(std::move(label)) {}

  vt::WaitQueue queue;            // the waiters, oldest first; labelled with the lock class for deadlock messages
  int holder = -1;                // the virtual CPU holding it (-1: free, or held by readers only)
  uint32_t readers = 0;           // read-side holders (a kind with a read side; granted ones may not run yet)
  bool handoff = false;           // rwsem: RWSEM_FLAG_HANDOFF, set by the head writer after RWSEM_WAIT_TIMEOUT
  int last = -1;                  // the CPU whose cache holds the lock word: its last writer (-1: never written)
  uint32_t batch = 0;             // NUMA-aware kinds: hand-offs in a row kept within one node (VHandoff::batch)
  vt::vtime released_at = 0;      // the last release (0: none yet)
  bool taken_free = false;        // its holder took it free (uncontended, or a race won), not from an owned hand-off
  vt::vtime line_busy_until = 0;  // the word's line serves re-reads queued at a release until then (VHandoff)
};

}  // namespace alloclab
