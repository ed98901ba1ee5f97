// Host load: how busy the real machine is, and how much of a thread's time it spent waiting for a CPU.
//
// Models: nothing of the kernel's allocator; it is the lab's view of the scheduler it runs under. A timing is only
// trustworthy when the workers had their CPUs: the host's runnable tasks (/proc/stat procs_running), load average
// (/proc/loadavg) and CPU clock (/proc/cpuinfo "cpu MHz", or cpufreq's scaling_cur_freq) go into every run's
// provenance, and each worker's *run delay* — time it was runnable but waited on a runqueue, from
// /proc/thread-self/schedstat (CONFIG_SCHED_INFO) — says whether it really ran on its own CPU.
// Leaves out: steal time of a hypervisor (it shows as a slower clock, not as run delay), SMT siblings' load.
#pragma once

#include <cstdint>

namespace alloclab {

struct HostLoad {
  double load1 = -1;       // 1-minute load average; -1: unknown
  int procs_running = -1;  // runnable tasks right now, the reader included; -1: unknown
  double cpu_mhz = -1;     // mean current clock of the host's CPUs; -1: unknown
};

// A snapshot of the host's load. Costs a few file reads (tens of microseconds): never call it on a hot path.
HostLoad read_host_load();

// The calling thread's scheduler accounting (/proc/thread-self/schedstat): nanoseconds on a CPU and nanoseconds
// runnable but waiting for one. `ok` is false where the kernel does not provide it.
struct ThreadSched {
  bool ok = false;
  uint64_t run_ns = 0;
  uint64_t wait_ns = 0;
};
// The calling thread's schedstat; not ok where there is none (or in a virtual-clock run).
ThreadSched read_thread_sched();

}  // namespace alloclab
