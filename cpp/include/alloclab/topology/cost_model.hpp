// CostModel: what a virtual-time run charges, in picoseconds, from one machine profile.
//
// Models: the machine of a profile (machine_profile.hpp) as model code meets it: a cost per named operation (Op, from
// the profile's op_cycles at its clock), the transfer of a cache line between two CPUs at their distance, the
// futex wake-up, and memory bandwidth by access pattern (Stream), per core and per node, shared by the bulk work
// running on a node at once. It also keeps the coherence state of the lines model code tracks (touch()): the last CPU
// that wrote each line and up to three CPUs that read it since; a read by another CPU pays the transfer from the
// nearest copy, a write pays the farthest copy it must invalidate, an access that finds the line in its own cache pays
// line_access.
// Two ways to charge the work between sync points: `table` charges the operations model code names (a pure function
// of the run's inputs: the same virtual times on every host), `measured` charges the host time the code really took,
// scaled by the clock ratio host / profile (charged at each sync point; not reproducible, as host time is not).
// Model code reaches the run's model through the vcost:: functions below, which do nothing in a real-clock run.
// Every call happens on the simulator's fibers, at sync points, so the state is touched in virtual-time order (but
// forget(), of memory no other CPU can reach yet).
// Lines are keyed by address, so the memory model code tracks must sit on lines the same way in every run: node
// memory, alignas(64) objects and line_vectors (base/line_aligned.hpp); a fresh object from the host's heap is
// forget()-ten first. Virtual times then never depend on the host's heap.
// Misses overlap only where model code says its accesses are independent (touch_each); separate touches are serial.
// Cache capacity (table costs, profiles with cache_mib.llc): each last-level cache counts the lines it takes in (a
// tracked line that arrives from memory or from another LLC, every line of a pass, the pages of a page op), and a
// tracked line leaves every cache once the LLC of the CPU that used it last has taken in cache_mib.llc worth of lines
// since: the line the LLC evicts is its least recently used one, counted as if no older line were used again (exact
// for streams, which is what fills an LLC here). The next access then pays dram_ns.local, or dram_ns.remote for
// memory of another node (NodeMemory tells a line's node; other memory is local to the CPU that misses), unless it is
// node memory and the same CPU's previous such miss was in the same 4 KiB page: the L2 streamer has prefetched it
// (Intel 64 and IA-32 Architectures Optimization Reference Manual: it follows ascending and descending sequences of
// addresses, one forward and one backward stream per 4 KiB page; AMD's L2 stream prefetcher likewise), and it costs
// its 64 bytes at the core's load bandwidth. A walk of consecutive struct pages thus pays one latency per 4 KiB of
// mem_map; the folio heads hugetlb_lock's walk enqueues, 32 KiB apart, pay one each. Node memory is page-aligned, so
// its host pages are the model's; the 4 KiB page of a heap object is an accident of the host's heap, so such a line
// always pays the latency, and virtual times never depend on the heap. A line model code touches for the first time
// in a run is taken as cached (set-up just wrote it).
// Private levels (profiles with cache_kib.l1d, and .l2): each CPU's L1D and L2 count the lines they take in the same
// way (every access that did not find the line there, every line of a pass or page op), and a line that the CPU that
// used it last finds its L1D's worth of newer lines behind costs cache_ns.l2 instead of line_access, or, past its
// L2's worth too, cache_ns.llc: the load-to-use latencies of a pointer chase that fits that level and not the one
// above (the hierarchy a random chase shows: on this project's Zen 4 host 4, 14 and 54 cycles at 16 KiB, 256 KiB and
// 4 MiB). Another CPU's line comes by coherence, and a copy a CPU holds as a reader of a line another used last is
// taken as in its L1D. Without them a line that is cached costs line_access, whatever has passed through since.
// Leaves out: out-of-order overlap of misses between separate touches, prefetchers but the streamer's page rule above
// (the next-line and next-page prefetchers, a stream that crosses a 4 KiB page), SMT sharing of a core, DRAM misses
// of untracked data, untracked data in the private levels (only tracked lines, passes and page ops fill them), the
// reuse of lines a pass brings in (a second pass over them pays the stream again), interconnect bandwidth between
// nodes, exclusive-state reads (a read of a line nobody else holds pays line_access).
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/enum_names.hpp"
#include "alloclab/base/scheduler.hpp"
#include "alloclab/base/tls.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/topology/machine_profile.hpp"

