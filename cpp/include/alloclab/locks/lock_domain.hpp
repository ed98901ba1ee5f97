// LockDomain: the locks of one run — their classes, primitives and /proc/lock_stat statistics.
//
// Models: CONFIG_LOCK_STAT. Each worker thread counts into its own slots (one per lock class, no shared counters
// on the hot path); the slots are merged into one row per class when the run ends, with lock_stat's columns:
// con-bounces, contentions, waittime min/max/total/avg, acq-bounces, acquisitions, holdtime min/max/total/avg.
// As in the kernel, wait time is only recorded for contended acquisitions, a bounce is an acquisition (or a
// contention) on a different CPU from the lock's previous acquirer, and a failed trylock counts nothing. Beyond the
// kernel's columns, each contended acquisition is a hand-off from the lock's previous holder, counted as local (the
// same model node) or remote: what the NUMA-aware kinds exist to change.
// Only threads attached to the domain (the run's workers) count: set-up done by the controlling thread does not
// appear in the statistics, so the counts of a run are exactly those of its workers. In a virtual-clock run (a
// domain with a cost model) the workers are the simulator's virtual CPUs on one host thread: each counts into its
// own slots all the same (stat_thread()), and times are virtual picoseconds.
// Read and write acquisitions are counted apart, and rows() prints them as lockdep_proc.c's seq_stats does: a class
// with only write (exclusive) acquisitions is one row under its name; a class read at all gets a "<class>-R" row, and
// its write acquisitions, if any, a "<class>-W" row (e.g. mmap_sem-R, lockstat.rst's &mm->mmap_lock-R).
// Leaves out: lock_stat's per-call-site "contention points" tables.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "alloclab/base/tls.hpp"
#include "alloclab/base/value.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/locks/lock_class.hpp"
#include "alloclab/locks/vhandoff.hpp"

namespace alloclab {

using LockClassId = uint16_t;  // index into lock_class_catalogue()

// One worker's counters for one class. Times are in clock ticks (see clock.hpp).
struct LockStatCounters {
  uint64_t con_bounces = 0, contentions = 0;
  uint64_t wait_min = UINT64_MAX, wait_max = 0, wait_total = 0;
  uint64_t acq_bounces = 0, acquisitions = 0;
  uint64_t hold_min = UINT64_MAX, hold_max = 0, hold_total = 0;
  uint64_t handoffs_local = 0, handoffs_remote = 0;
};

// A merged row, one per class that was acquired at least once. Times in nanoseconds.
struct LockStatRow {
  std::string cls;
  std::string kind;
  uint64_t con_bounces, contentions;
  double wait_min_ns, wait_max_ns, wait_total_ns, wait_avg_ns;
  uint64_t acq_bounces, acquisitions;
  double hold_min_ns, hold_max_ns, hold_total_ns, hold_avg_ns;
  uint64_t handoffs_local, handoffs_remote;  // contentions, by the previous holder's node: same, other (or unknown)
};

// LockStatRow's columns, in /proc/lock_stat's order (times in ns), then the hand-offs by node.
std::span<const Column<LockStatRow>> lockstat_columns();

class LockDomain;

// Per-thread attachment to the domain whose locks this thread counts into.
struct LockStatThread {
  const LockDomain* domain = nullptr;
  LockStatCounters* slots = nullptr;       // indexed by LockClassId: write (exclusive) acquisitions
  int32_t cpu = -1;                        // model PU: bounces compare it with the lock's previous acquirer
  int32_t node = 0;                        // its model node: where NUMA-aware kinds queue it; hand-offs compare it
  LockStatCounters* read_slots = nullptr;  // indexed by LockClassId: read acquisitions (Lock::lock_read)
};
// The calling thread's attachment; NUMA-aware kinds read its `node` on every acquisition, as the kernel's
// numa_node_id().
ALLOCLAB_TLS extern constinit thread_local LockStatThread tls_lockstat;

class LockDomain {
 public:
  // `spin_yield`: spinning waiters call sched_yield() (set when the run is oversubscribed, so it still ends).
  // `costs`: the cost model of a virtual-clock run (it must outlive the domain's locks), nullptr for a real one.
  LockDomain(const LockConfig& config, bool lockstat, bool spin_yield, CostModel* costs = nullptr);
  LockDomain(const LockDomain&) = delete;
  LockDomain& operator=(const LockDomain&) = delete;

  LockClassId class_id(std::string_view cls) const;  // throws std::invalid_argument for an unknown class
  LockKind kind_of(LockClassId id) const { return kinds_[id]; }
  bool lockstat() const { return lockstat_; }
  bool spin_yield() const { return spin_yield_; }
  const LockConfig& config() const { return config_; }
  // The virtual-clock run's cost model (nullptr in a real-clock run): its locks are VirtualLocks.
  CostModel* costs() const { return costs_; }
  // Nanoseconds per tick of the run's clock (virtual picoseconds, or the host's ticks).
  double ns_per_tick() const;

  // The lock_stat attachment of the calling worker: its thread's, or in a virtual-clock run its virtual CPU's.
  LockStatThread& stat_thread() const {
    if (costs_)
      if (const int c = vt::current_cpu(); c >= 0) return vthreads_[size_t(c)];
    return tls_lockstat;
  }
  // Per virtual CPU: the acquisition it waits for (VirtualLock waiters; sized by reset_stats()).
  VWaitState& vwait_state(int cpu) { return vwait_[size_t(cpu)]; }
  std::span<const VWaitState> vwait_states() const { return vwait_; }

  // Allocates zeroed counters for `nr_workers` workers (discarding earlier ones).
  void reset_stats(int nr_workers);
  // Makes the calling thread (virtual CPU) count as `worker` running on model PU `cpu` of model node `node`; detach()
  // undoes it for a thread (a virtual CPU's attachment ends with the domain).
  void attach(int worker, int cpu, int node = 0);
  static void detach();

  std::vector<LockStatRow> rows() const;
  // The rows in /proc/lock_stat's text format (times in microseconds, as the kernel prints them).
  static std::string format(const std::vector<LockStatRow>& rows);

 private:
  LockConfig config_;
  std::vector<LockKind> kinds_;
  bool lockstat_;
  bool spin_yield_;
  size_t nr_classes_;
  size_t stride_;  // counter blocks per worker: the classes' write blocks, their read blocks, one for padding
  std::vector<LockStatCounters> slots_;
  CostModel* costs_;
  mutable std::vector<LockStatThread> vthreads_;  // virtual-clock run: per virtual CPU
  std::vector<VWaitState> vwait_;
};

}  // namespace alloclab
