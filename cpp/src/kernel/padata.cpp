// padata multithreaded jobs (see padata.hpp). Models kernel/padata.c of v6.9 (+ the v6.11 chunk_size >= 1 fix).
#include "alloclab/kernel/padata.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

namespace {
unsigned long roundup(unsigned long x, unsigned long y) { return ((x + y - 1) / y) * y; }
unsigned long align_of(const padata_mt_job& job) { return job.align ? job.align : 1; }
}  // namespace

unsigned long padata_nworks(const padata_mt_job& job) {
  if (job.size == 0) return 0;
  // Ensure at least one thread when size < min_chunk.
  unsigned long nworks = std::max(job.size / std::max(job.min_chunk, align_of(job)), 1ul);
  nworks = std::min(nworks, (unsigned long)std::max(job.max_threads, 1));
  return nworks;
}

unsigned long padata_chunk_size(const padata_mt_job& job, unsigned long nworks) {
  if (nworks == 0) return 0;
  unsigned long chunk = job.size / (nworks * padata_load_balance_factor);
  chunk = std::max(chunk, job.min_chunk);
  chunk = std::max(chunk, 1ul);  // v6.11: "Ensure chunk_size is at least 1 to prevent divide-by-0"
  return roundup(chunk, align_of(job));
}

std::vector<std::pair<unsigned long, unsigned long>> padata_chunks(unsigned long start, unsigned long size,
                                                                   unsigned long chunk_size) {
  std::vector<std::pair<unsigned long, unsigned long>> out;
  if (chunk_size == 0) throw std::invalid_argument("chunk_size: 0 is not allowed (allowed: 1 or more)");
  while (size > 0) {
    // So end is chunk size aligned if enough work remains.
    unsigned long n = roundup(start + 1, chunk_size) - start;
    n = std::min(n, size);
    out.emplace_back(start, start + n);
    start += n;
    size -= n;
  }
  return out;
}

int next_node_in(int node, const std::vector<bool>& mask) {
  const int n = int(mask.size());
  for (int i = 1; i <= n; ++i) {
    const int cand = (node + i) % n;
    if (cand >= 0 && mask[size_t(cand)]) return cand;
  }
  return -1;
}

// ---- PadataInstance ------------------------------------------------------------------------------------------

PadataInstance::PadataInstance(int possible_cpus, std::vector<bool> cpu_nodes)
    : free_works_(std::max(possible_cpus, 0)), cpu_nodes_(std::move(cpu_nodes)) {}

int PadataInstance::padata_work_alloc_mt(int nworks) {
  int i;
  // Start at 1 because the current task participates in the job.
  for (i = 1; i < nworks; ++i) {
    vcost::rmw(&free_works_);
    int f = free_works_.load(std::memory_order_relaxed);
    bool taken = false;
    while (f > 0 && !(taken = free_works_.compare_exchange_weak(f, f - 1, std::memory_order_relaxed))) {
    }
    if (!taken) break;
  }
  return i;
}

void PadataInstance::padata_works_free(int works) {
  if (works <= 0) return;
  vcost::rmw(&free_works_);
  free_works_.fetch_add(works, std::memory_order_relaxed);
}

int PadataInstance::next_work_node() {
  vcost::rmw(&last_used_nid_);
  int old_node = last_used_nid_.load(std::memory_order_relaxed);
  int nid;
  do {
    nid = next_node_in(old_node, cpu_nodes_);
  } while (!last_used_nid_.compare_exchange_weak(old_node, nid, std::memory_order_relaxed));
  return nid;
}

PadataPlan padata_plan(PadataInstance& pinst, const padata_mt_job& job) {
  PadataPlan p;
  p.nworks_wanted = padata_nworks(job);
  if (p.nworks_wanted == 0) return p;  // size == 0: padata_do_multithreaded returns at once
  if (p.nworks_wanted == 1) {
    // Single thread, no coordination needed, cut to the chase.
    p.nworks = 1;
    p.chunk_size = job.size;
    p.nr_chunks = 1;
    p.work_nodes = {-1};
    return p;
  }
  p.nworks = pinst.padata_work_alloc_mt(int(p.nworks_wanted));
  p.chunk_size = padata_chunk_size(job, (unsigned long)p.nworks);
  p.nr_chunks = padata_chunks(job.start, job.size, p.chunk_size).size();
  p.work_nodes.assign(size_t(p.nworks), -1);
  // list_for_each_entry(pw, &works, pw_list): the helpers are queued in list order.
  for (int i = 1; i < p.nworks; ++i)
    if (job.numa_aware) p.work_nodes[size_t(i)] = pinst.next_work_node();
  return p;
}

