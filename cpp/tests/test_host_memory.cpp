// Host memory: the limits a process really has (MemAvailable, nested cgroup v1 and v2 levels, the address space),
// read from a directory that mimics /proc and /sys/fs/cgroup.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "alloclab/topology/host_memory.hpp"

using namespace alloclab;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t GiB = uint64_t(1) << 30, MiB = uint64_t(1) << 20;

// The memory controller's limit and usage files, cgroup v1 and v2.
struct CgroupFiles {
  const char* limit;
  const char* usage;
};
constexpr CgroupFiles kV1{"memory.limit_in_bytes", "memory.usage_in_bytes"};
constexpr CgroupFiles kV2{"memory.max", "memory.current"};
constexpr const char* kV1NoLimit = "9223372036854771712";  // the largest page-aligned long

// A scratch root with /proc/meminfo (8 GiB available) and whatever the test writes below it.
struct FakeRoot {
  fs::path dir;
  FakeRoot() {
    char tmpl[] = "/tmp/alloclab-root-XXXXXX";
    dir = mkdtemp(tmpl);
    write("proc/meminfo", "MemTotal: 16777216 kB\nMemFree: 1 kB\nMemAvailable: 8388608 kB\n");
  }
  ~FakeRoot() { fs::remove_all(dir); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
  // The process's /proc/self/cgroup and the mounts it sees (/proc/self/mountinfo).
  void process(const std::string& cgroup, const std::string& mountinfo) const {
    write("proc/self/cgroup", cgroup);
    write("proc/self/mountinfo", mountinfo);
  }
  // One cgroup level `cg`: its limit (`files.limit`: "max", a byte count, or v1's "no limit") and its usage.
  void level(const CgroupFiles& files, const std::string& cg, const std::string& limit, uint64_t usage) const {
    write(cg + "/" + files.limit, limit + "\n");
    write(cg + "/" + files.usage, std::to_string(usage) + "\n");
  }
  std::string root() const { return dir.string(); }
};

}  // namespace

TEST(HostMemory, WithoutCgroupsMemAvailableBounds) {
  FakeRoot r;
  const MemoryLimits lim = memory_limits(r.root());
  EXPECT_EQ(lim.available, 8 * GiB);
  EXPECT_EQ(lim.available_bound, "MemAvailable");
}

TEST(HostMemory, NestedCgroupV1LevelsBoundTheirChildren) {
  // This machine's kind: memory controller mounted on its own, the process two levels down; its own cgroup is
  // unlimited ("no limit" is the largest page-aligned long), its parent is limited to 3 GiB with 2.5 GiB charged,
  // of which 1 GiB is inactive page cache (reclaimable).
  FakeRoot r;
  r.process("9:name=systemd:/\n4:memory:/jobs/job1\n1:cpu,cpuacct:/\n0::/\n",
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  const std::string m = "sys/fs/cgroup/memory";
  r.level(kV1, m, kV1NoLimit, 5 * GiB);
  r.level(kV1, m + "/jobs", std::to_string(3 * GiB), 5 * GiB / 2);
  r.write(m + "/jobs/memory.stat", "cache 1\ntotal_inactive_file " + std::to_string(GiB) + "\n");
  r.level(kV1, m + "/jobs/job1", kV1NoLimit, GiB);
  const MemoryLimits lim = memory_limits(r.root());
  EXPECT_EQ(lim.available, 3 * GiB - (5 * GiB / 2 - GiB));
  EXPECT_EQ(lim.available_bound, "cgroup v1 /jobs: limit 3.0 GiB, 1.5 GiB in use");
}

TEST(HostMemory, TheProcessOwnNestedCgroupV2NotOnlyTheRoot) {
  // Unified hierarchy: the root has no memory.max, the process's own cgroup (three levels down) has 512 MiB with
  // 100 MiB charged; a level in between allows more.
  FakeRoot r;
  r.process("0::/user.slice/app.scope/run\n",
            "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  const std::string c = "sys/fs/cgroup";
  r.write(c + "/memory.current", std::to_string(12 * GiB) + "\n");
  r.level(kV2, c + "/user.slice", "max", GiB);
  r.level(kV2, c + "/user.slice/app.scope", std::to_string(4 * GiB), GiB);
  r.level(kV2, c + "/user.slice/app.scope/run", std::to_string(512 * MiB), 100 * MiB);
  r.write(c + "/user.slice/app.scope/run/memory.stat", "anon 1\ninactive_file 0\n");
  const MemoryLimits lim = memory_limits(r.root());
  EXPECT_EQ(lim.available, 412 * MiB);
  EXPECT_EQ(lim.available_bound, "cgroup v2 /user.slice/app.scope/run: limit 512.0 MiB, 100.0 MiB in use");
}

TEST(HostMemory, ACgroupNamespaceMountsTheProcessOwnCgroupAsRoot) {
  // In a container the hierarchy is mounted from the container's cgroup: the mount's root field names it, and
  // /proc/self/cgroup says "/" (the namespace root), which is the mount point itself.
  FakeRoot r;
  r.process("0::/\n", "29 23 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
  r.level(kV2, "sys/fs/cgroup", std::to_string(2 * GiB), GiB / 2);
  EXPECT_EQ(memory_limits(r.root()).available, 3 * GiB / 2);
}

TEST(HostMemory, MissingOrGarbledFilesSetNoLimit) {
  FakeRoot r;
  r.process("garbage\n4:memory\n0::/a\n", "short line\n1 2 3 / /x - cgroup2\n");
  r.level(kV2, "x/a", "lots", 12);
  EXPECT_EQ(memory_limits(r.root()).available, 8 * GiB);
}

TEST(HostMemory, ThreadStacksCountInTheAddressSpace) {
  EXPECT_GE(thread_stack_bytes(), uint64_t(64) << 10);
  // A thousand workers of this machine's default stack are checked against RLIMIT_AS when there is one (the Python
  // test runs that in a child with `ulimit -v`); without one, only memory.
  EXPECT_NO_THROW(check_memory({0, "", 1000}));
}
