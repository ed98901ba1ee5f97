// shmem_fault: the seed "shmem: reduce one time of locking in pagefault" (Shaohua Li, 2010) on the shmem model
// (alloclab::mm::ShmemFile, shmem.hpp: 2.6.35 for lock_twice/prealloc/ramfs, a recent kernel for modern).
// One shared anonymous mapping of threads x pages_per_thread pages (the test program's 16 GiB mmap, scaled); every
// worker reads one byte per page (`t = *(addr + index)`), which faults the page in:
//   disjoint  worker w reads its own slice [w x pages_per_thread, (w+1) x pages_per_thread) — the seed's test;
//   overlap   every worker reads the whole mapping from index 0 (Hugh Dickins' variant): the first faulter of an
//             index allocates and inserts the page, a later one finds it in the page cache (waiting on its page
//             lock while it is cleared), or loses the add_to_page_cache race (-EEXIST) and frees its page, or finds
//             the PTE already installed and does not fault at all.
// Per worker: faults, ns per fault, new pages, page-cache hits, EEXIST races, its info->lock / tree_lock counts.
// Summary: faults/s, total time (the slowest worker), info_lock_per_fault (info->lock acquisitions per fault: 2, 1,
// 0, 1 for lock_twice, prealloc, ramfs, modern with disjoint, plus the index-page retakes of shmem_swp_alloc,
// counted separately as index_page_allocs), the lock_stat picture (info->lock vs mapping->tree_lock contention),
// the page-cache size. mmap_sem is a real rw_semaphore taken for read on every fault: its lock_stat row is
// "mmap_sem-R" (as /proc/lock_stat prints a read side), one acquisition per fault.
// Checked after every run: the lock formulas of shmem.hpp (lock_expectations, against lock_stat by the runner); and,
// as model bugs (std::logic_error): the fault path's own counts adding up (faults = misses + page-cache hits, every
// index of the file inserted once; with disjoint: faulted once, no race), the page cache holding one uptodate,
// unlocked, LRU page per index, each mapped by its PTE; no page lost or leaked (allocated pages = page-cache pages +
// index pages); after munmap + truncate every page back in the allocator and check() clean.
// Memory: each node that runs workers gets its workers' pages (the whole file with overlap) plus the index pages
// and room for the watermarks and per-CPU lists; with backing="real" each page also has 4 KiB of node memory,
// touched once before the run so the host's own page faults stay out of the measurement.
// The page allocator's rules are the modelled kernel's (ScenarioDef::kernel, provenance["kernel"]):
//   lock_twice, prealloc, ramfs: 2.6.35 mm/page_alloc.c (BatchRule::v2_6_35, CheckMode::prep_new_page; pcp.hpp):
//     zone_batchsize() caps the batch at 512 KiB (31 pages on these nodes of 512 MiB and more, 15 on a node of
//     256 MiB), setup_pageset() sets pcp->high = 6 x batch; only order 0 is on the per-CPU lists;
//     buffered_rmqueue refills an empty list with rmqueue_bulk(zone, 0, pcp->batch) under zone->lock, with no
//     check inside the lock; prep_new_page -> check_new_page reads each page handed out, outside zone->lock;
//     free_hot_cold_page runs free_pages_check before the list and returns pcp->batch pages at pcp->high.
//   modern: the v6.2 rules (pcp batch/high of v6.2, check_pcp_refill inside zone->lock), not yet v6.19's own.
// So are its lock kinds (lock_defaults, beneath the user's locks=): on x86 every 2.6.35 spinlock_t is a ticket
// spinlock (arch/x86/include/asm/spinlock.h, __ticket_spin_lock, v2.6.25-v4.1; qspinlock from v4.2), so lock_twice,
// prealloc and ramfs run every spinlock class as `ticket`; modern keeps the lab's defaults (qspinlock). pcp->lock,
// which 2.6.35 did not have (its per-CPU lists ran under local_irq_save), is a ticket lock too, and never contended.
// Summary: zone_lock_acquisitions; pages_checked_at_prep and pages_checked_under_lock (where the allocation-side
// struct page checks ran: the first for 2.6.35, the second for v6.2).
// Leaves out: what shmem.hpp leaves out; the trap itself unless fault_ns is given; in a real-clock run, a
// cross-socket hand-off cost (a 2-socket machine's line transfers are only what the host really has; a virtual run
// charges the profile's, see shmem.hpp).
#include <algorithm>
#include <stdexcept>