namespace alloclab {

enum class Op : uint8_t {
#define ALLOCLAB_OP_ENUM(name) name,
  ALLOCLAB_OPS(ALLOCLAB_OP_ENUM)
#undef ALLOCLAB_OP_ENUM
};
inline constexpr int kNrOps = int(std::size(kOpNames));  // Op o is named kOpNames[size_t(o)]

enum class Costs : uint8_t { table, measured };
inline constexpr EnumNames<Costs, 2> kCostsNames{{{{Costs::table, "table"}, {Costs::measured, "measured"}}}};

// What a page op does to one 4 KiB page: copy_page (migration's folio_copy) or clear_page (__GFP_ZERO, a fault's
// clear_highpage), the two operations of a profile's [page_ns] table.
enum class PageOp : uint8_t { copy, clear };
inline constexpr uint64_t kPageBytes = 4096;  // the page of a PageOp (mm's PAGE_SIZE; topology sits below mm)
inline constexpr EnumNames<PageOp, 2> kPageOpNames{{{{PageOp::copy, "copy"}, {PageOp::clear, "clear"}}}};
// The first page of a page op's run of pages: its node and frame number; kNoPfn where the pages are not contiguous,
// or not known.
inline constexpr uint64_t kNoPfn = ~uint64_t(0);
struct PageFrame {
  int node = -1;
  uint64_t pfn = kNoPfn;
  bool operator==(const PageFrame&) const = default;
};

// The access pattern of a stream, which sets the bandwidth it gets (likwid-bench's kernels, counted as bytes read +
// bytes written): `copy` reads one buffer and writes another, so each written line is first read for ownership (page
// copies and clears); `update` reads each line and writes it back in place, so no extra read (a pass that writes
// struct pages and reads them first); `load` only reads (a pass that reads struct pages); `store` only writes, so each
// line is read for ownership, then written back, counted as a copy is (a pass that writes struct pages without
// reading them: prep_compound_page's tails). One core's update and load streams run above its copy stream, which
// spends half its traffic on writes (kerncraft's Ice Lake-SP file: update 24.09, load 15.37, copy 14.51 GB/s; this
// project's AMD host: update about 38 against copy 17-23); a core's store stream runs near its copy stream, as both
// are bound by the stores that miss (this project's Intel host, 2026-12-05: store 19.2, copy 24.0, update 29.5
// GB/s); a saturated node gives them about alike.
enum class Stream : uint8_t { copy, update, load, store };
inline constexpr EnumNames<Stream, 4> kStreamNames{
    {{{Stream::copy, "copy"}, {Stream::update, "update"}, {Stream::load, "load"}, {Stream::store, "store"}}}};
// The stream of a PageOp's bytes, per PageOp: a copy reads one page and writes another; a clear writes a page unread.
inline constexpr std::array<Stream, 2> kPageOpStream{Stream::copy, Stream::store};

class CostModel {
 public:
  // `pu_of_cpu`: the profile PU each virtual CPU (the run's workers, by index) runs as; `host_ghz`: the host's
  // clock, for measured costs. Throws std::invalid_argument ("pu: ...") for a PU outside the profile's topology.
  CostModel(std::shared_ptr<const MachineProfile> profile, Costs costs, std::vector<int> pu_of_cpu, double host_ghz);

  const MachineProfile& profile() const { return *profile_; }
  Costs costs() const { return costs_; }
  int nr_cpus() const { return int(pu_of_cpu_.size()); }
  int pu_of(int cpu) const { return pu_of_cpu_[size_t(cpu)]; }
  int node_of(int cpu) const { return node_of_cpu_[size_t(cpu)]; }

  // Costs in picoseconds.
  vt::vtime op(Op o) const { return op_ps_[size_t(o)]; }
  // A cache line from virtual CPU a's cache to b's (0 for a == b).
  vt::vtime transfer(int cpu_a, int cpu_b) const {
    return transfer_ps_[size_t(cpu_a) * pu_of_cpu_.size() + size_t(cpu_b)];
  }
  vt::vtime wakeup() const { return wakeup_ps_; }  // FUTEX_WAKE until the woken thread runs
  // One iteration of a spin-wait loop (`while (READ_ONCE(x)) cpu_relax();`): a PAUSE and a look at the line in L1.
  vt::vtime spin_step() const { return op(Op::pause) + op(Op::line_access); }

