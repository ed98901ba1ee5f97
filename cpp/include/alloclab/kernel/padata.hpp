// padata multithreaded jobs: padata_do_multithreaded, padata_mt_job, padata_mt_helper.
//
// Models: kernel/padata.c of v6.9 (Gang Li's "padata: dispatch works on different nodes", numa_aware) with the
// v6.11 fix that forces chunk_size >= 1 when min_chunk is 0 (before it the kernel divided by zero):
//   1. nworks = max(size / max(min_chunk, align), 1), then min(nworks, max_threads); size == 0 returns at once and
//      nworks == 1 calls thread_fn(start, start + size) inline (no works, no ps.lock, no chunking);
//   2. padata_work_alloc_mt() takes up to nworks - 1 works from the pool padata_init() preallocated
//      (num_possible_cpus() of them); the calling thread is the last worker, so ps.nworks = works taken + 1;
//   3. chunk_size = max(size / (ps.nworks * load_balance_factor 4), min_chunk, 1), rounded up to align;
//   4. each work is queued with queue_work_node(next_node_in(last_used_nid, node_states[N_CPU])) when numa_aware
//      (last_used_nid is padata_do_multithreaded's function-static atomic, advanced by cmpxchg), else
//      queue_work(system_unbound_wq);
//   5. every worker, the caller included, runs padata_mt_helper(): under ps.lock it takes the next chunk
//      (size = roundup(start + 1, chunk_size) - start, clipped to what is left), drops the lock, runs thread_fn,
//      retakes the lock, until job->size == 0; then ++nworks_fini, and the last one complete()s;
//   6. the caller wait_for_completion()s.
// The chunk boundaries depend only on (start, size, chunk_size), never on timing: padata_chunks() lists them.
// Which worker takes which chunk does depend on timing.
// How the model runs it: PadataInstance is padata_init()'s state for one run (the works pool and last_used_nid;
// no globals). PadataPlan is the arithmetic of steps 1-4, computed before anything runs, so that a scenario can
// start one runner worker per work, placed where the workqueue would run it. PadataMtJobState is steps 5-6 for
// workers the caller drives itself (queue_work wakes a sleeping helper, as a kworker is woken). padata_do_
// multithreaded() below is the whole thing on plain std::threads, for code outside the runner and for tests.
// ps.lock is a lock of class "padata_work_lock" (a spinlock, as in the kernel).
// Virtual time: the job's start/size (under ps.lock), nworks_fini and the pool's atomics are tracked lines; the
// helpers sleep and wake through WaitEvent (a futex wake-up each).
// Leaves out: padata_works_lock (taken twice per job by the caller, never contended: the pool is an atomic
// counter here), the serial/parallel padata instances (padata_do_parallel, reorder queues), cpumask restrictions
// of the unbound workqueue, CPU hotplug, and which CPU *inside* a node a work runs on (the scenario decides).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "alloclab/locks/wait_event.hpp"

namespace alloclab {

// struct padata_mt_job (include/linux/padata.h). thread_fn is a std::function so that tests can capture. Its start
// and size are a line the helpers share under ps.lock (line-aligned: see base/line_aligned.hpp).
struct alignas(64) padata_mt_job {
  std::function<void(unsigned long start, unsigned long end, void* arg)> thread_fn;
  void* fn_arg = nullptr;
  unsigned long start = 0;      // the first item
  unsigned long size = 0;       // how many items
  unsigned long align = 1;      // chunk boundaries are multiples of this (0 is treated as 1)
  unsigned long min_chunk = 0;  // the least work worth a thread
  int max_threads = 1;          // the most workers, the caller included
  bool numa_aware = false;      // spread the helpers round-robin over the nodes with CPUs
};

inline constexpr unsigned long padata_load_balance_factor = 4;

// Step 1: max(size / max(min_chunk, align), 1) capped at max_threads; 0 when size == 0 (nothing runs).
unsigned long padata_nworks(const padata_mt_job& job);
// Step 3 for `nworks` workers: max(size / (nworks * 4), min_chunk, 1) rounded up to align.
unsigned long padata_chunk_size(const padata_mt_job& job, unsigned long nworks);
// The [start, end) ranges padata_mt_helper hands out, in order, for a job of `size` items from `start`.
std::vector<std::pair<unsigned long, unsigned long>> padata_chunks(unsigned long start, unsigned long size,
                                                                   unsigned long chunk_size);
// next_node_in(node, mask): the next node after `node` set in `mask`, wrapping around; -1 for an empty mask
// (the kernel returns MAX_NUMNODES).
int next_node_in(int node, const std::vector<bool>& mask);

// padata_init()'s state for one run: the pool of num_possible_cpus() works and the numa_aware cursor.
class alignas(64) PadataInstance {  // its atomics are lines the callers share (line-aligned)
 public:
  // `possible_cpus`: works in the pool (padata_init allocates num_possible_cpus()); `cpu_nodes`:
  // node_states[N_CPU], the nodes queue_work_node() may pick.
  PadataInstance(int possible_cpus, std::vector<bool> cpu_nodes);
  // padata_work_alloc_mt(): takes up to nworks - 1 works; returns ps.nworks (the works taken + the caller).
  int padata_work_alloc_mt(int nworks);
  // padata_works_free(): returns `works` works to the pool.
  void padata_works_free(int works);
  // The node the next numa_aware work is queued on (the cmpxchg loop on last_used_nid).
  int next_work_node();
  int free_works() const { return free_works_.load(std::memory_order_relaxed); }
  const std::vector<bool>& cpu_nodes() const { return cpu_nodes_; }