#include "alloclab/lab/runner.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/shmem.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace alloclab::mm;

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class ShmemFault final : public Scenario {
 public:
  explicit ShmemFault(const Params& p)
      : threads_(int(p.i("threads"))),
        ppt_(uint64_t(p.i("pages_per_thread"))),
        variant_(kShmemVariantNames.parse(p.s("variant"), "variant")),
        overlap_(p.s("pattern") == "overlap"),
        backing_(p.s("backing") == "real" ? Backing::real : Backing::none),
        clear_ns_(uint64_t(p.i("clear_ns"))),
        fault_ns_(uint64_t(p.i("fault_ns"))) {
    if (uint64_t(threads_) * ppt_ > SHMEM_MAX_INDEX)
      throw std::invalid_argument("pages_per_thread: " + std::to_string(ppt_) + " x " + std::to_string(threads_) +
                                  " threads is a mapping of " + std::to_string(uint64_t(threads_) * ppt_) +
                                  " pages, more than a 2.6.35 shmem file can hold (SHMEM_MAX_INDEX " +
                                  std::to_string(SHMEM_MAX_INDEX) + ")");
    if (clear_ns_ && backing_ == Backing::real)
      throw std::invalid_argument("clear_ns: " + std::to_string(clear_ns_) +
                                  " is only for backing='none' (with backing='real' the 4 KiB clear is real)");
    nr_pages_ = uint64_t(threads_) * ppt_;
  }

  int nr_workers() const override { return threads_; }

  // The modelled kernel's lock kinds: 2.6.35's spinlock_t is a ticket lock (lock_twice, prealloc, ramfs); modern
  // keeps the lab's defaults. The user's locks= entries win over them.
  void lock_defaults(LockConfig& c) const override {
    if (variant_ != ShmemVariant::modern) c.set_default(LockNature::spinlock, LockKind::ticket);
  }

  // The memory prepare() allocates, for compact placement (the default); with overlap every node that may run a
  // worker is counted with the whole file, so another placement never needs more than this says.
  MemoryNeed memory_needed(const Machine& m) const override {
    const int nodes = m.model().nr_nodes();
    std::vector<int> on(size_t(nodes), 0);
    if (overlap_) {
      int k = 0;
      for (int n = 0; n < nodes && k < threads_; ++n)
        if (!m.model().pus_of_node(n).empty()) on[size_t(n)] = 1, ++k;
    } else {
      for (const Slot& s : m.place(threads_, Placement{})) on[size_t(s.model_node)]++;
    }
    return need_of(memory_config(on), m.model().nr_pus());
  }

  void prepare(const RunEnv& env) override {
    const int nodes = env.machine.model().nr_nodes();
    std::vector<int> on(size_t(nodes), 0);
    for (const Slot& s : env.slots) on[size_t(s.model_node)]++;
    const MemoryConfig cfg = memory_config(on);
    check_memory(need_of(cfg, env.machine.model().nr_pus()));  // the actual placement's figure
    ms_ = std::make_unique<MemorySystem>(env.machine, env.locks, cfg, env.interruption_points());
    ms_->prefault_backing();
    ShmemConfig sc;
    sc.variant = variant_;
    sc.nr_pages = nr_pages_;
    sc.clear_ns = clear_ns_;
    sc.fault_ns = fault_ns_;
    file_ = std::make_unique<ShmemFile>(*ms_, env.locks, sc);
    for (const Slot& s : env.slots) file_->add_task(s.model_pu, s.model_node);
  }

  void work(WorkerCtx& ctx) override {
    ShmemTask& t = file_->task(size_t(ctx.slot.worker));
    const uint64_t begin = overlap_ ? 0 : uint64_t(ctx.slot.worker) * ppt_;
    const uint64_t end = overlap_ ? nr_pages_ : begin + ppt_;
    const uint64_t t_start = clock_ticks();
    for (uint64_t idx = begin; idx < end && !ctx.stopped(); ++idx) {
      const uint64_t faults = t.st.faults;
      const uint64_t t0 = clock_ticks();
      file_->touch(t, idx);
      if (t.st.faults != faults) {
        ctx.record_latency_ns(uint64_t(ticks_to_ns(clock_ticks() - t0)));
        ctx.add_ops();
        // The page this fault mapped; another faulter may be locking it (flags change), hence the racy nid read.
        const Page* page = file_->pte_page(idx);
        ctx.record_alloc(ms_->zone(page_to_nid_racy(*page)).page_to_pfn(page));
      }
    }
    ctx.end_timed();
    const double elapsed_ns = ticks_to_ns(clock_ticks() - t_start);
    const ShmemStats s = t.stats();
    ctx.metric("ns_per_fault", s.faults ? elapsed_ns / double(s.faults) : 0.0);
    emit_counters(s, ctx);
  }

  void finish(const RunEnv& env, RunResult& r) override {
    const ShmemStats s = file_->totals();  // the workers' counts, before the drains below
    file_->lru_add_drain_all();            // the controlling thread: not in lock_stat
    const ShmemCheck c = file_->verify();
    if (!c.ok) throw std::logic_error("shmem_fault: the page cache is inconsistent after the run: " + c.summary());
    const CheckReport before = ms_->check();
    if (!before.ok) throw std::logic_error("shmem_fault: check() failed after the run: " + before.summary());
    if (before.allocated_pages != c.pages + c.index_pages)
      throw std::logic_error("shmem_fault: " + std::to_string(before.allocated_pages) +
                             " pages allocated but the file holds " + std::to_string(c.pages) + " pages and " +
                             std::to_string(c.index_pages) + " index pages (a page was lost or leaked)");
    if (s.oom) throw std::logic_error("shmem_fault: " + std::to_string(s.oom) + " faults found no memory (sizing bug)");
    const std::string mismatches = check_counts(s, c, r);
    if (!mismatches.empty())
      throw std::logic_error("shmem_fault: the fault path's counts do not add up: " + mismatches);

    file_->teardown(0);
    ms_->drain_all_pages();
    const CheckReport after = ms_->check();
    if (!after.ok || after.allocated_pages != 0)
      throw std::logic_error("shmem_fault: after munmap and truncate: " + after.summary());

    const double wall = r.elapsed_s;
    double ns_sum = 0;
    for (const auto& w : r.workers) {
      for (const auto& [k, v] : w.metrics)
        if (k == "ns_per_fault") ns_sum += v;
    }
    const char* tree_class = variant_ == ShmemVariant::modern ? "mapping->i_pages" : "mapping->tree_lock";
    const double faults = double(s.faults);
    auto& m = r.summary;
    m.emplace_back("fault_handler", std::string(file_->fault_handler()));
    m.emplace_back("faults_per_s", wall > 0 ? faults / wall : 0.0);
    m.emplace_back("ns_per_fault", r.workers.empty() ? 0.0 : ns_sum / double(r.workers.size()));
    m.emplace_back("info_lock_per_fault", faults > 0 ? double(s.info_lock) / faults : 0.0);
    m.emplace_back("info_lock_contentions", r.lock_count("info->lock", &LockStatRow::contentions));
    m.emplace_back("info_lock_wait_ns", r.lock_figure("info->lock", &LockStatRow::wait_total_ns));
    m.emplace_back("info_lock_hold_ns", r.lock_figure("info->lock", &LockStatRow::hold_total_ns));
    m.emplace_back("tree_lock_per_fault", faults > 0 ? double(s.tree_lock) / faults : 0.0);
    m.emplace_back("tree_lock_contentions", r.lock_count(tree_class, &LockStatRow::contentions));
    m.emplace_back("tree_lock_wait_ns", r.lock_figure(tree_class, &LockStatRow::wait_total_ns));
    m.emplace_back("tree_lock_hold_ns", r.lock_figure(tree_class, &LockStatRow::hold_total_ns));
    m.emplace_back("zone_lock_acquisitions", r.lock_count("zone->lock", &LockStatRow::acquisitions));
    const MemoryStats ms = ms_->stats();  // the run's allocations (teardown has not freed anything yet)
    m.emplace_back("pcp_batch", int64_t(ms_->zone(env.slots.front().model_node).pageset_batch));
    m.emplace_back("pcp_high", int64_t(ms_->zone(env.slots.front().model_node).pageset_high));
    m.emplace_back("pages_checked_at_prep", int64_t(ms.pages_checked_at_prep));
    m.emplace_back("pages_checked_under_lock", int64_t(ms.zone.pages_checked_under_lock));
    m.emplace_back("pagecache_pages", int64_t(c.pages));
    m.emplace_back("file_pages", int64_t(nr_pages_));
    m.emplace_back("index_pages", int64_t(c.index_pages));
    emit_counters(s, m);
    m.emplace_back("check", c.summary() + "; allocator " + before.summary() + "; after teardown " + after.summary());

    file_.reset();
    ms_.reset();
  }

 private:
  // Node sizes: each node with workers gets its workers' pages (the whole file with overlap: any of them may fault
  // any page first) plus the index pages and the pages in flight, plus room for the watermarks (allocations fail
  // below min; the first pass wants low) and the per-CPU lists (each at most pcp->high: 4 batches of up to 63 or
  // low_wmark / the node's CPUs under v6.2, 6 batches of up to 31 under 2.6.35), and the rules of the variant's
  // kernel.
  MemoryConfig memory_config(const std::vector<int>& workers_on) const {
    const size_t nodes = workers_on.size();
    std::vector<uint64_t> need(nodes, 0);
    const uint64_t extra = shmem_index_pages(nr_pages_) + uint64_t(threads_) * 2;
    for (size_t n = 0; n < nodes; ++n)
      if (workers_on[n]) need[n] = (overlap_ ? nr_pages_ : ppt_ * uint64_t(workers_on[n])) + extra;
    const uint64_t pcp_room = uint64_t(threads_) * 4 * 64 + 1024;
    MemoryConfig cfg;
    cfg.backing = backing_;
    if (variant_ != ShmemVariant::modern) {  // the 2.6.35 page allocator (see the file comment)
      cfg.batch_rule = BatchRule::v2_6_35;
      cfg.check = CheckMode::prep_new_page;
    }
    cfg.node_pages.assign(nodes, 0);
    for (size_t n = 0; n < nodes; ++n)
      if (need[n]) cfg.node_pages[n] = round_up(need[n] + pcp_room, MAX_ORDER_NR_PAGES);
    for (int iter = 0; iter < 64; ++iter) {
      bool fits = true;
      for (size_t n = 0; n < nodes; ++n) {
        if (!need[n]) continue;
        const auto wm = MemorySystem::watermarks(cfg, int(n));
        const uint64_t reserve = wm[WMARK_HIGH] + wm[WMARK_LOW] + pcp_room;
        if (cfg.node_pages[n] < reserve + need[n]) {
          cfg.node_pages[n] = round_up(reserve + need[n] + MAX_ORDER_NR_PAGES, MAX_ORDER_NR_PAGES);
          fits = false;
        }
      }
      if (fits) break;
    }
    return cfg;
  }

  MemoryNeed need_of(const MemoryConfig& cfg, int nr_cpus) const {
    uint64_t pages = 0;
    for (uint64_t p : cfg.node_pages) pages += p;
    const uint64_t mem = MemorySystem::bytes_needed(cfg, nr_cpus);
    // The PTE array, the radix tree (a 528-byte node per 64 pages, and its upper levels), the teardown's list of the
    // cached pages, and, without backing, the index pages' contents.
    const uint64_t side = nr_pages_ * sizeof(uint64_t) * 2 + (nr_pages_ / 64 + 64) * sizeof(RadixTreeNode) * 2 +
                          (backing_ == Backing::none ? shmem_index_pages(nr_pages_) * PAGE_SIZE : 0);
    return {mem + side, std::to_string(pages) + " frames: struct pages" +
                            std::string(backing_ == Backing::real ? " and 4 KiB backing each" : "") + " " +
                            format_bytes(mem) + " + PTEs and page-cache tree " + format_bytes(side)};
  }

  // info->lock as shmem.hpp's formula has it for the variant; the page-cache lock once per miss; lru_lock once per
  // pagevec drain; mmap_sem's read side once per fault.
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult&) const override {
    const ShmemStats s = file_->totals();
    const uint64_t misses = s.new_pages + s.eexist_races;
    const auto n = [](uint64_t v) { return std::to_string(v); };
    LockExpectation info{"info_lock", "info->lock", 0, ""};
    switch (variant_) {
      case ShmemVariant::lock_twice:
        info.expected = 2 * misses + s.index_page_allocs;
        info.formula = "2 x misses + index-page retakes = 2 x " + n(misses) + " + " + n(s.index_page_allocs);
        break;
      case ShmemVariant::prealloc:
        info.expected = misses + s.index_page_allocs;
        info.formula = "misses + index-page retakes = " + n(misses) + " + " + n(s.index_page_allocs);
        break;
      case ShmemVariant::ramfs: info.formula = "0: ramfs has no shmem_inode_info"; break;
      case ShmemVariant::modern:
        info.expected = s.new_pages;
        info.formula = "one per page added (shmem_inode_acct_blocks) = " + n(s.new_pages);
        break;
    }
    info.formula += " = " + n(*info.expected);
    const char* tree = variant_ == ShmemVariant::modern ? "mapping->i_pages" : "mapping->tree_lock";
    return {info,
            {"tree_lock", tree, misses, "one per miss (new pages + EEXIST losers) = " + n(misses)},
            {"lru_lock", "lru_lock", s.lru_lock, "one per pagevec drain (14 pages) = " + n(s.lru_lock)},
            {"mmap_sem_read", "mmap_sem-R", s.faults, "one down_read per fault = " + n(s.faults)}};
  }

  // The fault path's own counts against each other and against the file: the mismatches, empty when they add up.
  std::string check_counts(const ShmemStats& s, const ShmemCheck& c, const RunResult& r) const {
    std::string bad;
    const auto expect = [&](bool ok, const std::string& what) {
      if (!ok) bad += (bad.empty() ? "" : "; ") + what;
    };
    const uint64_t misses = s.new_pages + s.eexist_races;
    const auto n = [](uint64_t v) { return std::to_string(v); };
    expect(s.faults == misses + s.cache_hits,
           "faults " + n(s.faults) + " != new pages + EEXIST losers + page-cache hits " + n(misses + s.cache_hits));
    expect(s.tree_lock == misses, "tree lock " + n(s.tree_lock) + " != misses " + n(misses));
    expect(s.mmap_sem_reads == s.faults, "mmap_sem reads " + n(s.mmap_sem_reads) + " != faults " + n(s.faults));
    expect(s.page_allocs - s.page_allocs_unused == s.new_pages,
           "page allocations " + n(s.page_allocs) + " - unused " + n(s.page_allocs_unused) + " != new pages");
    expect(s.index_page_allocs - s.index_pages_freed == c.index_pages,
           "index pages allocated " + n(s.index_page_allocs) + " - freed " + n(s.index_pages_freed) + " != installed " +
               n(c.index_pages));
    uint64_t info = 0;
    switch (variant_) {
      case ShmemVariant::lock_twice: info = 2 * misses + s.index_page_allocs; break;
      case ShmemVariant::prealloc: info = misses + s.index_page_allocs; break;
      case ShmemVariant::ramfs: info = 0; break;
      case ShmemVariant::modern: info = s.new_pages; break;
    }
    expect(s.info_lock == info,
           "info->lock " + n(s.info_lock) + " != " + n(info) + " for " + std::string(to_string(variant_)));
    if (!r.stopped) {
      expect(s.new_pages == nr_pages_ && c.pages == nr_pages_,
             "new pages " + n(s.new_pages) + ", page cache " + n(c.pages) + ", file " + n(nr_pages_));
      expect(c.ptes == nr_pages_, "PTEs " + n(c.ptes) + " != file pages " + n(nr_pages_));
      if (variant_ == ShmemVariant::lock_twice || variant_ == ShmemVariant::prealloc)
        expect(c.index_pages == shmem_index_pages(nr_pages_),
               "index pages " + n(c.index_pages) + " != shmem_index_pages " + n(shmem_index_pages(nr_pages_)));
      if (!overlap_)
        expect(s.faults == nr_pages_ && s.cache_hits == 0 && s.eexist_races == 0 && s.pte_races == 0,
               "disjoint: every index faulted exactly once (faults " + n(s.faults) + ")");
    }
    return bad;
  }

  int threads_;
  uint64_t ppt_;
  ShmemVariant variant_;
  bool overlap_;
  Backing backing_;
  uint64_t clear_ns_, fault_ns_;
  uint64_t nr_pages_ = 0;
  std::unique_ptr<MemorySystem> ms_;
  std::unique_ptr<ShmemFile> file_;
};

}  // namespace

