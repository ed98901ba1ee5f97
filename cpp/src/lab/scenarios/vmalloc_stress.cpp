// vmalloc_stress: the lock-once experiment of "mm/vmalloc: lock contention optimization under multi-threading"
// (rulinhuang, v1-v8, merged as aaab830ad887 "mm/vmalloc: Eliminated the lock contention from twice to once").
//
// Models Linux v6.7 (vmap_nodes=1: one busy tree under vmap_area_lock, no pools) and v6.9+ (vmap_nodes=N: N busy
// trees under vn->busy.lock hashed by addr_to_node() every 16 pages, per-node size-class pools under
// vn->pool_lock); the free tree, lazy free and purge are the kernel's (see cpp/include/alloclab/vmalloc/).
// Each of `threads` workers (one per CPU) performs `ops` operations. An operation is one iteration of a workload:
//   stress_ng_pthread  the seed's operation (the study's default): a thread created by stress-ng's pthread
//                      stressor (stress-pthread.c: each instance creates pthread_max = DEFAULT_PTHREAD = 1024 threads,
//                      then lets them exit and joins them, oldest first). Its kernel stack comes from
//                      alloc_thread_stack_node() (kernel/fork.c, CONFIG_VMAP_STACK): this_cpu_xchg() of the
//                      NR_CACHED_STACKS = 2 slots of the CPU's cached_stacks[] first (a hit clears the THREAD_SIZE
//                      stack: memset), else __vmalloc_node_range(THREAD_SIZE = 16 KiB, THREAD_ALIGN = 16 KiB,
//                      THREADINFO_GFP = GFP_KERNEL_ACCOUNT | __GFP_ZERO): __get_vm_area_node() (alloc_vmap_area()
//                      under the busy lock(s)), __vmalloc_area_node() (4 zeroed pages, bulk) and
//                      vmap_pages_range() (map_ns_per_page each), then find_vm_area(stack) (v6.7 kernel/fork.c:
//                      the vm_struct kept in tsk->stack_vm_area, looked up by find_vmap_area() under the busy
//                      lock: one more acquisition per fresh stack); then clone_ns for the rest of the thread's life
//                      (copy_process, wake-up, run, exit, join: a stated figure, see the parameter). When the
//                      stressor joins a thread, free_thread_stack() puts the stack back into an empty slot of the
//                      CPU's cache (this_cpu_try_cmpxchg), else vfree()s it (v6.7: thread_stack_delayed_free() ->
//                      call_rcu -> vfree; here at once). Pages are always allocated and mapped (map_pages is
//                      implied); stacks are created and released on the worker's own CPU.
//   thread_stack       the scenario's default, the bare get_vm_area + vfree loop: __get_vm_area_node(size,
//                      align) and its vfree, no pages unless map_pages (default 16 KiB + the guard page at
//                      THREAD_ALIGN = 16 KiB)
//   fix_size           vmalloc(size)                                     (lib/test_vmalloc.c fix_size_alloc_test)
//   fix_align          __vmalloc_node(5 pages, THREAD_ALIGN << 1)         (fix_align_alloc_test)
//   random_size        vmalloc(1..100 pages)                              (random_size_alloc_test)
//   random_size_align  ((rnd % 10) + 1) pages at 1 << (rnd % 23)          (random_size_align_alloc_test)
//   long_busy_list     vmalloc(100 pages) + vmalloc(1 page) with 15000 one-page areas held per worker
//                      (long_busy_list_alloc_test; the 15000 are allocated in prepare, untimed)
//   full_fit           vmalloc(1 page) in a space fragmented into one-page holes, lazy_max_pages() of them per
//                      worker (full_fit_alloc_test; the fragmentation is made in prepare, untimed)
// and (every pattern but stress_ng_pthread and test_vmalloc) the freeing of what it allocated: a worker holds at
// most `live` areas; after an operation's allocations it frees its oldest areas until it holds live - 1 (live=1:
// allocate, then free). `think_ns` of work outside the locks follows each operation's allocations, in these patterns.
//   test_vmalloc       lib/test_vmalloc.c as the module runs it (test_vmalloc.sh; module parameters of the same
//                      names): each of nr_threads workers (test_func()) runs the tests run_test_mask selects, in
//                      test_case_array[] order with sequential_test_order, else in the order shuffle_array() draws
//                      per worker, each test_repeat_count times; a call of a test is the kernel's function whole:
//                      its set-up (long_busy_list: the 15000 one-page areas; full_fit: fls(num_online_cpus()) x
//                      32 MiB / PAGE_SIZE pairs, the junk half freed), its test_loop_count loops (an area allocated
//                      and freed at once) and its teardown, all timed, on the worker, and counted by lock_stat;
//                      vmalloc() always maps pages (map_pages implied; __GFP_ZERO where the test passes it). One
//                      operation is one loop. The summary's kernel_summary holds the module's pr_info lines,
//                      "Summary: <test> passed: P failed: F repeat: R loops: L avg: A usec" per worker and selected
//                      test, A = the test's time over its repeats / test_repeat_count in whole microseconds of the
//                      run's clock (real or virtual), as do_concurrent_test() prints them. Modelled: bits 0..6
//                      (fix_size .. align_shift_alloc_test); pcpu_alloc_test (mm/percpu.c), the two
//                      kvfree_rcu_*_vmalloc_test (RCU grace periods, kfree_rcu's batching) and vm_map_ram_test
//                      (the per-CPU vmap_block allocator) need what the model does not have: selecting them is a
//                      ValueError that says so. Leaves out: use_huge (huge mappings), the write of the first byte,
//                      the "All test took worker%d=%lu cycles" line (a model CPU has no cycle counter).
// With map_pages=True each allocation is a whole vmalloc(): __vmalloc_area_node() takes the area's pages from the
// page allocator on the worker's node (alloc_pages_bulk in batches of 100, then single pages, as
// vm_area_alloc_pages()) and charges map_ns_per_page for vmap_pages_range(); vfree() charges the same per page
// for the unmap and gives every page back (__free_page). zone->lock / pcp->lock then appear in lock_stat too; a
// page shortage frees the area and counts in page_alloc_failures.
//
// Busy-lock acquisitions (class vmap_area_lock when vmap_nodes=1, vn->busy.lock otherwise), exactly:
//   allocation path   k per successful allocation: insert_vmap_area() in alloc_vmap_area(), plus, with
//                     busy_lock="twice" (before the patch), setup_vmalloc_vm() in __get_vm_area_node();
//                     k = 2 (twice) or 1 (once); 0 for a failed allocation (nothing is inserted)
//   lookup            stress_ng_pthread: 1 per fresh stack, fork.c's find_vm_area() (find_vmap_area(); the area
//                     starts at the address, so it is on the first node looked at): f = 1 per allocation whose pages
//                     were mapped, f = 0 in the other patterns
//   free path         1 per vfree(): find_unlink_vmap_area() (the area is on addr_to_node(va_start), found on the
//                     first node it looks at)
//   purge             0
//   lock_stat acquisitions of the class = k * allocs + lookups + frees
//                                                                 (allocs: __get_vm_area_node() calls that succeeded
//                                                                  -- a stack taken from cached_stacks[] is none;
//                                                                  lookups: f x (allocs - page_alloc_failures);
//                                                                  frees: the vfree()s of the timed run -- a stack
//                                                                  put back into the cache is none)
//   summary busy_lock_per_alloc = allocation-path acquisitions / allocs = k
//   test_vmalloc      every area a test allocates is freed in the same call, so allocs = frees = the sum over the
//                     tests of what each allocated; a call of a test that passed allocates exactly (L =
//                     test_loop_count, J = fls(num_online_cpus()) x 8192): fix_size, random_size, fix_align,
//                     random_size_align L; full_fit 2 + 2J + L (its two pointer arrays, the J pairs, the loops);
//                     long_busy_list 1 + 15000 + 2L; align_shift the 64 alignments 1 << 0..63 up to the first
//                     that finds no space (that call fails: "This test case is supposed to be failed"). finish()
//                     checks each worker's tallies against these, and the busy-lock expectation is declared per
//                     test: (k + 1) x the sum of the tests' allocations.
// Lazy lock (purge_vmap_area_lock when vmap_nodes=1, vn->lazy.lock otherwise), exactly: 1 per vfree()
// (free_vmap_area_noflush) + 1 per lazy-tree detach in a purge (v6.7: one per vmap_purge_lock section).
// The areas still held at the end and those made in prepare are freed by finish() on one thread, untimed and
// outside lock_stat like prepare's allocations (freed_at_teardown): a stopped run of 1024 oversubscribed workers
// then ends at once instead of queueing millions of frees behind each other.
// finish() checks that formula against the model's own per-site counters and, with lockstat on, against
// lock_stat's independent counts of every vmalloc lock class; then that no area overlaps, that free + busy +
// lazy + pooled areas tile [VMALLOC_START, VMALLOC_END) exactly, and, after a final purge with a full pool decay,
// that the whole range is one free area again (all space returned). A violation is a model bug (logic_error).
// An allocation that finds no space even after a purge is a failure the summary reports (alloc_failures),
// never a crash.
// Page allocator (map_pages, stress_ng_pthread): the rules of the kernel the seed measured (v6.7; the vmap_node
// code of vmap_nodes != 1 is the seed's v4/v5 base, mm-unstable before v6.8, with the same rules):
//   pcp batch/high   BatchRule::v6_7: mm/page_alloc.c nr_pcp_alloc() (order-0 refills of base_batch <<
//                    alloc_factor, CONFIG_PCP_BATCH_SCALE_MAX) and nr_pcp_high() / nr_pcp_free() (pcp->high
//                    between high_min and high_max), Huang Ying's pcp auto-tuning, merged for v6.7
//   check placement  CheckMode::off: since v6.4 ("mm, page_alloc: reduce page alloc/free sanity checks")
//                    rmqueue_bulk() and free_pcppages_bulk() check nothing, and check_new_pages() /
//                    free_page_is_bad() run only with the check_pages_enabled static key (mm/mm_init.c
//                    mem_debugging_and_hardening_init(): CONFIG_DEBUG_VM, debug_pagealloc, page poisoning,
//                    init_on_alloc/init_on_free), which a default config leaves off
// Leaves out: the rest of thread creation beyond its stated clone_ns, the scheduler spreading a stressor's
// threads over other CPUs (their stacks are released, and cached, on the creating CPU), RCU-deferred stack
// frees, memcg charging of the stack, KASAN, page tables (vmap_pages_range is a calibrated cost, not a walk),
// huge mappings; __GFP_ZERO and the cached-stack memset are virtual-time bulk writes only (no backing memory).
#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <memory_resource>
#include <numeric>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/vmalloc/vmalloc.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace alloclab::vmalloc;