 private:
  std::atomic<int> free_works_;
  std::atomic<int> last_used_nid_{0};  // static atomic_t last_used_nid __initdata: starts at 0
  std::vector<bool> cpu_nodes_;
};

// Steps 1-4 of one padata_do_multithreaded call, computed before anything runs.
struct PadataPlan {
  unsigned long nworks_wanted = 0;  // step 1 (0 when size == 0)
  int nworks = 0;                   // ps.nworks: after the works pool (0 when size == 0, 1 when run inline)
  unsigned long chunk_size = 0;     // step 3; with nworks == 1 the one inline call covers `size` items
  unsigned long nr_chunks = 0;      // thread_fn calls the job will make
  // Node of each work: [0] is the caller (-1: wherever it runs); [i >= 1] the node queue_work_node() picked, or
  // -1 without numa_aware (queue_work on the unbound workqueue: in practice the caller's node).
  std::vector<int> work_nodes;
};
// Takes works from the pool and advances last_used_nid as padata_do_multithreaded would (call it once per job;
// give the works back with pinst.padata_works_free(plan.nworks - 1) when the job is done).
PadataPlan padata_plan(PadataInstance& pinst, const padata_mt_job& job);

// struct padata_mt_job_state: steps 5-6 of a job whose plan has nworks >= 2, for workers the caller drives.
class PadataMtJobState {
 public:
  // `job` is modified (start/size advance under ps.lock, as the kernel does) and must outlive this.
  PadataMtJobState(LockDomain& locks, padata_mt_job& job, const PadataPlan& plan);
  int nworks() const { return nworks_; }
  unsigned long chunk_size() const { return chunk_size_; }

  // The caller: queue work i (1 .. nworks-1), waking the helper that waits for it.
  void queue_work(int i);
  // A helper: sleep until work i was queued. Returns false if `stopped` turned true first (the run was stopped).
  bool wait_until_queued(int i, const std::function<bool()>& stopped);
  // padata_mt_helper() as work i (0 is the caller). Returns the chunks (thread_fn calls) this worker ran.
  uint64_t padata_mt_helper(int i);
  // The caller: wait until every worker finished its helper. False if `stopped` turned true first.
  bool wait_for_completion(const std::function<bool()>& stopped);

 private:
  Lock lock_;  // ps.lock
  padata_mt_job& job_;
  const int nworks_;
  int nworks_fini_ = 0;  // under lock_
  const unsigned long chunk_size_;
  // Sleeping and waking: the workqueue waking a helper, and ps->completion.
  WaitEvent queued_event_{"padata work queued"};
  WaitEvent completion_{"padata completion"};
  std::vector<bool> queued_;  // under queued_event_'s lock
  bool completed_ = false;    // under completion_'s lock
};

// The whole of padata_do_multithreaded on std::threads (helpers are not pinned and, not being runner workers, not
// counted by lock_stat). Returns the plan it followed; `chunks_per_work`, when given, receives each work's chunk
// count ([0] the caller).
PadataPlan padata_do_multithreaded(PadataInstance& pinst, LockDomain& locks, padata_mt_job& job,
                                   std::vector<uint64_t>* chunks_per_work = nullptr);

}  // namespace alloclab
