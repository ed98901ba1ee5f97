// shmem fault path microbenchmarks: ns per read fault at 1 thread for each variant (lock_twice = 2.6.35,
// prealloc = the patch, ramfs, modern), with the 4 KiB clear_highpage done for real (Backing::real) and without it
// (descriptor-only pages, no clear): what one fault costs when nobody contends, i.e. the serial part the seed's
// 64 threads fight over. lock_stat is off (free hooks). One benchmark iteration is one fault on a fresh index; when
// the file is full it is torn down and rebuilt with the timer paused. A figure, not a goal: nothing is asserted.
#include <benchmark/benchmark.h>

#include <memory>

#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/shmem.hpp"
#include "alloclab/topology/topology.hpp"

using namespace alloclab;
using namespace alloclab::mm;

namespace {

constexpr uint64_t kFilePages = 1 << 16;  // 256 MiB per file

void BM_ShmemFault(benchmark::State& state, ShmemVariant variant, bool zero) {
  const Machine machine(Topology::synthetic("node:1 core:1 pu:1"), Topology::host());
  LockDomain locks(LockConfig{}, false, false);
  locks.reset_stats(1);
  MemoryConfig mc;
  mc.node_pages = {kFilePages + shmem_index_pages(kFilePages) + 16384};
  mc.node_pages[0] = (mc.node_pages[0] + 1023) / 1024 * 1024;
  mc.backing = zero ? Backing::real : Backing::none;
  MemorySystem ms(machine, locks, mc);
  ms.prefault_backing();
  ShmemConfig sc;
  sc.variant = variant;
  sc.nr_pages = kFilePages;
  sc.clear = zero;
  auto file = std::make_unique<ShmemFile>(ms, locks, sc);
  ShmemTask* task = &file->add_task(0, 0);
  uint64_t idx = 0, faults = 0;
  for (auto _ : state) {
    if (idx == kFilePages) {
      state.PauseTiming();
      faults += task->st.faults;
      file->teardown(0);
      file = std::make_unique<ShmemFile>(ms, locks, sc);
      task = &file->add_task(0, 0);
      idx = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(file->touch(*task, idx++));
  }
  faults += task->st.faults;
  if (faults != uint64_t(state.iterations())) state.SkipWithError("not one fault per iteration");
  state.counters["faults_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  file->teardown(0);
}

BENCHMARK_CAPTURE(BM_ShmemFault, lock_twice_zero, ShmemVariant::lock_twice, true);
BENCHMARK_CAPTURE(BM_ShmemFault, prealloc_zero, ShmemVariant::prealloc, true);
BENCHMARK_CAPTURE(BM_ShmemFault, ramfs_zero, ShmemVariant::ramfs, true);
BENCHMARK_CAPTURE(BM_ShmemFault, modern_zero, ShmemVariant::modern, true);
BENCHMARK_CAPTURE(BM_ShmemFault, lock_twice_nozero, ShmemVariant::lock_twice, false);
BENCHMARK_CAPTURE(BM_ShmemFault, prealloc_nozero, ShmemVariant::prealloc, false);
BENCHMARK_CAPTURE(BM_ShmemFault, ramfs_nozero, ShmemVariant::ramfs, false);
BENCHMARK_CAPTURE(BM_ShmemFault, modern_nozero, ShmemVariant::modern, false);

}  // namespace