constexpr int64_t kMaxBytes = int64_t(1) << 30;
constexpr int kDefaultThreads = 2;
constexpr int kLongBusyListAreas = 15000;

constexpr unsigned long THREAD_SIZE = 16384;  // x86-64: PAGE_SIZE << THREAD_SIZE_ORDER (KASAN off)
constexpr int NR_CACHED_STACKS = 2;           // kernel/fork.c

// lib/test_vmalloc.c's test_case_array[], in its order: run_test_mask bit i selects entry i.
enum class KTest {
  fix_size,
  full_fit,
  long_busy_list,
  random_size,
  fix_align,
  random_size_align,
  align_shift,
  pcpu_alloc,
  kvfree_rcu_1_arg,
  kvfree_rcu_2_arg,
  vm_map_ram
};
struct KTestDesc {
  std::string_view name;
  std::string_view missing;  // why the model cannot run it; empty: modelled
};
constexpr std::array<KTestDesc, 11> kTestCaseArray{{
    {"fix_size_alloc_test", ""},
    {"full_fit_alloc_test", ""},
    {"long_busy_list_alloc_test", ""},
    {"random_size_alloc_test", ""},
    {"fix_align_alloc_test", ""},
    {"random_size_align_alloc_test", ""},
    {"align_shift_alloc_test", ""},
    {"pcpu_alloc_test", "it allocates through mm/percpu.c (__alloc_percpu under pcpu_alloc_mutex and pcpu_lock)"},
    {"kvfree_rcu_1_arg_vmalloc_test",
     "it frees through kvfree_rcu_mightsleep(): RCU grace periods and kfree_rcu batching"},
    {"kvfree_rcu_2_arg_vmalloc_test", "it frees through kvfree_rcu(): RCU grace periods and kfree_rcu batching"},
    {"vm_map_ram_test", "it maps through vm_map_ram(): the per-CPU vmap_block allocator (vb_alloc)"},
}};
constexpr int kNrTests = int(kTestCaseArray.size());
constexpr int64_t kModelledTestMask = (1 << 7) - 1;  // fix_size_alloc_test .. align_shift_alloc_test
constexpr int BITS_PER_LONG = 64;

enum class Pattern {
  stress_ng_pthread,
  thread_stack,
  fix_size,
  fix_align,
  random_size,
  random_size_align,
  long_busy_list,
  full_fit,
  test_vmalloc
};

constexpr EnumNames<Pattern, 9> kPatternNames{{{{Pattern::stress_ng_pthread, "stress_ng_pthread"},
                                                {Pattern::thread_stack, "thread_stack"},
                                                {Pattern::fix_size, "fix_size"},
                                                {Pattern::fix_align, "fix_align"},
                                                {Pattern::random_size, "random_size"},
                                                {Pattern::random_size_align, "random_size_align"},
                                                {Pattern::long_busy_list, "long_busy_list"},
                                                {Pattern::full_fit, "full_fit"},
                                                {Pattern::test_vmalloc, "test_vmalloc"}}}};

// The test whose loop body a per-operation pattern repeats.
constexpr KTest loop_test_of(Pattern p) {
  switch (p) {
    case Pattern::fix_size: return KTest::fix_size;
    case Pattern::fix_align: return KTest::fix_align;
    case Pattern::random_size: return KTest::random_size;
    case Pattern::random_size_align: return KTest::random_size_align;
    case Pattern::long_busy_list: return KTest::long_busy_list;
    default: return KTest::full_fit;
  }
}

// One worker's figures of one test, as test_func() keeps them in test_case_data (+ the model's tallies).
struct TestCaseData {
  int64_t test_passed = 0, test_failed = 0;
  uint64_t time_us = 0;         // its calls' time / test_repeat_count, whole microseconds of the run's clock
  uint64_t allocs = 0;          // areas its calls allocated (each freed in the same call)
  uint64_t setup_failures = 0;  // set-up vmalloc()s that found no space: the kernel does not check them
};

// The areas one worker holds, oldest first: a ring of fixed capacity (live - 1 kept between operations plus
// the at most two allocations of one operation; stress_ng_pthread: pthread_max threads' stacks).
class Held {
 public:
  void init(size_t cap) { vm_.assign(cap, nullptr); }
  size_t size() const { return n_; }
  void push(VmStruct* vm) {
    if (n_ == vm_.size()) throw std::logic_error("vmalloc_stress: held-area ring overflow");
    vm_[(head_ + n_) % vm_.size()] = vm;
    ++n_;
  }
  VmStruct* pop_oldest() {
    VmStruct* vm = vm_[head_];
    head_ = (head_ + 1) % vm_.size();
    --n_;
    return vm;
  }

 private:
  std::vector<VmStruct*> vm_;
  size_t head_ = 0, n_ = 0;
};

struct alignas(64) WorkerState {
  Held held;
  std::array<VmStruct*, NR_CACHED_STACKS> cached_stacks{};  // kernel/fork.c: this CPU's cached_stacks[]
  uint64_t stack_cache_hits = 0, stack_cache_puts = 0;
  std::vector<unsigned long> prepopulated;     // long_busy_list / full_fit: areas made in prepare (test_vmalloc: in
                                               // a call of the test, its pointer arrays first), freed at the end
  std::array<TestCaseData, kNrTests> tests{};  // test_vmalloc
  // map_pages: the pages arrays of this worker's areas (kvmalloc's slab for them). Only this worker allocates and
  // frees its areas, so the pool needs no lock; it goes with the run, without visiting the arrays.
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> page_arrays =
      std::make_unique<std::pmr::unsynchronized_pool_resource>();
};

