// Host memory available to this process, and the run-wide memory check (see host_memory.hpp).
#include "alloclab/topology/host_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>

namespace alloclab {

namespace {
// A single number from a file (cgroup v2 memory.max / memory.current); nullopt for "max" or a missing file.
std::optional<uint64_t> read_number(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}
}  // namespace

uint64_t memory_available() {
  uint64_t avail = UINT64_MAX;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") avail = kib * 1024;
  const auto max = read_number("/sys/fs/cgroup/memory.max");
  const auto cur = read_number("/sys/fs/cgroup/memory.current");
  if (max && cur) avail = std::min(avail, *max > *cur ? *max - *cur : 0);
  return avail;
}

std::string format_bytes(uint64_t b) {
  char buf[32];
  const double x = double(b);
  if (b >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", x / double(1ull << 30));
  else if (b >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", x / double(1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", x / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

void check_memory(const MemoryNeed& need) {
  if (need.bytes == 0) return;
  const uint64_t avail = memory_available();
  if (need.bytes > avail)
    throw std::invalid_argument("memory: this run needs " + format_bytes(need.bytes) +
                                (need.detail.empty() ? "" : " (" + need.detail + ")") + " but only " +
                                format_bytes(avail) + " are available; reduce the sizes");
}

}  // namespace alloclab
