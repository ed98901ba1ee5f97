// Calibration measurements (see calibrate.hpp).
#include "alloclab/lab/calibrate.hpp"

#include <hwloc.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <utility>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/rng.hpp"
#include "alloclab/mm/page.hpp"
#include "alloclab/mm/vmalloc/list.hpp"
#include "alloclab/mm/vmalloc/rbtree.hpp"
#include "alloclab/topology/topology.hpp"

namespace alloclab::calibration {

namespace {

void check_pu(int pu) {
  const int n = Topology::host()->nr_pus();
  if (pu < 0 || pu >= n)
    throw std::invalid_argument("pu: " + std::to_string(pu) + " is not a host PU (allowed: 0.." +
                                std::to_string(n - 1) + ")");
}

// Pins the calling thread to host PU `pu` or throws std::runtime_error: an unpinned measurement measures nothing.
void pin(int pu) {
  static const Machine host(Topology::host(), Topology::host());
  const BindOutcome b = host.bind_current_thread(Slot{0, pu, 0, pu, 0});
  if (!b.ok)
    throw std::runtime_error("calibrate: cannot pin a thread to host PU " + std::to_string(pu) + ": " + b.error);
}

// Runs body(i) on one thread per PU of `pus`, each pinned first. The bodies start only once every thread is pinned
// (a ping-pong partner that failed to pin would leave the other spinning forever). Rethrows the first failure.
void on_pinned_threads(const std::vector<int>& pus, const std::function<void(size_t)>& body) {
  for (const int pu : pus) check_pu(pu);
  const size_t n = pus.size();
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> pinned{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        pin(pus[i]);
      } catch (...) {
        errors[i] = std::current_exception();
        failed.store(true);
      }
      pinned.fetch_add(1);
      while (pinned.load() < n) std::this_thread::yield();
      if (failed.load()) return;
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Keeps the compiler from dropping or merging the work done through `p` (stores into memory freed afterwards).
inline void escape(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

double elapsed_ns(uint64_t t0, uint64_t t1) { return ticks_to_ns(t1 - t0); }

constexpr size_t kHugePage = size_t(2) << 20;

// A buffer of `bytes` rounded up to whole 2 MiB pages, advised to huge pages (advice only: without THP the pages stay
// 4 KiB) and not yet touched, so that the caller's first touch, on its pinned thread, places it on that thread's node.
// Huge pages as in the kernel's direct map: an access meets its cache miss, not also a TLB miss. Throws bad_alloc.
class HugePageBuffer {
 public:
  explicit HugePageBuffer(size_t bytes)
      : size_((bytes + kHugePage - 1) / kHugePage * kHugePage),
        data_(static_cast<char*>(std::aligned_alloc(kHugePage, size_))) {
    if (!data_) throw std::bad_alloc();
    madvise(data_, size_, MADV_HUGEPAGE);
  }
  ~HugePageBuffer() { std::free(data_); }
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  char* data() const { return data_; }

 private:
  size_t size_;
  char* data_;
};

// One cache line of a pointer chase.
struct alignas(64) ChaseLine {
  ChaseLine* next;
};

// Links lines[0..n) (n >= 1, below 2^32) into one cycle in a random order drawn from `rng` (Fisher-Yates), so that a
// chase around it gives the prefetchers nothing to follow: lines[order[i]].next = &lines[order[i + 1]], the last back
// to the first. Returns the order (position along the cycle -> line index).
std::vector<uint32_t> link_random_cycle(ChaseLine* lines, size_t n, Rng& rng) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  for (size_t i = 0; i < n; ++i) lines[order[i]].next = &lines[order[i + 1 < n ? i + 1 : 0]];
  return order;
}

}  // namespace

// ---- host topology ------------------------------------------------------------------------------------------------

std::string host_synthetic() {
  const auto host = Topology::host();
  hwloc_topology_t t = host->raw();
  const int packages = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
  const int nodes = host->nr_nodes(), cores = host->nr_cores(), pus = host->nr_pus();
  const int l3 = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L3CACHE);
  const PuDistances want(*host);
  const auto describes_host = [&](const std::string& s) {
    try {
      const auto m = Topology::synthetic(s);
      return m->nr_pus() == pus && m->nr_cores() == cores && m->nr_nodes() == nodes &&
             PuDistances(*m).present() == want.present();
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  if (cores > 0 && nodes % packages == 0 && pus % cores == 0) {
    std::string s = "package:" + std::to_string(packages) + " numa:" + std::to_string(nodes / packages);
    if (l3 > 0 && l3 % nodes == 0 && cores % l3 == 0)
      s += " l3:" + std::to_string(l3 / nodes) + " core:" + std::to_string(cores / l3);
    else if (cores % nodes == 0)
      s += " core:" + std::to_string(cores / nodes);
    s += " pu:" + std::to_string(pus / cores);
    if (describes_host(s)) return s;
  }
  const std::string exported = host->synthetic_string();
  if (!exported.empty() && describes_host(exported)) return exported;
  throw std::runtime_error("calibrate: no synthetic description matches this host's topology (" + std::to_string(pus) +
                           " PUs, " + std::to_string(cores) + " cores, " + std::to_string(nodes) +
                           " nodes); hwloc exports '" + exported + "'");
}

std::vector<std::pair<DistanceClass, std::vector<std::pair<int, int>>>> host_transfer_pairs(size_t max_pairs) {
  const PuDistances d(*Topology::host());
  std::vector<std::pair<DistanceClass, std::vector<std::pair<int, int>>>> out;
  for (const auto c : d.present()) out.emplace_back(c, d.pairs(c, max_pairs));
  return out;
}

std::vector<int> node_core_pus(int node) {
  const auto host = Topology::host();
  hwloc_topology_t t = host->raw();
  std::vector<int> out;
  std::vector<unsigned> cores_seen;
  for (const int pu : host->pus_of_node(node)) {  // throws "node: ..." for a bad index
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(pu));
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, obj);
    const unsigned id = core ? core->logical_index : ~0u - unsigned(pu);
    if (std::find(cores_seen.begin(), cores_seen.end(), id) != cores_seen.end()) continue;
    cores_seen.push_back(id);
    out.push_back(pu);
  }
  return out;
}

namespace {
// hwloc's data or unified cache object of each level, from 1 (L1D).
constexpr hwloc_obj_type_t kLevels[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L4CACHE,
                                        HWLOC_OBJ_L5CACHE};
}  // namespace

size_t host_cache_bytes(int level) {
  if (level < 1 || level > int(std::size(kLevels)))
    throw std::invalid_argument("level: " + std::to_string(level) + " (allowed: 1.." +
                                std::to_string(std::size(kLevels)) + ")");
  const hwloc_obj_t c = hwloc_get_obj_by_type(Topology::host()->raw(), kLevels[level - 1], 0);
  return c && c->attr ? size_t(c->attr->cache.size) : 0;
}

size_t host_llc_bytes() {
  size_t best = 0;
  for (int level = 1; level <= int(std::size(kLevels)); ++level) best = std::max(best, host_cache_bytes(level));
  return best;
}

// Throws std::invalid_argument "pu: <what> needs two different PUs (got <a> twice)" unless a and b differ.
void require_two_pus(int a, int b, const char* what) {
  if (a == b)
    throw std::invalid_argument(std::string("pu: ") + what + " needs two different PUs (got " + std::to_string(a) +
                                " twice)");
}

// ---- line transfer ------------------------------------------------------------------------------------------------

double transfer_ns(int pu_a, int pu_b, int samples, int round_trips) {
  require_two_pus(pu_a, pu_b, "a transfer");
  if (samples < 1 || round_trips < 1)
    throw std::invalid_argument("samples: " + std::to_string(samples) + " samples of " + std::to_string(round_trips) +
                                " round trips (allowed: at least 1 of each)");
  struct alignas(64) Line {
    std::atomic<uint64_t> v{0};
  };
  Line line;
  const long warmup = std::min(1000, round_trips);
  const long total = warmup + long(samples) * round_trips;
  std::vector<double> one_way;
  one_way.reserve(size_t(samples));
  // The pinger turns 0 into 1, the ponger 1 into 0: each CAS succeeds only once the line has come back from the
  // other side, so one round trip is two line transfers.
  const auto ping = [&] {
    uint64_t expected;
    for (long r = 0; r < warmup; ++r)
      while (!line.v.compare_exchange_strong(expected = 0, 1)) {
      }
    for (int s = 0; s < samples; ++s) {
      const uint64_t t0 = clock_ticks();
      for (int r = 0; r < round_trips; ++r)
        while (!line.v.compare_exchange_strong(expected = 0, 1)) {
        }
      one_way.push_back(elapsed_ns(t0, clock_ticks()) / round_trips / 2);
    }
  };
  const auto pong = [&] {
    uint64_t expected;
    for (long r = 0; r < total; ++r)
      while (!line.v.compare_exchange_strong(expected = 1, 0)) {
      }
  };
  on_pinned_threads({pu_a, pu_b}, [&](size_t i) { i == 0 ? ping() : pong(); });
  return median(one_way);
}

// ---- futex wake-up ------------------------------------------------------------------------------------------------

double futex_wake_ns(int waker_pu, int wakee_pu, int samples, int sleep_us) {
  require_two_pus(waker_pu, wakee_pu, "a wake-up");
  if (samples < 1 || sleep_us < 0)
    throw std::invalid_argument("samples: " + std::to_string(samples) + " samples, " + std::to_string(sleep_us) +
                                " us apart (allowed: at least 1 sample, a sleep >= 0)");
  alignas(64) std::atomic<uint32_t> word{0};
  alignas(64) std::atomic<int> armed{0};
  alignas(64) std::atomic<int> done{0};
  alignas(64) std::atomic<uint64_t> stamp{0};
  std::vector<double> latency(static_cast<size_t>(samples));
  const auto futex = [&](int op, uint32_t val) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, val, nullptr, nullptr, 0);
  };
  const auto waker = [&] {
    for (int s = 1; s <= samples; ++s) {
      while (armed.load(std::memory_order_acquire) != s) cpu_pause();
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));  // let the wakee fall asleep
      stamp.store(clock_ticks(), std::memory_order_relaxed);
      word.store(1, std::memory_order_release);
      futex(FUTEX_WAKE_PRIVATE, 1);
      while (done.load(std::memory_order_acquire) != s) cpu_pause();
    }
  };
  const auto wakee = [&] {
    for (int s = 1; s <= samples; ++s) {
      armed.store(s, std::memory_order_release);
      while (word.load(std::memory_order_acquire) == 0) futex(FUTEX_WAIT_PRIVATE, 0);
      latency[size_t(s - 1)] = elapsed_ns(stamp.load(std::memory_order_relaxed), clock_ticks());
      word.store(0, std::memory_order_relaxed);
      done.store(s, std::memory_order_release);
    }
  };
  on_pinned_threads({waker_pu, wakee_pu}, [&](size_t i) { i == 0 ? waker() : wakee(); });
  return median(latency);
}