class VmallocStress final : public Scenario {
 public:
  explicit VmallocStress(const Params& p)
      : threads_(int(p.i("threads"))),
        ops_(uint64_t(p.i("ops"))),
        pattern_(kPatternNames.parse(p.s("pattern"), "pattern")),
        size_(uint64_t(p.i("size"))),
        align_(uint64_t(p.i("align"))),
        once_(p.s("busy_lock") == "once"),
        vmap_nodes_(int(p.i("vmap_nodes"))),
        pools_(p.b("pools")),
        live_(size_t(p.i("live"))),
        lazy_max_pages_(uint64_t(p.i("lazy_max_pages"))),
        tlb_flush_ns_(uint64_t(p.i("tlb_flush_ns"))),
        bounce_ns_(uint64_t(p.i("bounce_ns"))),
        think_ns_(uint64_t(p.i("think_ns"))),
        vmalloc_size_(uint64_t(p.i("vmalloc_size"))),
        map_pages_(p.b("map_pages") || pattern_ == Pattern::stress_ng_pthread || pattern_ == Pattern::test_vmalloc),
        pthread_max_(size_t(p.i("pthread_max"))),
        clone_ns_(uint64_t(p.i("clone_ns"))),
        node_pages_(uint64_t(p.i("node_pages"))),
        map_ns_per_page_(uint64_t(p.i("map_ns_per_page"))),
        test_loop_count_(uint64_t(p.i("test_loop_count"))),
        test_repeat_count_(uint64_t(p.i("test_repeat_count"))),
        run_test_mask_(p.i("run_test_mask")),
        sequential_test_order_(p.b("sequential_test_order")) {
    if (const int nr_threads = int(p.i("nr_threads"))) {
      if (threads_ != kDefaultThreads && threads_ != nr_threads)
        throw std::invalid_argument("nr_threads: " + std::to_string(nr_threads) + " and threads " +
                                    std::to_string(threads_) +
                                    " disagree (allowed: one of them, or both the same; nr_threads=0 takes threads)");
      threads_ = nr_threads;
    }
    check_run_test_mask();
    if (!is_power_of_2(align_))
      throw std::invalid_argument("align: " + std::to_string(align_) +
                                  " is not a power of two (allowed: a power of two in 1..1073741824)");
    if (vmalloc_size_ % PAGE_SIZE)
      throw std::invalid_argument("vmalloc_size: " + std::to_string(vmalloc_size_) +
                                  " is not a multiple of PAGE_SIZE (4096)");
    if (pattern_ == Pattern::stress_ng_pthread) {
      size_ = THREAD_SIZE;
      align_ = THREAD_SIZE;  // THREAD_ALIGN
    }
    if (pattern_ == Pattern::test_vmalloc) {  // fix_size_alloc_test: (nr_pages > 0 ? nr_pages : 1) * PAGE_SIZE
      size_ = uint64_t(std::max<int64_t>(p.i("nr_pages"), 1)) * PAGE_SIZE;
      align_ = 1;
    }
    if (map_pages_ && node_pages_ % 512)
      throw std::invalid_argument("node_pages: " + std::to_string(node_pages_) +
                                  " is not a multiple of pageblock_nr_pages (512)");
    if (PAGE_ALIGN(size_) + PAGE_SIZE > vmalloc_size_)
      throw std::invalid_argument((pattern_ == Pattern::test_vmalloc ? "nr_pages: " : "size: ") +
                                  std::to_string(size_) + " bytes plus the guard page exceed vmalloc_size " +
                                  std::to_string(vmalloc_size_));
  }

  int nr_workers() const override { return threads_; }

  // The areas at their most: every worker's live ones and its set-up areas (busy, each with its vm_struct and, with
  // map_pages, its pages array), as many free-tree fragments between them, and the lazily freed ones waiting for a
  // purge (at least two pages each, up to lazy_max_pages) with as many again in the pools; every context's first
  // slabs; the held rings; and the page allocator of map_pages.
  MemoryNeed memory_needed(const Machine& m) const override {
    const VmallocConfig cfg = vmalloc_config(m);
    const uint64_t T = uint64_t(threads_), lazy_max = VmallocSpace::lazy_max_pages_of(cfg);
    const Peak peak = worker_peak(m);
    const uint64_t busy = T * peak.areas;
    const uint64_t ops = pattern_ == Pattern::test_vmalloc ? test_loop_count_ : ops_;
    const uint64_t lazy = std::min(T * ops * 2, lazy_max / 2 + T);
    const uint64_t areas = 2 * busy + 2 * lazy;
    const uint64_t slabs =
        uint64_t(cfg.nr_contexts) * KmemCache<VmapArea>::kSlabObjects * (sizeof(VmapArea) + sizeof(VmStruct));
    const uint64_t pages_arrays = map_pages_ ? T * peak.pages * sizeof(mm::Page*) : 0;
    const uint64_t rings = busy * sizeof(VmStruct*);
    const uint64_t vmap = areas * sizeof(VmapArea) + busy * sizeof(VmStruct) + slabs + pages_arrays + rings;
    const uint64_t pages =
        map_pages_ ? mm::MemorySystem::bytes_needed(mm::MemoryConfig::uniform(m, node_pages(m)), m.model().nr_pus())
                   : 0;
    return {vmap + pages, "up to " + std::to_string(areas) + " vmap areas " + format_bytes(vmap) +
                              (map_pages_ ? " + page allocator " + format_bytes(pages) : "")};
  }

  void prepare(const RunEnv& env) override {
    think_ticks_ = ns_to_ticks(think_ns_);  // in the run's clock
    clone_ticks_ = ns_to_ticks(clone_ns_);
    map_ticks_per_page_ = ns_to_ticks(map_ns_per_page_);
    nr_cpus_ = env.machine.model().nr_pus();
    const VmallocConfig cfg = vmalloc_config(env.machine);
    if (map_pages_) {
      mm::MemoryConfig mc = mm::MemoryConfig::uniform(env.machine, node_pages(env.machine));
      mc.batch_rule = mm::BatchRule::v6_7;  // the seed's v6.7 (see the header)
      mc.check = mm::CheckMode::off;        // v6.4+: no check_new_pages without check_pages_enabled
      ms_ = std::make_unique<mm::MemorySystem>(env.machine, env.locks, std::move(mc), env.interruption_points());
    }
    space_ = std::make_unique<VmallocSpace>(env.locks, cfg);
    for (const Slot& s : env.slots) space_->cpu(s.worker).cpu = s.model_pu;
    space_->cpu(threads_).cpu = 0;

    workers_ = std::vector<WorkerState>(size_t(threads_));
    page_failures_.assign(size_t(threads_), Counter{});
    held_from_prepare_ = 0;
    for (const Slot& s : env.slots) {
      WorkerState& ws = workers_[size_t(s.worker)];
      ws.held.init(held_capacity());
      VmapCpu& c = space_->cpu(s.worker);  // as if on the worker's CPU: the areas go to its node's pools
      if (pattern_ == Pattern::long_busy_list) {
        for (int i = 0; i < kLongBusyListAreas; ++i) {
          env.interruption_point();
          ws.prepopulated.push_back(must_alloc(s, c, PAGE_SIZE));
        }
      } else if (pattern_ == Pattern::full_fit) {
        // junk_length = fls(num_online_cpus()) * 32 MiB / PAGE_SIZE pairs; the junk half is freed.
        const unsigned long junk_length = space_->lazy_max_pages();
        std::vector<unsigned long> junk;
        for (unsigned long i = 0; i < junk_length; ++i) {
          env.interruption_point();
          ws.prepopulated.push_back(must_alloc(s, c, PAGE_SIZE));
          junk.push_back(must_alloc(s, c, PAGE_SIZE));
        }
        for (unsigned long a : junk) free_one(s, c, a);
      }
      held_from_prepare_ += ws.prepopulated.size();
    }
    // What prepare did is set-up: lock_stat does not count it (controlling thread), nor do the event counters.
    space_->reset_stats();
    page_failures_.assign(size_t(threads_), Counter{});
  }

  void work(WorkerCtx& ctx) override {
    const int w = ctx.slot.worker;
    VmapCpu& c = space_->cpu(w);
    WorkerState& ws = workers_[size_t(w)];
    if (pattern_ == Pattern::test_vmalloc)
      test_func(ctx, c, ws);
    else
      for (uint64_t i = 0; i < ops_ && !ctx.stopped(); ++i) {
        switch (pattern_) {
          case Pattern::stress_ng_pthread: create_thread(ctx, c, ws); break;
          case Pattern::thread_stack: alloc_one(ctx, c, ws, size_, align_, false); break;
          default: test_loop(ctx, c, ws, loop_test_of(pattern_), i); break;
        }
        spin_for_ticks(think_ticks_);
        if (pattern_ == Pattern::stress_ng_pthread) {
          if (ws.held.size() == pthread_max_)  // the reap: every thread exits and is joined, oldest first
            while (ws.held.size()) free_thread_stack(ctx.slot, c, ws, ws.held.pop_oldest());
        } else {
          while (ws.held.size() >= live_) free_one(ctx.slot, c, ws.held.pop_oldest()->addr);
        }
        ctx.add_ops();
      }
    ctx.end_timed();
    emit_counters(c.st, ctx);
  }