  // ---- what the calling virtual CPU does (call on the simulator's fibers) ----
  // Its clock.
  vt::vtime now() const { return sim().now(); }
  // A hardware event that does not run on the host (a line transfer, a lock word's RMW in a virtual lock, a wake-up):
  // charged with both kinds of costs.
  void pay(vt::vtime ps) { sim().advance(ps); }
  // A sync point: with measured costs, charges the host time since the last one first.
  void sync() {
    if (costs_ == Costs::measured) [[unlikely]]
      return sync_measured();
    sim().sync();
  }
  // Model work of `n` operations `o`: charged with table costs, already in the host time with measured ones.
  void charge(Op o, uint64_t n) {
    if (costs_ == Costs::table) sim().advance(op_ps_[size_t(o)] * n);
  }
  // An access to one tracked cache line (a sync point): pays for the line where the coherence state says it is.
  void touch(const void* line, bool write);
  // Accesses to `n` tracked lines at `first`, `first + stride`, ... whose addresses do not depend on each other's
  // data (an array's elements, not a list or tree walk): one sync point. They overlap as an out-of-order core
  // overlaps them: the lines go out in groups of the profile's misses_in_flight.core (the core's L1D miss buffers;
  // 1 when the profile has none: no overlap), in order, and each group costs its slowest access, line_access plus
  // its line's transfer. The issue slots of the others are not charged (the model charges latencies, not
  // instruction throughput: real lock_zoo adds 0.25 ns per extra cached line). With n == 1 it charges what touch()
  // does.
  void touch_each(const void* first, size_t n, size_t stride, bool write);
  // The same for lines anywhere (`lines`, in program order): accesses whose addresses the core has without waiting
  // for each other's data (the nodes of a tree path it already walked, written back up).
  void touch_each(std::span<const void* const> lines, bool write);
  // Memory the host's heap just gave model code (a fresh slab object): the lines overlapping [p, p + bytes) start
  // untracked, whatever an object freed at the same address left (the heap's reuse of addresses differs from run to
  // run). Give it only lines the object owns alone (line-aligned memory, or the one line it is tracked by), or a
  // live neighbour's state is lost. Charges nothing and is no sync point.
  void forget(const void* p, uint64_t bytes);
  // [p, p + bytes) is memory of node `node` (NodeMemory registers itself): where a line of it that left the caches
  // comes back from. Call before the run's CPUs touch it (set-up, on the controlling thread); a later range replaces
  // the ranges it overlaps.
  void home(const void* p, uint64_t bytes, int node);
  // A pass in pattern `s` over `n` lines of node `node`'s memory whose addresses do not depend on each other's data
  // (a memmap walk), moving `bytes` as likwid-bench counts them (a sync point). The bytes stream at the core's
  // bandwidth for that pattern or the node's share of its own, whichever is lower, the node being shared by the bulk
  // work running on it at that time; a profile without a pattern's own figures (bandwidth_gbs.core_update,
  // node_update, core_load, node_load, core_store, node_store) streams it at the copy figures. The core's work on the
  // lines, n x line_access, overlaps the stream (an out-of-order core keeps issuing the next lines' accesses while the
  // prefetched ones arrive): the pass costs the slower of the two, the roofline bound (Williams, Waterman, Patterson,
  // "Roofline", CACM 52(4), 2009), never their sum. The n lines go into the calling CPU's LLC.
  void pass(uint64_t n, uint64_t bytes, int node, Stream s) {
    fill(self(), n);
    stream(bytes, node, vt::vtime(n) * op_ps_[size_t(Op::line_access)], s);
  }
  // `op` on `n` 4 KiB pages written from frame `to` (a copy reads them from frame `from`) (a sync point): the bulk
  // transfer of their bytes (read and written: 2 x 4 KiB a page; a clear is a store stream, a copy a copy stream) on
  // the written node, but never faster than one core does the op page by page: page_ns.<op> for a page that follows
  // nothing (cold scattered pages, latency-bound: no prefetcher runs from one page into the next), and
  // page_ns.<op>_ascending for a page that follows the one before. When the frames are given, the n pages are
  // contiguous, those after the first follow it, and the first follows the calling CPU's previous page op when every
  // run it touches (the written one; a copy's read one too) starts where that op's ended. A page without its frame
  // follows nothing. How much following saves is the host's own: on this project's AMD host clear_page takes 137 ns
  // a page in ascending order against 430 in random order (copy_page 380 and 630), near the bandwidth bound; on its
  // Intel host 500 against 510 (copy_page 640 and 750), well above it. A figure the profile lacks is 0: the bulk
  // transfer alone bounds those pages. The pages' lines (a copy's read ones too) go into the calling CPU's LLC.
  void pages(PageOp op, uint64_t n, PageFrame to, PageFrame from = {});
  // Host time: the measured-costs mark of the calling CPU restarts (after it blocked or yielded).
  void restart_host_clock();