// ---- bandwidth ----------------------------------------------------------------------------------------------------

double bandwidth_gbs(Stream kind, const std::vector<int>& pus, size_t bytes_per_thread, int trials) {
  if (pus.empty() || bytes_per_thread < 4096 || trials < 1)
    throw std::invalid_argument("bytes_per_thread: " + std::to_string(bytes_per_thread) + " bytes on " +
                                std::to_string(pus.size()) + " threads, " + std::to_string(trials) +
                                " trials (allowed: at least 4096 bytes, one thread and one trial)");
  const size_t n = pus.size();
  const bool copy = kind == Stream::copy;
  std::barrier<> start{ptrdiff_t(n)}, finish{ptrdiff_t(n)};
  std::vector<double> gbs;
  uint64_t t0 = 0;
  on_pinned_threads(pus, [&](size_t i) {
    // First touch after pinning: the pages come from the thread's own node. Only a copy needs a second buffer.
    char* dst = static_cast<char*>(std::aligned_alloc(4096, bytes_per_thread));
    char* src = copy ? static_cast<char*>(std::aligned_alloc(4096, bytes_per_thread)) : nullptr;
    if (!dst || (copy && !src)) {  // leave both barriers so that the other threads do not wait for this one
      std::free(src);
      std::free(dst);
      start.arrive_and_drop();
      finish.arrive_and_drop();
      throw std::bad_alloc();
    }
    if (copy) std::memset(src, 1, bytes_per_thread);
    std::memset(dst, 0, bytes_per_thread);
    for (int t = 0; t <= trials; ++t) {  // trial 0 warms up
      start.arrive_and_wait();
      if (i == 0) t0 = clock_ticks();
      uint64_t sum = 0;
      switch (kind) {  // a pass over struct pages touches every line: one word each
        case Stream::copy: std::memcpy(dst, src, bytes_per_thread); break;
        case Stream::update:  // each line read, then written back
          for (size_t off = 0; off + sizeof(uint64_t) <= bytes_per_thread; off += 64)
            *reinterpret_cast<uint64_t*>(dst + off) += 1;
          break;
        case Stream::store:  // each line written, never read by the core (read for ownership by the cache)
          for (size_t off = 0; off + sizeof(uint64_t) <= bytes_per_thread; off += 64)
            *reinterpret_cast<uint64_t*>(dst + off) = off;
          break;
        case Stream::load:  // independent loads: the core keeps as many in flight as it can
          for (size_t off = 0; off + sizeof(uint64_t) <= bytes_per_thread; off += 64)
            sum += *reinterpret_cast<const uint64_t*>(dst + off);
          break;
      }
      escape(dst);
      asm volatile("" : : "r"(sum));
      finish.arrive_and_wait();
      // Read (+ written; a store's line is read for ownership, then written)
      const double counted = double((kind == Stream::load ? 1 : 2) * bytes_per_thread * n);
      if (i == 0 && t > 0) gbs.push_back(counted / elapsed_ns(t0, clock_ticks()));
    }
    std::free(src);
    std::free(dst);
  });
  return *std::max_element(gbs.begin(), gbs.end());
}