  // The busy lock k times per allocation (k = 2 before the patch, 1 after) and once per free (test_vmalloc: per
  // test, from the tests' own tallies: each area is freed in the call that allocated it); the other vmalloc locks as
  // often as their sites ran (see vmalloc.hpp).
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult&) const override {
    const VmallocStats st = space_->stats();
    const uint64_t k = once_ ? 1 : 2;
    const auto n = [](uint64_t v) { return std::to_string(v); };
    const uint64_t lookups = expected_lookups(st);
    LockExpectation busy{"busy_lock", std::string(space_->busy_lock_class()), k * st.allocs + lookups + st.frees,
                         "k x allocations + find_vm_area() lookups + frees = " + n(k) + " x " + n(st.allocs) + " + " +
                             n(lookups) + " + " + n(st.frees) + " = " + n(k * st.allocs + lookups + st.frees)};
    if (pattern_ == Pattern::test_vmalloc) {
      uint64_t total = 0;
      std::string terms;
      for (int t = 0; t < kNrTests; ++t) {
        if (!(run_test_mask_ >> t & 1)) continue;
        uint64_t a = 0;
        for (const WorkerState& ws : workers_) a += ws.tests[size_t(t)].allocs;
        total += a;
        terms += (terms.empty() ? "" : " + ") + std::string(kTestCaseArray[size_t(t)].name) + " " + n(a);
      }
      busy.expected = (k + 1) * total;
      busy.formula = "(k + 1) x the tests' allocations, each freed in its call = (" + n(k) + " + 1) x (" + terms +
                     ") = " + n(*busy.expected);
    }
    std::vector<LockExpectation> e = {
        busy,
        {"free_lock", "free_vmap_area_lock", st.free_lock_alloc + st.free_lock_purge,
         "allocations that missed the pools + purge and decay sections = " + n(st.free_lock_alloc) + " + " +
             n(st.free_lock_purge)},
        {"pool_lock", "vn->pool_lock", st.pool_lock, "every pool site = " + n(st.pool_lock)},
        {"purge_lock", "vmap_purge_lock", st.purge_lock, "one per purge = " + n(st.purge_lock)},
        {"lazy_lock", std::string(space_->lazy_lock_class()), st.frees + st.lazy_lock_purge,
         "frees (free_vmap_area_noflush) + lazy-tree detaches in purges (" +
             std::string(space_->v67_shape() ? "one per vmap_purge_lock section" : "one per node with lazy areas") +
             ") = " + n(st.frees) + " + " + n(st.lazy_lock_purge) + " = " + n(st.frees + st.lazy_lock_purge)},
    };
    return e;
  }

  void finish(const RunEnv& env, RunResult& r) override;
  void emit_test_vmalloc(NamedValues& s) const;

 private:
  VmallocConfig vmalloc_config(const Machine& m) const {
    const int nr_cpus = m.model().nr_pus();
    VmallocConfig cfg;
    cfg.vstart = VMALLOC_START;
    cfg.vend = VMALLOC_START + vmalloc_size_;
    cfg.nr_vmap_nodes = vmap_nodes_ ? unsigned(vmap_nodes_) : unsigned(std::clamp(nr_cpus, 1, int(MAX_VMAP_NODES)));
    cfg.pools = pools_;
    cfg.busy_lock_once = once_;
    cfg.nr_cpus = unsigned(std::max(nr_cpus, 1));
    cfg.lazy_max_pages = lazy_max_pages_;
    cfg.tlb_flush_ns = tlb_flush_ns_;
    cfg.bounce_ns = bounce_ns_;
    cfg.nr_contexts = threads_ + 1;  // one per worker + the controlling thread (prepare, final purge)
    return cfg;
  }
  // fork.c's find_vm_area() lookups, one per fresh stack whose pages were mapped (stress_ng_pthread); no other
  // pattern looks an area up.
  uint64_t expected_lookups(const VmallocStats& st) const {
    if (pattern_ != Pattern::stress_ng_pthread) return 0;
    uint64_t page_failures = 0;
    for (const auto& f : page_failures_) page_failures += f.n;
    return st.allocs - page_failures;
  }
  // The held ring's capacity: the areas a worker holds at most.
  size_t held_capacity() const {
    return pattern_ == Pattern::stress_ng_pthread ? pthread_max_ + NR_CACHED_STACKS : live_ + 2;
  }
  // The pages of the page allocator per model node: node_pages, or for node_pages=0 every worker's areas at their
  // most on one node (placement may put all workers on one), twice over for the watermarks and the pcp lists, and
  // never fewer than 262144 pages (1 GiB).
  uint64_t node_pages(const Machine& m) const {
    if (node_pages_) return node_pages_;
    const uint64_t per_worker =
        pattern_ == Pattern::test_vmalloc ? worker_peak(m).pages : (held_capacity() + 2) * max_area_pages();
    const uint64_t need = 2 * uint64_t(threads_) * per_worker;
    return std::max<uint64_t>(262144, (need + 511) / 512 * 512);
  }
  // The most areas one worker holds at once (busy, each with a vm_struct), and the most pages they map.
  struct Peak {
    uint64_t areas = 0, pages = 0;
  };
  Peak worker_peak(const Machine& m) const {
    if (pattern_ != Pattern::test_vmalloc) {
      const uint64_t per_worker = pattern_ == Pattern::long_busy_list ? kLongBusyListAreas
                                  : pattern_ == Pattern::full_fit
                                      ? 2 * VmallocSpace::lazy_max_pages_of(vmalloc_config(m))
                                      : 0;
      const uint64_t areas = held_capacity() + per_worker;
      return {areas, areas * max_area_pages()};
    }
    Peak p;
    const auto at_most = [&p](uint64_t areas, uint64_t pages) {
      p.areas = std::max(p.areas, areas);
      p.pages = std::max(p.pages, pages);
    };
    for (int t = 0; t < kNrTests; ++t) {
      if (!(run_test_mask_ >> t & 1)) continue;
      switch (KTest(t)) {
        case KTest::fix_size: at_most(1, PAGE_ALIGN(size_) >> PAGE_SHIFT); break;
        case KTest::full_fit: {
          const uint64_t J = junk_length(m.model().nr_pus());
          at_most(2 + 2 * J + 1, 2 * array_pages(J) + 2 * J + 1);
          break;
        }
        case KTest::long_busy_list:
          at_most(1 + kLongBusyListAreas + 2, array_pages(kLongBusyListAreas) + kLongBusyListAreas + 100 + 1);
          break;
        case KTest::random_size: at_most(1, 100); break;
        case KTest::fix_align: at_most(1, 5); break;
        case KTest::random_size_align: at_most(1, 10); break;
        default: at_most(1, 1); break;  // align_shift_alloc_test (the others are refused)
      }
    }
    return p;
  }
  // full_fit_alloc_test's junk_length: fls(num_online_cpus()) * (32 MiB / PAGE_SIZE).
  static uint64_t junk_length(int nr_cpus) {
    return uint64_t(std::bit_width(unsigned(nr_cpus))) * (32 << 20) / PAGE_SIZE;
  }
  // The pages of a vmalloc'ed array of n pointers (the tests' ptr[] and junk_ptr[]).
  static uint64_t array_pages(uint64_t n) { return PAGE_ALIGN(n * sizeof(void*)) >> PAGE_SHIFT; }
  // The most pages one area of a per-operation pattern maps.
  uint64_t max_area_pages() const {
    switch (pattern_) {
      case Pattern::stress_ng_pthread:
      case Pattern::thread_stack:
      case Pattern::fix_size: return PAGE_ALIGN(size_) >> PAGE_SHIFT;
      case Pattern::fix_align: return 5;
      case Pattern::random_size:
      case Pattern::long_busy_list: return 100;
      case Pattern::random_size_align: return 10;
      case Pattern::full_fit: return 1;
      case Pattern::test_vmalloc: break;  // worker_peak() counts its tests' areas
    }
    return 0;
  }
  // run_test_mask: test_case_array[] bits of tests the model runs. Throws std::invalid_argument naming it otherwise.
  void check_run_test_mask() const {
    std::string allowed = " (allowed: a sum of";
    for (int t = 0; t < kNrTests; ++t)
      if (kTestCaseArray[size_t(t)].missing.empty())
        allowed += (t ? ", " : " ") + std::to_string(1 << t) + " " + std::string(kTestCaseArray[size_t(t)].name);
    allowed += ": 1.." + std::to_string(kModelledTestMask) + ")";
    const std::string head = "run_test_mask: " + std::to_string(run_test_mask_);
    if (run_test_mask_ >> kNrTests)
      throw std::invalid_argument(head + " sets bits beyond lib/test_vmalloc.c's " + std::to_string(kNrTests) +
                                  " tests (the module's default 2147483647 selects all of them)" + allowed);
    for (int t = 0; t < kNrTests; ++t)
      if ((run_test_mask_ >> t & 1) && !kTestCaseArray[size_t(t)].missing.empty())
        throw std::invalid_argument(
            head + " selects " + std::string(kTestCaseArray[size_t(t)].name) + " (" + std::to_string(1 << t) +
            "), which the model cannot run: " + std::string(kTestCaseArray[size_t(t)].missing) + allowed);
  }
  // vmalloc() / __vmalloc_node(size, align, gfp): __get_vm_area_node(), then with map_pages __vmalloc_area_node()
  // (zeroed pages with `zero`, __GFP_ZERO); nullptr when either finds no space (the area is freed again).
  VmStruct* vmalloc_node(const Slot& slot, VmapCpu& c, unsigned long size, unsigned long align, bool zero) {
    VmStruct* vm = space_->get_vm_area(c, size, align);
    if (vm && ms_ && !vmalloc_area_node(slot, c, vm, zero)) return nullptr;
    return vm;
  }
  // A set-up area of prepare(): one page, or an invalid_argument naming what is too small.
  unsigned long must_alloc(const Slot& slot, VmapCpu& c, unsigned long size) {
    VmStruct* vm = space_->get_vm_area(c, size, 1);
    if (!vm)
      throw std::invalid_argument("vmalloc_size: " + std::to_string(vmalloc_size_) +
                                  " bytes are too small for the pattern's set-up areas");
    if (ms_ && !vmalloc_area_node(slot, c, vm, false))
      throw std::invalid_argument("node_pages: " + std::to_string(node_pages_) +
                                  " pages per node are too few for the pattern's set-up areas");
    return vm->addr;
  }
  // A timed allocation, held in ws.held until the operation (or the test's loop) frees it; false if it failed.
  bool alloc_one(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, unsigned long size, unsigned long align, bool zero) {
    const uint64_t t0 = clock_ticks();
    VmStruct* vm = vmalloc_node(ctx.slot, c, size, align, zero);
    ctx.record_latency_ns(uint64_t(ticks_to_ns(clock_ticks() - t0)));
    if (!vm) return false;
    ws.held.push(vm);
    ctx.record_alloc(vm->addr);
    return true;
  }

  // --- lib/test_vmalloc.c ---

  // One iteration (the i-th) of the loop of test t: its allocations (lib/test_vmalloc.c: vmalloc() maps pages
  // without __GFP_ZERO, the __vmalloc_node() tests pass it), held in ws.held; false at the first that failed (the
  // test's return -1 or goto), the rest of the iteration not attempted.
  bool test_loop(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, KTest t, uint64_t i) {
    switch (t) {
      case KTest::fix_size: return alloc_one(ctx, c, ws, size_, 1, false);
      case KTest::full_fit: return alloc_one(ctx, c, ws, PAGE_SIZE, 1, false);
      case KTest::long_busy_list:
        return alloc_one(ctx, c, ws, 100 * PAGE_SIZE, 1, false) && alloc_one(ctx, c, ws, PAGE_SIZE, 1, false);
      case KTest::random_size:  // get_random_u32_inclusive(1, 100) pages
        return alloc_one(ctx, c, ws, (1 + ctx.rng.below(100)) * PAGE_SIZE, 1, false);
      case KTest::fix_align: return alloc_one(ctx, c, ws, 5 * PAGE_SIZE, THREAD_ALIGN << 1, true);
      case KTest::random_size_align: {
        const unsigned rnd = unsigned(ctx.rng.below(256));  // get_random_u8()
        return alloc_one(ctx, c, ws, ((rnd % 10) + 1) * PAGE_SIZE, 1ul << (rnd % 23), true);
      }
      case KTest::align_shift: return alloc_one(ctx, c, ws, PAGE_SIZE, 1ul << i, true);
      default: throw std::logic_error("vmalloc_stress: test_loop of a test the model does not run");
    }
  }
  // The loops of a call of test t (test_loop_count; align_shift_alloc_test: BITS_PER_LONG alignments), each
  // freeing what it allocated (vfree, oldest first); false at the first loop that failed.
  bool test_loops(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, KTest t) {
    const uint64_t loops = t == KTest::align_shift ? uint64_t(BITS_PER_LONG) : test_loop_count_;
    for (uint64_t i = 0; i < loops && !ctx.stopped(); ++i) {
      const bool ok = test_loop(ctx, c, ws, t, i);
      while (ws.held.size()) free_one(ctx.slot, c, ws.held.pop_oldest()->addr);
      ctx.add_ops();
      if (!ok) return false;
    }
    return true;
  }
  // A set-up vmalloc() of a call (a pointer array, or one of the areas it points to), kept in ws.prepopulated;
  // false if it found no space.
  bool call_vmalloc(const Slot& slot, VmapCpu& c, WorkerState& ws, unsigned long size) {
    VmStruct* vm = vmalloc_node(slot, c, size, 1, false);
    if (vm) ws.prepopulated.push_back(vm->addr);
    return vm;
  }
  // The end of a call: vfree() of the areas its arrays point to, in order, then of its `arrays` pointer arrays.
  void release_call(const Slot& slot, VmapCpu& c, WorkerState& ws, size_t arrays) {
    for (size_t i = arrays; i < ws.prepopulated.size(); ++i) free_one(slot, c, ws.prepopulated[i]);
    for (size_t i = 0; i < arrays && i < ws.prepopulated.size(); ++i) free_one(slot, c, ws.prepopulated[i]);
    ws.prepopulated.clear();
  }
  // long_busy_list_alloc_test(): ptr[] of 15000 one-page areas (their failures unchecked, as the kernel's), the
  // loops of 100 + 1 pages among them, then every area freed.
  bool long_busy_list_alloc_test(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, TestCaseData& d) {
    if (!call_vmalloc(ctx.slot, c, ws, kLongBusyListAreas * sizeof(void*))) return false;
    for (int i = 0; i < kLongBusyListAreas && !ctx.stopped(); ++i)
      if (!call_vmalloc(ctx.slot, c, ws, PAGE_SIZE)) ++d.setup_failures;
    const bool ok = test_loops(ctx, c, ws, KTest::long_busy_list);
    if (!ctx.stopped()) release_call(ctx.slot, c, ws, 1);  // a stopped run's finish() frees them
    return ok;
  }
  // full_fit_alloc_test(): ptr[] and junk_ptr[] of junk_length pointers, junk_length pairs of one-page areas, the
  // junk half freed (one-page holes between busy areas), the loops of one page, then ptr[i] and the arrays.
  bool full_fit_alloc_test(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, TestCaseData& d) {
    const uint64_t J = junk_length(nr_cpus_);
    if (!call_vmalloc(ctx.slot, c, ws, J * sizeof(void*))) return false;
    if (!call_vmalloc(ctx.slot, c, ws, J * sizeof(void*))) {
      release_call(ctx.slot, c, ws, 1);
      return false;
    }
    std::vector<unsigned long> junk;
    junk.reserve(J);
    for (uint64_t i = 0; i < J && !ctx.stopped(); ++i) {
      if (!call_vmalloc(ctx.slot, c, ws, PAGE_SIZE)) ++d.setup_failures;
      if (VmStruct* vm = vmalloc_node(ctx.slot, c, PAGE_SIZE, 1, false))
        junk.push_back(vm->addr);
      else
        ++d.setup_failures;
    }
    for (unsigned long a : junk) free_one(ctx.slot, c, a);
    const bool ok = test_loops(ctx, c, ws, KTest::full_fit);
    if (!ctx.stopped()) release_call(ctx.slot, c, ws, 2);
    return ok;
  }
  // One call of test t's function: true for its 0 (passed), false for -1. It frees all it allocated before it
  // returns, unless the run stops (ws.held and ws.prepopulated then keep the rest for finish()).
  bool test_call(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws, KTest t, TestCaseData& d) {
    switch (t) {
      case KTest::full_fit: return full_fit_alloc_test(ctx, c, ws, d);
      case KTest::long_busy_list: return long_busy_list_alloc_test(ctx, c, ws, d);
      default: return test_loops(ctx, c, ws, t);
    }
  }
  // test_func(): the selected tests in test_case_array[] order (sequential_test_order) or in the order
  // shuffle_array() draws (j = get_random_u32_below(i) for i from n - 1 down to 1), each test_repeat_count calls
  // timed together; its test_case_data: passed, failed, and the time over test_repeat_count in whole microseconds
  // (ktime_us_delta, do_div). A call the run's stop interrupted counts as neither.
  void test_func(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws) {
    std::array<int, kNrTests> order;
    std::iota(order.begin(), order.end(), 0);
    if (!sequential_test_order_)
      for (int i = kNrTests - 1; i > 0; --i) std::swap(order[size_t(i)], order[ctx.rng.below(uint64_t(i))]);
    for (const int index : order) {
      if (!(run_test_mask_ >> index & 1) || ctx.stopped()) continue;
      TestCaseData& d = ws.tests[size_t(index)];
      const uint64_t t0 = clock_ticks();
      for (uint64_t j = 0; j < test_repeat_count_ && !ctx.stopped(); ++j) {
        const uint64_t before = c.st.allocs;
        const bool ok = test_call(ctx, c, ws, KTest(index), d);
        d.allocs += c.st.allocs - before;
        if (ctx.stopped()) break;
        ++(ok ? d.test_passed : d.test_failed);
      }
      d.time_us = uint64_t(ticks_to_ns(clock_ticks() - t0)) / 1000 / test_repeat_count_;
      ctx.metric(std::string(kTestCaseArray[size_t(index)].name) + "_avg_usec", double(d.time_us));
    }
  }
  // A call of test t that passed allocates exactly this many areas, those of its set-up that failed included.
  uint64_t allocs_per_passed_call(KTest t) const {
    const uint64_t L = test_loop_count_;
    switch (t) {
      case KTest::full_fit: return 2 + 2 * junk_length(nr_cpus_) + L;
      case KTest::long_busy_list: return 1 + kLongBusyListAreas + 2 * L;
      case KTest::align_shift: return BITS_PER_LONG;
      default: return L;
    }
  }
  // One thread of stress-ng's pthread stressor: alloc_thread_stack_node() (a cached stack, cleared, or a fresh
  // __vmalloc_node_range() stack), then the rest of its creation and life (clone_ns). The latency recorded is the
  // stack's. A failed stack allocation (address space or pages exhausted) creates no thread (-EAGAIN).
  void create_thread(WorkerCtx& ctx, VmapCpu& c, WorkerState& ws) {
    const uint64_t t0 = clock_ticks();
    VmStruct* vm = nullptr;
    for (VmStruct*& slot : ws.cached_stacks) {  // this_cpu_xchg(cached_stacks[i], NULL)
      vcost::charge(Op::line_access);
      if (!slot) continue;
      vm = std::exchange(slot, nullptr);
      ++ws.stack_cache_hits;
      // memset(s->addr, 0, THREAD_SIZE): stale pointers
      vcost::pages(PageOp::clear, THREAD_SIZE / mm::PAGE_SIZE, {ctx.slot.model_node});
      break;
    }
    if (!vm) {
      vm = vmalloc_node(ctx.slot, c, THREAD_SIZE, THREAD_SIZE, true);  // THREADINFO_GFP: __GFP_ZERO
      // vm = find_vm_area(stack): the vm_struct cached in tsk->stack_vm_area, looked up under the busy lock
      if (vm && space_->find_vm_area(c, vm->addr) != vm)
        throw std::logic_error("vmalloc_stress: find_vm_area() of a fresh stack found another area");
    }
    ctx.record_latency_ns(uint64_t(ticks_to_ns(clock_ticks() - t0)));
    if (!vm) return;
    ws.held.push(vm);
    ctx.record_alloc(vm->addr);
    spin_for_ticks(clone_ticks_);
  }
  // free_thread_stack(): into an empty slot of this CPU's cached_stacks[] (this_cpu_try_cmpxchg(NULL -> vm)),
  // else vfree().
  void free_thread_stack(const Slot& slot, VmapCpu& c, WorkerState& ws, VmStruct* vm) {
    for (VmStruct*& s : ws.cached_stacks) {
      vcost::charge(Op::line_access);
      if (s) continue;
      s = vm;
      ++ws.stack_cache_puts;
      return;
    }
    free_one(slot, c, vm->addr);
  }
  // __vmalloc_area_node(): the pages (vm_area_alloc_pages: bulk in batches of 100, then one at a time) and
  // vmap_pages_range() (a calibrated cost per page); `zero`: __GFP_ZERO. On a shortage it frees what it got and the
  // area (vfree).
  bool vmalloc_area_node(const Slot& slot, VmapCpu& c, VmStruct* vm, bool zero) {
    const unsigned nr_pages = pages_array_len(vm);
    vm->pages = static_cast<mm::Page**>(
        workers_[size_t(slot.worker)].page_arrays->allocate(nr_pages * sizeof(mm::Page*), alignof(mm::Page*)));
    std::fill_n(vm->pages, nr_pages, nullptr);  // kvcalloc: __alloc_pages_bulk skips entries already set
    const int cpu = slot.model_pu, nid = slot.model_node;
    unsigned nr = 0;
    const mm::gfp_t gfp = zero ? mm::GFP_KERNEL | mm::__GFP_ZERO : mm::GFP_KERNEL;
    while (nr < nr_pages) {
      const int request = int(std::min(100u, nr_pages - nr));
      const int got = ms_->alloc_pages_bulk(cpu, nid, gfp, request, vm->pages + nr);
      nr += unsigned(got);
      if (got != request) break;
    }
    while (nr < nr_pages) {
      mm::Page* page = ms_->alloc_pages(cpu, nid, 0, gfp);
      if (!page) break;
      vm->pages[nr++] = page;
    }
    vm->nr_pages = nr;
    if (nr < nr_pages) {  // "vmalloc error: size %lu, failed to allocate pages"
      ++page_failures_[size_t(slot.worker)].n;
      free_one(slot, c, vm->addr);
      return false;
    }
    if (gfp & mm::__GFP_ZERO) vcost::pages(PageOp::clear, nr, {nid});
    spin_for_ticks(map_ticks_per_page_ * nr);
    return true;
  }
  void free_one(const Slot& slot, VmapCpu& c, unsigned long addr) {
    VmStruct* vm = space_->remove_vm_area(c, addr);
    if (!vm) throw std::logic_error("vmalloc_stress: vfree of a held area found no area");
    if (vm->pages) {
      spin_for_ticks(map_ticks_per_page_ * vm->nr_pages);  // vunmap_range_noflush()
      for (unsigned i = 0; i < vm->nr_pages; ++i) ms_->free_pages(slot.model_pu, vm->pages[i], 0);
      workers_[size_t(slot.worker)].page_arrays->deallocate(vm->pages, pages_array_len(vm) * sizeof(mm::Page*),
                                                            alignof(mm::Page*));
    }
    space_->free_vm_struct(c, vm);
  }
  // The pages of an area: get_vm_area_size(), its size without the guard page.
  static unsigned pages_array_len(const VmStruct* vm) { return unsigned((vm->size - PAGE_SIZE) >> PAGE_SHIFT); }

  int threads_;
  uint64_t ops_;
  Pattern pattern_;
  uint64_t size_, align_;
  bool once_;
  int vmap_nodes_;
  bool pools_;
  size_t live_;
  uint64_t lazy_max_pages_, tlb_flush_ns_, bounce_ns_, think_ns_, vmalloc_size_;
  bool map_pages_;
  size_t pthread_max_;
  uint64_t clone_ns_, node_pages_, map_ns_per_page_;  // node_pages_ 0: node_pages() sizes it for the machine
  uint64_t test_loop_count_, test_repeat_count_;      // test_vmalloc's module parameters
  int64_t run_test_mask_;
  bool sequential_test_order_;
  int nr_cpus_ = 1;  // num_online_cpus(): the model's CPUs (set by prepare())
  uint64_t think_ticks_ = 0, clone_ticks_ = 0, map_ticks_per_page_ = 0;  // set by prepare(), in the run's clock
  std::unique_ptr<mm::MemorySystem> ms_;
  std::unique_ptr<VmallocSpace> space_;
  std::vector<WorkerState> workers_;
  struct alignas(64) Counter {
    uint64_t n = 0;
  };
  std::vector<Counter> page_failures_;
  uint64_t held_from_prepare_ = 0;
};