  // A sync point that lasts a scope: on entry it charges the model work before it (sync()); on leaving, the
  // measured-costs mark restarts, so that the simulator's own work in the scope (coherence look-ups, a virtual
  // lock's queue and lock_stat, a hand-off) is never charged as model work. Every entry point that does such work
  // holds one. Construct on a virtual CPU only.
  class SyncPoint {
   public:
    explicit SyncPoint(CostModel& m) : m_(m), cpu_(m.self()) { m_.sync(); }
    ~SyncPoint() { m_.restart(cpu_); }
    SyncPoint(const SyncPoint&) = delete;
    SyncPoint& operator=(const SyncPoint&) = delete;

   private:
    CostModel& m_;
    int cpu_;
  };

 private:
  using PerPrivateLevel = std::array<uint64_t, kNrPrivateCacheLevels>;  // one count per kPrivateCacheLevels entry
  struct LineState {
    uint64_t key = 0;                 // line address >> 6, plus one (0: empty slot)
    uint64_t stamp = 0;               // fills_ of the LLC of `last` when `last` used it
    PerPrivateLevel private_stamp{};  // private_fills_ of `last` (L1D, L2) when `last` used it
    int16_t owner = -1;               // last writer (virtual CPU), -1 never written
    int16_t last = -1;                // the CPU that used it last, -1 none yet (capacity only)
    int8_t home = -1;                 // the node of its memory, -1 not node memory
    uint8_t nreaders = 0;             // CPUs in readers[] (read since the last write)
    bool many_readers = false;        // more read it than readers[] holds
    std::array<int16_t, 3> readers{};
  };
  // The state of the line at `p`, a new one (untouched, with its home) the first time.
  LineState& line(const void* p);
  // The slot of `key` in lines_, or the empty slot where it goes.
  LineState& slot(uint64_t key);
  // The wait of an access by CPU `c` to line `l`: the line's trip from memory when it has left the caches (capacity),
  // then the transfer it waits for (0 when its cache has the line as needed), and the state after it.
  vt::vtime access(LineState& l, int c, bool write);
  // The coherence part: a write takes the line from its owner and invalidates every copy (the invalidations go out
  // in parallel, so the farthest copy sets the time); a read is served by the nearest copy.
  vt::vtime coherence(LineState& l, int c, bool write);
  // `lines` lines taken in by the caches of CPU `c` (a pass, a page op).
  void fill(int c, uint64_t lines) {
    if (!llc_lines_) return;
    fills_[size_t(llc_of_cpu_[size_t(c)])] += lines;
    if (private_lines_[0])
      for (uint64_t& f : private_fills_[size_t(c)]) f += lines;
  }
  // Where CPU `c`, the last to use line `l`, finds it while the LLC still has it: the index in kPrivateCacheLevels of
  // the level that still holds it (0 its L1D, also when no private level is modelled; 1 its L2), or past them, the LLC.
  int private_level(const LineState& l, int c) const;
  // touch_each() of the n lines line_of(0), ..., line_of(n - 1).
  template <class LineOf>
  void touch_group(size_t n, LineOf line_of, bool write);
  // The calling virtual CPU; std::logic_error outside the run's CPUs.
  int self() const {
    const int c = vt::current_cpu();
    if (unsigned(c) >= unsigned(nr_cpus())) [[unlikely]]
      outside_run();
    return c;
  }
  // The simulator running the calling fiber; std::logic_error outside a run (its own calls check the fiber).
  static vt::Simulator& sim() {
    vt::Simulator* const s = vt::Simulator::current();
    if (!s) [[unlikely]]
      outside_run();
    return *s;
  }
  [[noreturn]] static void outside_run();
  void restart(int cpu) noexcept {
    if (costs_ == Costs::measured) [[unlikely]]
      host_mark_[size_t(cpu)] = host_ticks();
  }
  void sync_measured();
  void stream(uint64_t bytes, int node, vt::vtime at_least, Stream s);