// ---- misses in flight ---------------------------------------------------------------------------------------------

namespace {

// The numbers of interleaved chases tried, in the order they run (1 first: its time per step is the latency).
constexpr size_t kChases[] = {1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32};
constexpr size_t kMaxChases = kChases[std::size(kChases) - 1];

// One step of one chase: a load that depends on the previous one. The empty asm hides the pointer from the optimiser,
// so that every load is done (none is dropped as unused) and the K loads of a step stay K scalar loads (no gather).
inline ChaseLine* chase_step(ChaseLine* p) {
  p = p->next;
  asm volatile("" : "+r"(p));
  return p;
}

// ns per step of K chases advanced together for `steps` steps from chases[0..K), which are left where they stopped.
// The K pointers are K separate variables, so each chase is its own chain of dependent loads and only the core's miss
// buffers limit how many of its misses overlap. They stay in registers as far as x86-64's 16 go (K <= 14); beyond,
// the rest spill to the stack, an L1 hit each per step, small beside a miss.
template <size_t K>
double chase_ns_per_step(std::array<ChaseLine*, kMaxChases>& chases, size_t steps) {
  return [&]<size_t... J>(std::index_sequence<J...>) {
    ChaseLine* p[K] = {chases[J]...};
    const uint64_t t0 = clock_ticks();
    for (size_t s = 0; s < steps; ++s) ((p[J] = chase_step(p[J])), ...);
    const uint64_t t1 = clock_ticks();
    ((chases[J] = p[J]), ...);
    return elapsed_ns(t0, t1) / double(steps);
  }
  (std::make_index_sequence<K>{});
}

}  // namespace