// test_vmalloc's figures: per selected test its passed and failed calls and its allocations (over the workers),
// and kernel_summary, the lines do_concurrent_test() prints, worker by worker, test by test in test_case_array[]
// order (its pr_info format).
void VmallocStress::emit_test_vmalloc(NamedValues& s) const {
  std::string lines;
  for (const WorkerState& ws : workers_)
    for (int t = 0; t < kNrTests; ++t) {
      if (!(run_test_mask_ >> t & 1)) continue;
      const TestCaseData& d = ws.tests[size_t(t)];
      lines += "Summary: " + std::string(kTestCaseArray[size_t(t)].name) + " passed: " + std::to_string(d.test_passed) +
               " failed: " + std::to_string(d.test_failed) + " repeat: " + std::to_string(test_repeat_count_) +
               " loops: " + std::to_string(test_loop_count_) + " avg: " + std::to_string(d.time_us) + " usec\n";
    }
  for (int t = 0; t < kNrTests; ++t) {
    if (!(run_test_mask_ >> t & 1)) continue;
    int64_t passed = 0, failed = 0, allocs = 0;
    for (const WorkerState& ws : workers_) {
      passed += ws.tests[size_t(t)].test_passed;
      failed += ws.tests[size_t(t)].test_failed;
      allocs += int64_t(ws.tests[size_t(t)].allocs);
    }
    const std::string name(kTestCaseArray[size_t(t)].name);
    s.emplace_back(name + "_passed", passed);
    s.emplace_back(name + "_failed", failed);
    s.emplace_back(name + "_allocs", allocs);
  }
  s.emplace_back("kernel_summary", lines);
}