  std::shared_ptr<const MachineProfile> profile_;
  Costs costs_;
  std::vector<int> pu_of_cpu_, node_of_cpu_;
  std::array<vt::vtime, kNrOps> op_ps_{};
  std::vector<vt::vtime> transfer_ps_;  // [a * n + b] over the virtual CPUs
  vt::vtime wakeup_ps_ = 0;
  size_t misses_in_flight_ = 1;  // misses_in_flight.core rounded down (at least 1); 1 without it
  // Per Stream: bandwidth_gbs.core and node, or their _update, _load, _store figures.
  std::array<double, kStreamNames.names.size()> core_gbs_{}, node_gbs_{};
  struct PageCost {
    vt::vtime cold = 0;       // page_ns.<op>: a page that follows nothing
    vt::vtime ascending = 0;  // page_ns.<op>_ascending: a page that follows the one before
  };
  std::array<PageCost, 2> page_ps_{};                 // per PageOp; 0 where the profile has no such figure
  std::vector<std::array<PageFrame, 2>> next_frame_;  // per CPU: the frames just above its last page op's (to, from)
  double host_to_profile_ = 1;                        // measured costs: host ns x this = profile ns
  std::vector<uint64_t> host_mark_;                   // measured costs: host ticks at each CPU's last sync
  std::vector<std::vector<vt::vtime>> bulk_ends_;     // per node: when the bulk work running on it ends
  std::vector<LineState> lines_;                      // open addressing, power-of-two size
  size_t nr_lines_ = 0;
  // Capacity (table costs and cache_mib.llc; llc_lines_ 0 otherwise).
  uint64_t llc_lines_ = 0;                      // one LLC's lines
  std::vector<int> llc_of_cpu_;                 // per virtual CPU: its LLC
  std::vector<uint64_t> fills_;                 // per LLC: the lines it has taken in
  vt::vtime dram_local_ = 0, dram_remote_ = 0;  // dram_ns.local, and .remote (local where it has none)
  vt::vtime streamed_ = 0;                      // a prefetched line: 64 bytes at bandwidth_gbs.core_load
  std::vector<uint64_t> last_miss_;             // per virtual CPU: the key of its last line from DRAM
  // The private levels (capacity and cache_kib.l1d, .l2): per level [L1D, L2], its lines (0: not modelled) and what
  // a line that has left it costs beyond line_access (cache_ns.l2, cache_ns.llc); per CPU, the lines each took in.
  PerPrivateLevel private_lines_{};
  std::array<vt::vtime, kNrPrivateCacheLevels> private_miss_ps_{};
  std::vector<PerPrivateLevel> private_fills_;
  std::map<uintptr_t, std::pair<uintptr_t, int>> homes_;  // first byte -> (end, node) of node memory
};

namespace detail {
// The cost model of the virtual run this thread drives, checked by every tracked access (ALLOCLAB_TLS, so that the
// checks cost real-clock runs nothing).
ALLOCLAB_TLS extern constinit thread_local CostModel* tls_costs;
}  // namespace detail
// The cost model of the virtual-clock run on this thread (nullptr in a real-clock run), set by CostScope.
inline CostModel* current_costs() noexcept { return detail::tls_costs; }
class CostScope {
 public:
  explicit CostScope(CostModel* m) noexcept;
  ~CostScope();
  CostScope(const CostScope&) = delete;
  CostScope& operator=(const CostScope&) = delete;

 private:
  CostModel* previous_;
};

// What model code calls: nothing at all in a real-clock run, nor on the controlling thread of a virtual one (set-up
// and checks are untimed).
namespace vcost {
inline CostModel* active() {
  CostModel* m = current_costs();
  return m && vt::current_cpu() >= 0 ? m : nullptr;
}
inline void sync() {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->sync();
}
inline void charge(Op o, uint64_t n = 1) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->charge(o, n);
}
inline void touch(const void* line, bool write) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->touch(line, write);
}
// Accesses to every element of `objs`, each on its own lines and independent of the others (CostModel::touch_each).
template <class T>
inline void touch_each(std::span<T> objs, bool write) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->touch_each(objs.data(), objs.size(), sizeof(T), write);
}
// clear_page on `n` 4 KiB pages written from frame `to`, or copy_page from frame `from` (CostModel::pages).
inline void pages(PageOp op, uint64_t n, PageFrame to, PageFrame from = {}) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->pages(op, n, to, from);
}
inline void forget(const void* p, uint64_t bytes) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) m->forget(p, bytes);
}
// An atomic read-modify-write on a tracked line (a refcount, a flag word, a counter or cursor that orders workers):
// the RMW, and the line where the coherence state says it is, taken for writing.
inline void rmw(const void* line) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) {
      m->charge(Op::atomic_rmw, 1);
      m->touch(line, true);
    }
}
// One level of a tree walk (rbtree, radix tree, xarray, the shmem swap vector): the step, and a read of the node.
inline void visit(const void* node) {
  if (current_costs()) [[unlikely]]
    if (CostModel* m = active()) {
      m->charge(Op::tree_step, 1);
      m->touch(node, false);
    }
}
}  // namespace vcost

}  // namespace alloclab