MissesInFlight misses_in_flight(int pu, size_t bytes, int trials, size_t misses) {
  constexpr size_t kLine = sizeof(ChaseLine);
  constexpr size_t kMaxLines = size_t(1) << 32;
  if (bytes < kMaxChases * kLine * 2 || bytes / kLine > kMaxLines)
    throw std::invalid_argument("bytes: " + std::to_string(bytes) +
                                " bytes (allowed: " + std::to_string(kMaxChases * kLine * 2) + " to " +
                                std::to_string(kMaxLines * kLine) + " bytes)");
  if (trials < 1 || misses < 1)
    throw std::invalid_argument("trials: " + std::to_string(trials) + " trials of " + std::to_string(misses) +
                                " misses per chase count (allowed: at least 1 of each)");
  const size_t n = bytes / kLine;
  struct Trial {
    double lines, latency_ns;
    int best_k;
  };
  std::vector<Trial> results;
  on_pinned_threads({pu}, [&](size_t) {
    // First touch after pinning, in address order: the lines come from the thread's own node, on huge pages where
    // the host gives them.
    HugePageBuffer buffer(n * kLine);
    std::memset(buffer.data(), 0, n * kLine);
    auto* lines = reinterpret_cast<ChaseLine*>(buffer.data());
    Rng rng(0x6d6c70ull);  // fixed: the same cycle on every run
    const std::vector<uint32_t> order = link_random_cycle(lines, n, rng);
    // Every run goes on along the cycle where the previous one stopped (`at`: the first chase's position), so that
    // its lines were last touched long ago (at linking, or a pass of the cycle earlier) and miss.
    size_t at = 0;
    for (int t = 0; t <= trials; ++t) {  // trial 0 warms up (code, TLB, the clock's ramp)
      Trial trial{0, 0, 1};
      const auto run = [&]<size_t K>() {
        std::array<ChaseLine*, kMaxChases> chases{};
        for (size_t j = 0; j < K; ++j) chases[j] = &lines[order[(at + j * (n / K)) % n]];
        const size_t steps = std::max<size_t>(1, misses / K);
        const double ns = chase_ns_per_step<K>(chases, steps);
        at = (at + steps) % n;
        if (K == 1) trial.latency_ns = ns;
        const double in_flight = double(K) * trial.latency_ns / ns;  // Little's law
        if (in_flight > trial.lines) trial = {in_flight, trial.latency_ns, int(K)};
      };
      [&]<size_t... I>(std::index_sequence<I...>) { (run.template operator()<kChases[I]>(), ...); }
      (std::make_index_sequence<std::size(kChases)>{});
      if (t > 0) results.push_back(trial);
    }
  });
  // The median trial by misses in flight (the upper one of an even count), with the median latency.
  std::vector<double> latency;
  for (const auto& r : results) latency.push_back(r.latency_ns);
  std::nth_element(results.begin(), results.begin() + ptrdiff_t(results.size() / 2), results.end(),
                   [](const Trial& a, const Trial& b) { return a.lines < b.lines; });
  const Trial& mid = results[results.size() / 2];
  return {mid.lines, median(latency), mid.best_k};
}