void VmallocStress::finish(const RunEnv& env, RunResult& r) {
  auto bug = [](const std::string& what) { throw std::logic_error("vmalloc_stress: " + what); };
  const VmallocStats st = space_->stats();  // the workers' events (the controller's were reset after prepare)
  const uint64_t k = once_ ? 1 : 2;

  // The busy-lock formula, against the model's per-site counters.
  if (st.busy_lock_alloc != k * st.allocs)
    bug("busy-lock acquisitions on the allocation path: " + std::to_string(st.busy_lock_alloc) + ", expected " +
        std::to_string(k) + " x " + std::to_string(st.allocs) + " allocations");
  if (st.busy_lock_setup != (once_ ? 0 : st.allocs))
    bug("setup_vmalloc_vm() took the busy lock the wrong number of times");
  if (st.lazy_lock_free != st.frees)
    bug("lazy-lock acquisitions on the free path: " + std::to_string(st.lazy_lock_free) + " for " +
        std::to_string(st.frees) + " frees");
  if (space_->v67_shape() && st.lazy_lock_purge != st.purge_lock)
    bug("v6.7 purges detached the lazy tree " + std::to_string(st.lazy_lock_purge) + " times in " +
        std::to_string(st.purge_lock) + " vmap_purge_lock sections");
  if (st.busy_lock_find != expected_lookups(st))
    bug("find_vm_area() took the busy lock " + std::to_string(st.busy_lock_find) + " times, expected " +
        std::to_string(expected_lookups(st)));
  if (st.busy_lock_free != st.frees)
    bug("busy-lock acquisitions on the free path: " + std::to_string(st.busy_lock_free) + " for " +
        std::to_string(st.frees) + " frees");

  // Teardown, untimed and outside lock_stat (this thread is no worker): what the workers still hold and what
  // prepare made, each freed on its worker's context; then every allocation has had its free.
  uint64_t freed_at_teardown = 0;
  for (const Slot& slot : env.slots) {
    WorkerState& ws = workers_[size_t(slot.worker)];
    VmapCpu& c = space_->cpu(slot.worker);
    for (; ws.held.size(); ++freed_at_teardown) {
      env.interruption_point();
      free_one(slot, c, ws.held.pop_oldest()->addr);
    }
    for (VmStruct*& cached : ws.cached_stacks)
      if (cached) {
        free_one(slot, c, std::exchange(cached, nullptr)->addr);
        ++freed_at_teardown;
      }
    freed_at_teardown += ws.prepopulated.size();
    release_held(
        ws.prepopulated, [&](unsigned long a) { free_one(slot, c, a); }, teardown_stop(env));
  }
  // test_vmalloc: each call frees what it allocated, and a call that passed allocated what its test does.
  if (pattern_ == Pattern::test_vmalloc && !r.stopped) {
    uint64_t tallied = 0;
    for (const WorkerState& ws : workers_)
      for (int t = 0; t < kNrTests; ++t) {
        const TestCaseData& d = ws.tests[size_t(t)];
        tallied += d.allocs;
        if (d.test_failed == 0 &&
            d.allocs + d.setup_failures != uint64_t(d.test_passed) * allocs_per_passed_call(KTest(t)))
          bug(std::string(kTestCaseArray[size_t(t)].name) + ": " + std::to_string(d.test_passed) +
              " passed calls allocated " + std::to_string(d.allocs) + " areas (+ " + std::to_string(d.setup_failures) +
              " failed set-up ones), expected " + std::to_string(allocs_per_passed_call(KTest(t))) + " each");
      }
    if (tallied != st.allocs || st.frees != st.allocs || freed_at_teardown)
      bug("test_vmalloc: the tests tallied " + std::to_string(tallied) + " allocations, the space counted " +
          std::to_string(st.allocs) + " and " + std::to_string(st.frees) + " frees; " +
          std::to_string(freed_at_teardown) + " areas were left to the teardown");
  }
  const VmallocStats all = space_->stats();
  if (all.frees != all.allocs + held_from_prepare_)
    bug(std::to_string(all.frees) + " frees for " + std::to_string(all.allocs) + " allocations and " +
        std::to_string(held_from_prepare_) + " areas held from prepare");

  // No overlap, exact tiling, nothing busy, no leaked object; then everything back in one free area.
  space_->verify();
  const VmallocSpace::Snapshot before = space_->snapshot();
  if (!before.busy.empty()) bug(std::to_string(before.busy.size()) + " areas still busy after every worker freed");
  VmapCpu& ctl = space_->cpu(threads_);
  space_->reclaim_and_purge_vmap_areas(ctl);
  space_->verify();
  const VmallocSpace::Snapshot after = space_->snapshot();
  const auto& cfg = space_->config();
  if (after.free.size() != 1 || after.free[0].start != cfg.vstart || after.free[0].end != cfg.vend ||
      !after.lazy.empty() || !after.pooled.empty())
    bug("after the final purge the space is not one free area [VMALLOC_START, VMALLOC_END)");
  uint64_t page_failures = 0;
  for (const auto& f : page_failures_) page_failures += f.n;
  if (ms_) {
    const mm::CheckReport rep = ms_->check();
    if (!rep.ok) bug("page allocator: " + rep.summary());
    if (rep.allocated_pages) bug(std::to_string(rep.allocated_pages) + " pages still allocated after every vfree");
  }

  const double wall = r.elapsed_s;
  uint64_t ops = 0;
  for (const auto& w : r.workers) ops += w.ops;
  const std::string_view busy = space_->busy_lock_class();
  auto per = [](uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; };
  auto& s = r.summary;
  s.emplace_back("ops", int64_t(ops));
  s.emplace_back("ops_per_s", wall > 0 ? double(ops) / wall : 0.0);
  s.emplace_back("freed_at_teardown", int64_t(freed_at_teardown));
  s.emplace_back("shape", std::string(space_->v67_shape() ? "v6.7" : "v6.9+"));
  s.emplace_back("nr_vmap_nodes", int64_t(space_->nr_vmap_nodes()));
  s.emplace_back("busy_lock", std::string(once_ ? "once" : "twice"));
  s.emplace_back("busy_lock_class", std::string(space_->busy_lock_class()));
  s.emplace_back("busy_lock_per_alloc", per(st.busy_lock_alloc, st.allocs));
  s.emplace_back("busy_lock_per_free", per(st.busy_lock_free, st.frees));
  s.emplace_back("busy_lock_lookups", int64_t(st.busy_lock_find));
  s.emplace_back("busy_lock_contentions", r.lock_count(busy, &LockStatRow::contentions));
  s.emplace_back("busy_lock_wait_ns", r.lock_figure(busy, &LockStatRow::wait_total_ns));
  s.emplace_back("busy_lock_hold_ns", r.lock_figure(busy, &LockStatRow::hold_total_ns));
  s.emplace_back("free_lock_per_alloc", per(st.free_lock_alloc, st.allocs));
  s.emplace_back("free_lock_contentions", r.lock_count("free_vmap_area_lock", &LockStatRow::contentions));
  s.emplace_back("free_lock_wait_ns", r.lock_figure("free_vmap_area_lock", &LockStatRow::wait_total_ns));
  s.emplace_back("pool_hit_ratio", per(st.pool_hits, st.pool_hits + st.pool_misses));
  s.emplace_back("lazy_max_pages", int64_t(space_->lazy_max_pages()));
  s.emplace_back("search_steps_per_search", per(st.search_steps, st.searches));
  emit_counters(st, s);
  s.emplace_back("map_pages", map_pages_);
  uint64_t cache_hits = 0, cache_puts = 0;
  for (const WorkerState& ws : workers_) {
    cache_hits += ws.stack_cache_hits;
    cache_puts += ws.stack_cache_puts;
  }
  s.emplace_back("stack_cache_hits", int64_t(cache_hits));
  s.emplace_back("stack_cache_puts", int64_t(cache_puts));
  s.emplace_back("page_alloc_failures", int64_t(page_failures));
  if (pattern_ == Pattern::test_vmalloc) emit_test_vmalloc(s);
  space_.reset();
  ms_.reset();
}

