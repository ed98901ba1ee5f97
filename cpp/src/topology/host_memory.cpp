// Host memory available to this process, and the run-wide memory check (see host_memory.hpp).
#include "alloclab/topology/host_memory.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace alloclab {

namespace {

// A single number from a file (memory.max, memory.usage_in_bytes, ...); nullopt for "max", a missing file or text.
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(word, &used);
    if (used != word.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The number after `key` on its line of a "key value" file (memory.stat, /proc/self/status); 0 when absent.
uint64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string k;
    uint64_t v = 0;
    if (fields >> k >> v && k == key) return v;
  }
  return 0;
}

// One memory cgroup hierarchy of this process: the directory of its own cgroup, and the hierarchy's root directory
// (the mount point) where the walk up ends.
struct Hierarchy {
  bool v2;
  std::string own, top;
};

// The memory hierarchies of this process, from /proc/self/cgroup (which cgroup, by hierarchy) and
// /proc/self/mountinfo (where each hierarchy is mounted, and which part of it: its root field).
std::vector<Hierarchy> hierarchies(const std::string& root) {
  struct Membership {
    bool v2;
    std::string path;
  };
  std::vector<Membership> member;
  std::ifstream cg(root + "/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers == ",,")
      member.push_back({true, path});
    else if (controllers.find(",memory,") != std::string::npos)
      member.push_back({false, path});
  }
  std::vector<Hierarchy> out;
  std::ifstream mi(root + "/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);) {
    std::istringstream in(line);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    const std::string& fstype = dash[1];
    const std::string super = "," + dash[3] + ",";
    const bool v2 = fstype == "cgroup2";
    if (!v2 && !(fstype == "cgroup" && super.find(",memory,") != std::string::npos)) continue;
    const std::string& mount_root = f[3];
    const std::string& mount_point = f[4];
    for (const Membership& m : member) {
      if (m.v2 != v2) continue;
      // The cgroup's directory under the mount; a path outside the mounted part (a cgroup namespace) is the mount.
      std::string rel;
      if (mount_root == "/")
        rel = m.path;
      else if (m.path.compare(0, mount_root.size(), mount_root) == 0)
        rel = m.path.substr(mount_root.size());
      const std::string top = root + mount_point;
      out.push_back({v2, top + (rel == "/" ? "" : rel), top});
    }
  }
  return out;
}

}  // namespace

MemoryLimits memory_limits(const std::string& root) {
  MemoryLimits lim;
  std::ifstream meminfo(root + "/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      lim.available = kib * 1024;
      lim.available_bound = "MemAvailable";
    }
  for (const Hierarchy& h : hierarchies(root)) {
    // Every level from the process's cgroup up to the hierarchy's root: a parent's limit binds its children.
    for (std::string dir = h.own;; dir = dir.substr(0, dir.rfind('/'))) {
      const auto limit = read_number(dir + (h.v2 ? "/memory.max" : "/memory.limit_in_bytes"));
      const auto usage = read_number(dir + (h.v2 ? "/memory.current" : "/memory.usage_in_bytes"));
      // cgroup v1 writes "no limit" as the largest page-aligned long (9223372036854771712).
      if (limit && usage && *limit < (uint64_t(1) << 62)) {
        const uint64_t reclaimable = stat_value(dir + "/memory.stat", h.v2 ? "inactive_file" : "total_inactive_file");
        const uint64_t charged = *usage > reclaimable ? *usage - reclaimable : 0;
        const uint64_t left = *limit > charged ? *limit - charged : 0;
        if (left < lim.available) {
          const std::string level = dir.size() > h.top.size() ? dir.substr(h.top.size()) : "/";
          lim.available = left;
          lim.available_bound = std::string(h.v2 ? "cgroup v2 " : "cgroup v1 ") + level + ": limit " +
                                format_bytes(*limit) + ", " + format_bytes(charged) + " in use";
        }
      }
      if (dir.size() <= h.top.size() || dir.find('/', h.top.size()) == std::string::npos) break;
    }
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const uint64_t mapped = stat_value(root + "/proc/self/status", "VmSize:") * 1024;
    lim.address_space = as.rlim_cur > mapped ? as.rlim_cur - mapped : 0;
    lim.address_space_bound =
        "ulimit -v " + format_bytes(as.rlim_cur) + ", " + format_bytes(mapped) + " mapped already";
  }
  return lim;
}

uint64_t memory_available() { return memory_limits().available; }

uint64_t thread_stack_bytes() {
  size_t stack = 8 << 20, guard = 4096;
  pthread_attr_t attr;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_getguardsize(&attr, &guard);
    pthread_attr_destroy(&attr);
  }
  return stack + guard;
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
  if (need.bytes == 0 && need.threads == 0) return;
  const MemoryLimits lim = memory_limits();
  // What a worker thread itself keeps resident: the stack pages it touches, its context and latency histogram.
  const uint64_t resident = uint64_t(need.threads) * (uint64_t(64) << 10);
  const auto refuse = [&](uint64_t bytes, const std::string& detail, uint64_t avail, const std::string& bound) {
    return MemoryRefused("memory: this run needs " + format_bytes(bytes) + (detail.empty() ? "" : " (" + detail + ")") +
                         " but only " + format_bytes(avail) + " are available (" + bound + "); reduce the sizes");
  };
  if (need.bytes + resident > lim.available)
    throw refuse(need.bytes + resident,
                 need.threads ? need.detail + (need.detail.empty() ? "" : " + ") + "the workers' stacks and contexts " +
                                    format_bytes(resident)
                              : need.detail,
                 lim.available, lim.available_bound);
  // (glibc's per-thread malloc arenas need not fit: when one cannot be mapped, the thread shares another.)
  const uint64_t stacks = uint64_t(need.threads) * thread_stack_bytes();
  if (need.bytes + stacks > lim.address_space)
    throw refuse(need.bytes + stacks,
                 (need.detail.empty() ? "" : need.detail + " + ") + std::to_string(need.threads) +
                     " worker stacks of " + format_bytes(thread_stack_bytes()),
                 lim.address_space, "address space: " + lim.address_space_bound);
}

}  // namespace alloclab
