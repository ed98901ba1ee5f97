// Host memory: what this process may still allocate, and the check every run makes before it allocates anything.
//
// Available memory is MemAvailable from /proc/meminfo, lowered by the cgroup v2 limit (memory.max - memory.current)
// when the process runs in a container. Leaves out: swap, overcommit policy, hugetlbfs pools.
#pragma once

#include <cstdint>
#include <string>

namespace alloclab {

// What a run will allocate (mem_map, arenas, areas), declared before anything is allocated.
struct MemoryNeed {
  uint64_t bytes = 0;
  std::string detail;  // e.g. "mem_map 16.0 MiB + page arenas 1.0 GiB"
};

uint64_t memory_available();
// Throws std::invalid_argument("memory: this run needs X (detail) but only Y are available; reduce the sizes").
void check_memory(const MemoryNeed& need);
std::string format_bytes(uint64_t bytes);  // "1.5 GiB", "12.0 MiB", "512 B"

}  // namespace alloclab