// ---- 4 KiB page copies and clears ---------------------------------------------------------------------------------

double page_op_ns(PageOp op, bool ascending, int pu, size_t bytes, int trials) {
  if (bytes < 2 * mm::PAGE_SIZE || trials < 1)
    throw std::invalid_argument("bytes: " + std::to_string(bytes) + " bytes, " + std::to_string(trials) +
                                " trials (allowed: at least 8192 bytes and one trial)");
  const size_t pages = bytes / mm::PAGE_SIZE;
  std::vector<double> ns;
  on_pinned_threads({pu}, [&](size_t) {
    // First touch after pinning: the pages come from the thread's own node, on huge pages where the host gives them.
    HugePageBuffer src_buffer(pages * mm::PAGE_SIZE), dst_buffer(pages * mm::PAGE_SIZE);
    char* src = src_buffer.data();
    char* dst = dst_buffer.data();
    std::memset(src, 1, pages * mm::PAGE_SIZE);
    std::memset(dst, 0, pages * mm::PAGE_SIZE);
    // Ascending: each page the next frame after the one before, on both sides. Random: two independent random
    // orders, so no page follows its neighbour and no prefetcher runs ahead into the next one.
    Rng rng(0x70616765ull);  // fixed: the same orders on every run
    std::vector<uint32_t> from(pages), to(pages);
    std::iota(from.begin(), from.end(), 0u);
    std::iota(to.begin(), to.end(), 0u);
    for (size_t i = pages - 1; i > 0 && !ascending; --i) {
      std::swap(from[i], from[rng.below(i + 1)]);
      std::swap(to[i], to[rng.below(i + 1)]);
    }
    for (int t = 0; t <= trials; ++t) {  // trial 0 warms the TLB-independent parts (code, the order vectors)
      const uint64_t t0 = clock_ticks();
      for (size_t i = 0; i < pages; ++i) {
        char* d = dst + size_t(to[i]) * mm::PAGE_SIZE;
        if (op == PageOp::copy)
          std::memcpy(d, src + size_t(from[i]) * mm::PAGE_SIZE, mm::PAGE_SIZE);
        else
          std::memset(d, 0, mm::PAGE_SIZE);
        escape(d);
      }
      const uint64_t t1 = clock_ticks();
      if (t > 0) ns.push_back(elapsed_ns(t0, t1) / double(pages));
    }
  });
  return median(ns);
}

// ---- core clock ---------------------------------------------------------------------------------------------------

#if defined(__x86_64__)
namespace {

// This thread's CPU time: it stops while another task runs on the PU, so a chain timed by it counts cycles per
// nanosecond of running, not of waiting (wall time on a PU shared with one busy task halves the clock: 1.57 GHz
// instead of 3.13 on this project's host).
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

}  // namespace
#endif

