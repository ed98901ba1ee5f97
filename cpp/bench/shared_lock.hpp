// One Lock of a given kind shared by a benchmark's threads, and the loop they run on it: acquire, an empty critical
// section, release. Thread 0 builds the lock (lock_stat off) before the threads start their timed loops.
// Used by BM_Contended (bench_locks.cpp) and BM_Peer's "ours" side (bench_lock_peers.cpp).
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "alloclab/locks/lock.hpp"

namespace alloclab::bench {

struct SharedLock {
  std::unique_ptr<LockDomain> dom;
  std::unique_ptr<Lock> lock;
};

// The timed loop of every thread of `state` on `shared`'s lock of kind `kind`.
inline void hammer(benchmark::State& state, LockKind kind, SharedLock* shared) {
  if (state.thread_index() == 0) {
    LockConfig cfg;
    cfg.set("zone->lock", std::string(to_string(kind)));
    shared->dom = std::make_unique<LockDomain>(cfg, false, false);
    shared->lock = std::make_unique<Lock>(*shared->dom, "zone->lock");
  }
  for (auto _ : state) {
    LockToken t;
    shared->lock->lock(t);
    benchmark::ClobberMemory();
    shared->lock->unlock(t);
  }
}

}  // namespace alloclab::bench
