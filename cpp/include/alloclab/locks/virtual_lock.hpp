// VirtualLock: a Lock's state in a virtual-clock run.
//
// Models: a lock as the simulated machine sees it: who holds it, which CPU's cache holds its word, and who waits.
// A Lock of a virtual-clock run's domain (lock_domain.hpp) gets one; on the simulator's fibers lock(), trylock() and
// unlock() use it instead of the kind's atomics (which stay for set-up and checks on the controlling thread). An
// acquisition finds the lock free and takes it (an atomic RMW, plus the line's transfer from its last writer), or
// blocks on the wait queue until a release hands it over or lets it race (the kind's vhandoff(), vhandoff.hpp).
// Every step happens at a sync point, so the lock's history is the same in every run of the same inputs; lock_stat
// times are virtual times.
// Leaves out: what the kinds' real code does between hand-offs (a spinner's own cached reads), try-lock storms.
#pragma once

#include <string>

#include "alloclab/base/wait_queue.hpp"

namespace alloclab {

struct VirtualLock {
  explicit VirtualLock(std::string label) : queue(std::move(label)) {}

  vt::WaitQueue queue;        // the waiters, oldest first; labelled with the lock class for deadlock messages
  int holder = -1;            // the virtual CPU holding it (-1: free)
  int last = -1;              // the CPU whose cache holds the lock word: its last writer (-1: never written)
  uint32_t batch = 0;         // NUMA-aware kinds: hand-offs in a row kept within one node (VHandoff::batch)
  vt::vtime released_at = 0;  // the last release (0: none yet)
};

}  // namespace alloclab