double core_ghz(int pu, int trials) {
#if defined(__x86_64__)
  std::vector<double> ghz;
  on_pinned_threads({pu}, [&](size_t) {
    constexpr uint64_t kIters = 1'000'000;  // x 100 adds: about 40 ms at 2.5 GHz
    // Register to register: Golden Cove and later cores fold a dependent `add $imm` into the renamer, so a chain of
    // immediate adds ran about 8 adds a cycle there (21 GHz on this project's VM once it moved to such a core).
    volatile uint64_t one_in_memory = 1;
    const uint64_t one = one_in_memory;  // a value the compiler and the renamer cannot know
    for (int t = 0; t <= trials; ++t) {  // trial 0 warms up (and lets the clock ramp)
      uint64_t x = 0;
      const double s = thread_cpu_ns();
      for (uint64_t k = 0; k < kIters; ++k) asm volatile(".rept 100\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
      if (t > 0) ghz.push_back(double(kIters) * 100 / (thread_cpu_ns() - s));
    }
  });
  return median(ghz);
#else
  check_pu(pu);
  (void)trials;
  return 0;
#endif
}

// ---- per-operation costs ------------------------------------------------------------------------------------------

namespace {

// Times `ops` calls of `step` per trial; returns the median ns per unit of work (step returns the units it did, an
// integer so that summing them costs one cycle, off the measured chain).
template <class Step>
double per_unit_ns(int trials, size_t ops, Step step) {
  std::vector<double> ns;
  for (int t = 0; t <= trials; ++t) {  // trial 0 warms the caches and the branch predictors
    const uint64_t t0 = clock_ticks();
    uint64_t units = 0;
    for (size_t k = 0; k < ops; ++k) units += step();
    const uint64_t t1 = clock_ticks();
    if (t > 0) ns.push_back(elapsed_ns(t0, t1) / double(units));
  }
  return median(ns);
}

struct alignas(64) ListNode {
  vmalloc::ListHead list;
};

struct KeyedNode {
  vmalloc::RbNode rb;  // first member: the node's address is the entry's
  uint64_t key;
};

// What each op's microbenchmark gets: the trial count, the operations per trial, and the one generator behind the
// random layouts. The benchmarks run in ALLOCLAB_OPS order from a fixed seed, so every run builds the same layouts.
struct OpBench {
  int trials;
  size_t ops;
  Rng& rng;
};

// One bench_<op> per op of ALLOCLAB_OPS, each returning the median ns per operation. Call on the pinned thread.

// atomic_rmw: a lock-prefixed add on a line that stays in L1 (the uncontended half of every lock operation).
double bench_atomic_rmw(OpBench& b) {
  alignas(64) std::atomic<uint64_t> counter{0};
  return per_unit_ns(b.trials, b.ops, [&] {
    counter.fetch_add(1, std::memory_order_seq_cst);
    return uint64_t(1);
  });
}

// line_access: a dependent load from a cached line: a pointer chase around a random cycle of 256 lines (16 KiB).
double bench_line_access(OpBench& b) {
  std::vector<ChaseLine> lines(256);
  ChaseLine* p = &lines[link_random_cycle(lines.data(), lines.size(), b.rng)[0]];
  return per_unit_ns(b.trials, b.ops, [&] {
    p = p->next;
    escape(p);
    return uint64_t(1);
  });
}

// list_op: list_move_tail on a 64-entry ListHead list = one list_del and one list_add_tail, i.e. two list ops.
double bench_list_op(OpBench& b) {
  vmalloc::ListHead head;
  std::vector<ListNode> nodes(64);
  for (auto& n : nodes) vmalloc::list_add_tail(&n.list, &head);
  return per_unit_ns(b.trials, b.ops, [&] {
    vmalloc::list_move_tail(head.next, &head);
    escape(&head);
    return uint64_t(2);
  });
}

// tree_step: one level of a lookup in a 1024-node rbtree (vmalloc's RbNode), random keys: a load, a compare and a
// branch the predictor cannot learn, as in find_vmap_area's walk.
double bench_tree_step(OpBench& b) {
  std::vector<KeyedNode> nodes(1024);
  vmalloc::RbRoot root;
  std::vector<uint64_t> keys(nodes.size());
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 2 * i + 1;
  for (size_t i = keys.size() - 1; i > 0; --i) std::swap(keys[i], keys[b.rng.below(i + 1)]);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].key = keys[i];
    vmalloc::RbNode** link = &root.rb_node;
    vmalloc::RbNode* parent = nullptr;
    while (*link) {
      parent = *link;
      link = keys[i] < reinterpret_cast<KeyedNode*>(parent)->key ? &parent->rb_left : &parent->rb_right;
    }
    vmalloc::rb_link_node(&nodes[i].rb, parent, link);
    vmalloc::rb_insert_color(&nodes[i].rb, &root);
  }
  std::vector<uint64_t> lookups(4096);
  for (auto& k : lookups) k = keys[b.rng.below(keys.size())];
  size_t next = 0;
  return per_unit_ns(b.trials, b.ops, [&] {
    const uint64_t key = lookups[next++ % lookups.size()];
    uint64_t levels = 0;
    for (vmalloc::RbNode* n = root.rb_node; n;) {
      ++levels;
      const uint64_t k = reinterpret_cast<KeyedNode*>(n)->key;
      if (key == k) break;
      n = key < k ? n->rb_left : n->rb_right;
    }
    return levels;
  });
}