// run_test_mask's documentation, from test_case_array[].
std::string run_test_mask_doc() {
  std::string doc = "test_vmalloc: the tests, bit i for test_case_array[i]:";
  for (int t = 0; t < kNrTests; ++t)
    doc += (t ? ", " : " ") + std::to_string(1 << t) + " " + std::string(kTestCaseArray[size_t(t)].name);
  return doc + ". Default: the " + std::to_string(std::popcount(uint64_t(kModelledTestMask))) +
         " the model runs (the module's: INT_MAX, every test); the others need what the model does not have "
         "(percpu allocator, RCU, vmap blocks) and are refused";
}

}  // namespace

ScenarioDef vmalloc_stress_scenario() {
  return {
      "vmalloc_stress",
      "vmalloc address-space allocator (v6.7 / v6.9+ vmap_node): workers create stress-ng pthreads (kernel stacks "
      "from fork.c's stack cache or vmalloc), run lib/test_vmalloc.c loops, or run lib/test_vmalloc.c as the module "
      "does (pattern=test_vmalloc, its module parameters, its Summary lines); busy_lock twice -> once is the seed "
      "patch; ops/s, busy-lock acquisitions per alloc, lock_stat",
      {
          threads_param(kDefaultThreads),
          ParamSpec::integer("ops", 100000, 1, 1'000'000'000,
                             "operations per worker (allocate, then free; test_vmalloc: unused, see test_loop_count)"),
          ParamSpec::choice("pattern", "thread_stack", kPatternNames.list(),
                            "workload: stress_ng_pthread (the seed's op: a thread creation, its stack from "
                            "fork.c's 2-stack cache or __vmalloc_node_range), thread_stack (the bare get_vm_area + "
                            "vfree loop: size at align), the loop of one of lib/test_vmalloc.c's tests as the "
                            "operation (set-up untimed), or test_vmalloc: the module itself (run_test_mask, ...)"),
          ParamSpec::integer("nr_threads", 0, 0, 1024,
                             "test_vmalloc's module parameter: workers; > 0 takes the place of threads (0: threads; "
                             "the module's 0 runs one worker, test_vmalloc.sh's stress mode passes the CPU count)"),
          ParamSpec::integer("test_loop_count", 1000000, 1, INT32_MAX,
                             "test_vmalloc: loops per call of a test (module default 1000000; the module turns "
                             "<= 0 into 1, here it is refused)"),
          ParamSpec::integer("test_repeat_count", 1, 1, INT32_MAX,
                             "test_vmalloc: calls of each selected test per worker, timed together (module default 1)"),
          ParamSpec::integer("nr_pages", 0, 0, int64_t(1) << 18,
                             "test_vmalloc: pages of fix_size_alloc_test's vmalloc (module default 0: one page)"),
          ParamSpec::integer("run_test_mask", kModelledTestMask, 1, INT32_MAX, run_test_mask_doc()),
          ParamSpec::boolean("sequential_test_order", false,
                             "test_vmalloc: run the tests in test_case_array[] order (module default: each worker "
                             "shuffles them)"),
          ParamSpec::integer("size", 16384, 1, kMaxBytes,
                             "bytes per area before the guard page (thread_stack, fix_size); PAGE_ALIGNed"),
          ParamSpec::integer("align", 16384, 1, kMaxBytes, "alignment in bytes, a power of two (thread_stack)"),
          ParamSpec::integer("pthread_max", 1024, 1, 30000,
                             "stress_ng_pthread: threads a worker creates before it joins them all (stress-ng "
                             "--pthread-max; DEFAULT_PTHREAD 1024, MIN/MAX_PTHREAD 1/30000)"),
          ParamSpec::integer("clone_ns", 9000, 0, 100'000'000,
                             "stress_ng_pthread: the rest of a thread's creation, life and join beside its stack "
                             "(calibrated busy-wait). Default: D. Lemire, 'Cost of a thread in C++ under Linux' "
                             "(lemire.me, 2020-01-30): a thread created, run and joined, 'Skylake server (Linux, "
                             "Intel) 9,000 ns' (its stack from the fork.c cache, as each thread exits before the "
                             "next)"),
          ParamSpec::choice("busy_lock", "once", {"twice", "once"},
                            "twice: setup_vmalloc_vm() takes the busy lock again (before the patch); once: "
                            "fields set before the single insert (merged)"),
          ParamSpec::integer("vmap_nodes", 0, 0, MAX_VMAP_NODES,
                             "busy trees: 1 = the v6.7 shape (vmap_area_lock); N = v6.9+ vmap_nodes (vn->busy.lock); "
                             "0 = the model's CPU count capped at 128"),
          ParamSpec::boolean("pools", true, "v6.9+ per-node size-class pools (ignored with vmap_nodes=1)"),
          ParamSpec::integer("live", 1, 1, 1'000'000,
                             "areas a worker holds at most (1: each allocation is freed in the same operation)"),
          ParamSpec::integer("lazy_max_pages", 0, 0, int64_t(1) << 40,
                             "lazily freed pages that trigger a purge; 0 = fls(model CPUs) x 32 MiB / 4 KiB"),
          ParamSpec::integer("tlb_flush_ns", 5000, 0, 100'000'000,
                             "cost of flush_tlb_kernel_range() per purge (calibrated busy-wait)"),
          ParamSpec::integer("bounce_ns", 0, 0, 1'000'000,
                             "cost of pulling a vmalloc lock's data from another CPU, charged in its critical "
                             "section (big-machine handoff; 0: none)"),
          ParamSpec::integer("think_ns", 0, 0, 100'000'000,
                             "work outside the locks between an allocation and its free (calibrated busy-wait)"),
          ParamSpec::integer("vmalloc_size", int64_t(VMALLOC_SIZE_DEFAULT), 65536, int64_t(VMALLOC_SIZE_DEFAULT),
                             "bytes of VMALLOC_START..VMALLOC_END (x86-64 4-level: 32 TiB); small values exhaust"),
          ParamSpec::boolean("map_pages", false,
                             "allocate each area's pages from the page allocator on the worker's node (bulk) and "
                             "charge map_ns_per_page for mapping and unmapping (always on for stress_ng_pthread)"),
          ParamSpec::integer("node_pages", 0, 0, int64_t(1) << 26,
                             "pages per model node of the page allocator (map_pages; multiple of 512); 0 = every "
                             "worker's areas at their most twice over, at least 262144"),
          ParamSpec::integer("map_ns_per_page", 20, 0, 1'000'000,
                             "vmap_pages_range() / vunmap cost per page (map_pages; calibrated busy-wait)"),
      },
      [](const Params& p) { return std::make_unique<VmallocStress>(p); },
      size_is("ops"),
      {{"threads", int64_t(2)},
       {"ops", int64_t(2000)},
       {"lazy_max_pages", int64_t(256)},
       {"pthread_max", int64_t(64)},
       {"test_loop_count", int64_t(200)}},
      "v6.7 (the seed's kernel; vmap_nodes != 1: the vmap_node code of its v4/v5 base, mm-unstable before v6.8): pcp "
      "batch/high of v6.7 (BatchRule::v6_7, mm/page_alloc.c nr_pcp_alloc/nr_pcp_high), no check_new_pages "
      "(CheckMode::off, check_pages_enabled off since v6.4)"};
}

}  // namespace alloclab
