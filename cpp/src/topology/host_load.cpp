// Host load and per-thread scheduler accounting (see host_load.hpp).
#include "alloclab/topology/host_load.hpp"

#include "alloclab/base/clock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace alloclab {

namespace {
// Reads a small /proc file with plain syscalls (no iostream: a worker calls read_thread_sched() at its start).
// Returns the bytes read, 0 on any failure.
size_t read_small(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return size_t(n);
}
}  // namespace

HostLoad read_host_load() {
  HostLoad h;
  char buf[256];
  if (read_small("/proc/loadavg", buf, sizeof buf)) h.load1 = std::strtod(buf, nullptr);
  {
    std::ifstream stat("/proc/stat");
    std::string key;
    long value = 0;
    while (stat >> key) {
      if (key == "procs_running" && stat >> value) {
        h.procs_running = int(value);
        break;
      }
      stat.ignore(1 << 16, '\n');
    }
  }
  // cpufreq where the kernel has it (bare metal), else /proc/cpuinfo (VMs report the host's nominal clock there).
  double sum = 0;
  int n = 0;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    char path[96];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", cpu);
    if (!read_small(path, buf, sizeof buf)) break;
    sum += std::strtod(buf, nullptr) / 1000.0;  // kHz -> MHz
    ++n;
  }
  if (n == 0) {
    std::ifstream info("/proc/cpuinfo");
    std::string line;
    while (std::getline(info, line))
      if (line.rfind("cpu MHz", 0) == 0)
        if (const auto colon = line.find(':'); colon != std::string::npos) {
          sum += std::strtod(line.c_str() + colon + 1, nullptr);
          ++n;
        }
  }
  if (n) h.cpu_mhz = sum / n;
  return h;
}

ThreadSched read_thread_sched() {
  ThreadSched t;
  if (virtual_clock()) return t;  // a virtual CPU has no thread of its own: nothing to say
  char buf[128];
  if (!read_small("/proc/thread-self/schedstat", buf, sizeof buf)) return t;
  unsigned long long run = 0, wait = 0;
  if (std::sscanf(buf, "%llu %llu", &run, &wait) != 2) return t;
  t = {true, run, wait};
  return t;
}

}  // namespace alloclab