ScenarioDef shmem_fault_scenario() {
  return {"shmem_fault",
          "read faults on one shared anonymous mapping (the shmem-prealloc-fault seed): info->lock twice "
          "(2.6.35), once (the prealloc patch), never (ramfs) or once beside the xa_lock (modern); disjoint slices "
          "or every worker over the whole file",
          {
              threads_param(2),
              ParamSpec::choice("variant", "lock_twice", kShmemVariantNames.list(),
                                "lock_twice = 2.6.35, prealloc = the patch, ramfs = filemap_fault on ramfs, modern = "
                                "a recent shmem_get_folio_gfp"),
              ParamSpec::integer("pages_per_thread", 16384, 1, int64_t(SHMEM_MAX_INDEX),
                                 "pages each worker faults; the mapping is threads x pages_per_thread pages"),
              ParamSpec::choice("pattern", "disjoint", {"disjoint", "overlap"},
                                "disjoint: each worker its own slice (the seed's test); overlap: every worker reads "
                                "the whole mapping (Hugh Dickins' variant)"),
              ParamSpec::choice("backing", "real", {"real", "none"},
                                "real: 4 KiB of memory per page, cleared for real by clear_highpage; none: "
                                "descriptors only (the clear costs clear_ns)"),
              ParamSpec::integer("clear_ns", 0, 0, 10'000'000,
                                 "backing='none': busy-wait standing for clear_highpage (0: no clear)"),
              ParamSpec::integer("fault_ns", 0, 0, 10'000'000,
                                 "trap + page-table walk + PTE install, a busy-wait outside every lock (0: none)"),
          },
          [](const Params& p) { return std::make_unique<ShmemFault>(p); },
          size_is("pages_per_thread"),
          {{"threads", int64_t(2)}, {"pages_per_thread", int64_t(1024)}},
          "v2.6.35 for lock_twice, prealloc and ramfs: mm/shmem.c shmem_getpage / mm/filemap.c filemap_fault, "
          "page allocator pcp batch 512 KiB-capped, high 6 x batch, order 0 only (BatchRule::v2_6_35), "
          "check_new_page in prep_new_page outside zone->lock and free_pages_check at free "
          "(CheckMode::prep_new_page), spinlock_t a ticket spinlock (x86 v2.6.25-v4.1: info->lock, tree_lock, "
          "lru_lock, zone->lock run as ticket unless locks= says otherwise); modern: v6.19 shmem_get_folio_gfp on "
          "the v6.2 page allocator rules (pcp batch/high v6.2, check_pcp_refill inside zone->lock), the lab's "
          "default lock kinds"};
}

}  // namespace alloclab
