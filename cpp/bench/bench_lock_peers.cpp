// Our lock kinds beside Concurrency Kit's locks of the same algorithm (libck-dev), in the same benchmark run, so that
// the ratio ours / ck is measured, not remembered (issue 18 item 5). Two threads pinned to host PUs 0 and 1 take the
// lock in turn with an empty critical section (the two-thread hand-off); one pinned thread alone gives the
// uncontended path. Run with --benchmark_enable_random_interleaving and repetitions (make bench does) and compare
// medians. Pairs: spin ~ ck_spinlock_fas (test-and-test-and-set), ticket ~ ck_spinlock_ticket, mcs ~ ck_spinlock_mcs,
// cohort ~ ck_cohort of ck_spinlock_fas with backoff over ck_spinlock_mcs (C-BO-MCS, with our local hand-off limit).
// Leaves out: libslock (not packaged), lock_stat on (BM_Uncontended in bench_locks.cpp has it).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <string>

#include "alloclab/locks/kinds/cohort.hpp"
#include "alloclab/locks/lock.hpp"
#include "peers/ck_peers.h"
#include "shared_lock.hpp"

using namespace alloclab;

namespace {

struct Pair {
  LockKind ours;
  ck_peer_kind ck;
};
constexpr Pair kPairs[] = {{LockKind::spin, CK_PEER_FAS},
                           {LockKind::ticket, CK_PEER_TICKET},
                           {LockKind::mcs, CK_PEER_MCS},
                           {LockKind::cohort, CK_PEER_COHORT}};

// Pins the calling benchmark thread to host PU `pu`; false when the host has no such PU.
bool pin(int pu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(pu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void BM_Ours(benchmark::State& state, LockKind kind, bench::SharedLock* shared) {
  if (!pin(state.thread_index())) return state.SkipWithError("needs host PUs 0 and 1");
  bench::hammer(state, kind, shared);
}

void BM_Ck(benchmark::State& state, ck_peer_kind kind, ck_peer_lock* lock) {
  if (!pin(state.thread_index())) return state.SkipWithError("needs host PUs 0 and 1");
  if (state.thread_index() == 0) ck_peer_init(kind, lock, CohortSpinlock::kBatchLimit);
  ck_peer_node node{};
  for (auto _ : state) {
    ck_peer_acquire(kind, lock, &node);
    benchmark::ClobberMemory();
    ck_peer_release(kind, lock, &node);
  }
}

const int registered = [] {
  static bench::SharedLock ours[std::size(kPairs)][2];
  static ck_peer_lock ck[std::size(kPairs)][2];
  for (size_t i = 0; i < std::size(kPairs); ++i) {
    const std::string name(to_string(kPairs[i].ours));
    for (int threads : {1, 2}) {
      const std::string what = threads == 1 ? "/alone" : "/handoff";
      benchmark::RegisterBenchmark(("BM_Peer/" + name + what + "/ours").c_str(), BM_Ours, kPairs[i].ours,
                                   &ours[i][threads - 1])
          ->Threads(threads)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_Peer/" + name + what + "/ck").c_str(), BM_Ck, kPairs[i].ck, &ck[i][threads - 1])
          ->Threads(threads)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace
