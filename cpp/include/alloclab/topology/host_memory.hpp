// Host memory: what this process may still allocate, and the check every run makes before it allocates anything.
//
// Three limits bound a process, and a run must fit all of them:
//   * physical memory: MemAvailable from /proc/meminfo;
//   * its memory cgroups, v1 and v2, found from /proc/self/cgroup and /proc/self/mountinfo: at every level from the
//     process's own (nested) cgroup up to the root of the hierarchy, the limit minus what is charged, the
//     reclaimable inactive page cache not counted as charged (memory.max / memory.current / memory.stat in v2;
//     memory.limit_in_bytes / memory.usage_in_bytes / memory.stat's total_inactive_file in v1);
//   * its address space: RLIMIT_AS (ulimit -v) minus what the process maps already (VmSize), which must also hold a
//     stack for every worker thread a run starts.
// Leaves out: swap, the overcommit policy, hugetlbfs pools, cgroup v1's memsw limits, RLIMIT_DATA.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace alloclab {

// What a run will allocate (mem_map, arenas, areas), declared before anything is allocated.
struct MemoryNeed {
  uint64_t bytes = 0;
  std::string detail;  // e.g. "mem_map 16.0 MiB + page arenas 1.0 GiB"
  int threads = 0;     // worker threads the run starts: each maps a stack (address space, not memory)
};

// The limits, as figures and in words.
struct MemoryLimits {
  uint64_t available = UINT64_MAX;      // bytes the process may still allocate (MemAvailable and every cgroup)
  std::string available_bound;          // what sets it: "MemAvailable", or the cgroup level and its limit
  uint64_t address_space = UINT64_MAX;  // RLIMIT_AS minus VmSize; UINT64_MAX without a limit
  std::string address_space_bound;      // "ulimit -v 4.0 GiB, 1.2 GiB mapped already", or ""
};

// The limits of this process. Every path read is prefixed with `root` ("": this machine; tests pass a directory
// that mimics /proc and /sys/fs/cgroup). A file that is missing or unreadable sets no limit.
MemoryLimits memory_limits(const std::string& root = "");
uint64_t memory_available();  // memory_limits().available
// The address space a new std::thread reserves: its stack (the default pthread stack size) and guard page.
uint64_t thread_stack_bytes();
// A run refused for want of memory: "memory: this run needs X (detail) but only Y are available (why); reduce the
// sizes". A std::invalid_argument (Python's ValueError) of its own type, so that a caller can tell it from a bad
// parameter.
struct MemoryRefused : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Throws MemoryRefused when `need` does not fit every limit.
void check_memory(const MemoryNeed& need);
std::string format_bytes(uint64_t bytes);  // "1.5 GiB", "12.0 MiB", "512 B"

}  // namespace alloclab