// bitmap_word: find_next_bit over a 512-word bitmap with one bit set every 64 words: one word load, test and branch
// per word, as the kernel's scalar _find_next_bit (volatile loads keep the compiler from vectorising).
double bench_bitmap_word(OpBench& b) {
  std::vector<uint64_t> bitmap(512, 0);
  for (size_t w = 63; w < bitmap.size(); w += 64) bitmap[w] = uint64_t(1) << 17;
  const volatile uint64_t* words = bitmap.data();
  size_t pos = 0;
  return per_unit_ns(b.trials, b.ops / 16 + 1, [&] {
    uint64_t tested = 0;
    for (;;) {
      ++tested;
      if (words[pos]) break;
      pos = (pos + 1) % bitmap.size();
    }
    pos = (pos + 1) % bitmap.size();
    return tested;
  });
}

// page_init: __init_single_page on 64-byte struct pages in L1, as hugetlb_folio_init_tail_vmemmap does it.
double bench_page_init(OpBench& b) {
  std::vector<mm::Page> pages(256);
  size_t i = 0;
  return per_unit_ns(b.trials, b.ops, [&] {
    mm::Page& p = pages[i++ % pages.size()];
    std::memset(static_cast<void*>(&p), 0, sizeof(mm::Page));
    p.flags = mm::page_links(0, 0);
    p._refcount = 1;
    p._mapcount = -1;
    escape(&p);
    return uint64_t(1);
  });
}

// pause: back-to-back PAUSEs (cpu_pause(); nothing off x86), as a spin loop issues them while it waits. The loop adds
// an increment and a branch, about a cycle against the tens that a PAUSE takes. Under a hypervisor with PAUSE-loop
// exiting enabled, a long run of PAUSEs can exit to the host, and the figure then includes the exits.
double bench_pause(OpBench& b) {
  return per_unit_ns(b.trials, b.ops, [] {
    cpu_pause();
    return uint64_t(1);
  });
}

// clock_read: back-to-back reads of the host's clock (host_ticks(): RDTSC where the TSC is invariant), each kept, as
// model code reads it around a timed operation. Under a hypervisor that traps or scales the TSC, the figure includes
// that: it is what this host's runs pay.
double bench_clock_read(OpBench& b) {
  return per_unit_ns(b.trials, b.ops, [] {
    const uint64_t t = host_ticks();
    escape(&t);
    return uint64_t(1);
  });
}

}  // namespace

std::vector<std::pair<std::string, double>> op_ns(int pu, int trials, size_t ops) {
  if (trials < 1 || ops < 1)
    throw std::invalid_argument("trials: " + std::to_string(trials) + " trials of " + std::to_string(ops) +
                                " operations (allowed: at least 1 of each)");
  std::vector<std::pair<std::string, double>> out;
  on_pinned_threads({pu}, [&](size_t) {
    Rng rng(0x70726f66696c65ull);  // fixed: the same layouts on every run
    OpBench b{trials, ops, rng};
    // Every op of the list, in its order: an op without a bench_<op> does not compile.
#define ALLOCLAB_OP_BENCH(name) out.emplace_back(#name, bench_##name(b));
    ALLOCLAB_OPS(ALLOCLAB_OP_BENCH)
#undef ALLOCLAB_OP_BENCH
  });
  return out;
}

}  // namespace alloclab::calibration