// ---- PadataMtJobState ----------------------------------------------------------------------------------------

PadataMtJobState::PadataMtJobState(LockDomain& locks, padata_mt_job& job, const PadataPlan& plan)
    : lock_(locks, "padata_work_lock"),
      job_(job),
      nworks_(plan.nworks),
      chunk_size_(plan.chunk_size),
      queued_(size_t(std::max(plan.nworks, 1)), false) {
  if (plan.nworks < 2 || plan.chunk_size == 0)
    throw std::invalid_argument("padata: a job state needs nworks >= 2 and chunk_size >= 1 (got nworks " +
                                std::to_string(plan.nworks) + ", chunk_size " + std::to_string(plan.chunk_size) +
                                "); run nworks == 1 inline");
  queued_[0] = true;  // the caller's own work is on its stack, never queued
}

void PadataMtJobState::queue_work(int i) {
  queued_event_.announce([&] { queued_.at(size_t(i)) = true; });
}

bool PadataMtJobState::wait_until_queued(int i, const std::function<bool()>& stopped) {
  return queued_event_.wait([&] { return bool(queued_.at(size_t(i))); }, stopped);
}

uint64_t PadataMtJobState::padata_mt_helper(int) {
  uint64_t chunks = 0;
  LockToken t;
  lock_.lock(t);
  for (;;) {
    vcost::touch(&job_, false);  // the job's start and size, under ps.lock
    if (job_.size == 0) break;
    const unsigned long start = job_.start;
    // So end is chunk size aligned if enough work remains.
    unsigned long size = roundup(start + 1, chunk_size_) - start;
    size = std::min(size, job_.size);
    const unsigned long end = start + size;
    vcost::touch(&job_, true);
    job_.start = end;
    job_.size -= size;
    lock_.unlock(t);
    job_.thread_fn(start, end, job_.fn_arg);
    ++chunks;
    lock_.lock(t);
  }
  vcost::touch(&nworks_fini_, true);
  ++nworks_fini_;
  const bool done = nworks_fini_ == nworks_;
  lock_.unlock(t);
  if (done) completion_.announce([&] { completed_ = true; });  // complete(&ps->completion)
  return chunks;
}

bool PadataMtJobState::wait_for_completion(const std::function<bool()>& stopped) {
  return completion_.wait([&] { return completed_; }, stopped);
}

// ---- the whole job on std::threads ------------------------------------------------------------------------------

PadataPlan padata_do_multithreaded(PadataInstance& pinst, LockDomain& locks, padata_mt_job& job,
                                   std::vector<uint64_t>* chunks_per_work) {
  const PadataPlan plan = padata_plan(pinst, job);
  if (chunks_per_work) chunks_per_work->assign(size_t(plan.nworks), 0);
  if (plan.nworks == 0) return plan;
  if (plan.nworks == 1) {
    job.thread_fn(job.start, job.start + job.size, job.fn_arg);
    if (chunks_per_work) (*chunks_per_work)[0] = 1;
    return plan;
  }
  PadataMtJobState ps(locks, job, plan);
  std::vector<uint64_t> chunks(size_t(plan.nworks), 0);
  std::vector<std::thread> helpers;
  helpers.reserve(size_t(plan.nworks - 1));
  for (int i = 1; i < plan.nworks; ++i)
    helpers.emplace_back([&ps, &chunks, i] {
      ps.wait_until_queued(i, nullptr);
      chunks[size_t(i)] = ps.padata_mt_helper(i);
    });
  for (int i = 1; i < plan.nworks; ++i) ps.queue_work(i);
  // Use the current thread, which saves starting a workqueue worker.
  chunks[0] = ps.padata_mt_helper(0);
  ps.wait_for_completion(nullptr);
  for (auto& t : helpers) t.join();
  pinst.padata_works_free(plan.nworks - 1);
  if (chunks_per_work) *chunks_per_work = chunks;
  return plan;
}

}  // namespace alloclab
