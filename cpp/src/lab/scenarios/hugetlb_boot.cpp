// hugetlb_boot: boot-time hugetlb pool initialisation, serial or with padata_do_multithreaded — the multiplier
// experiment of Gang Li's "hugetlb: parallelize 2M hugetlb allocation and initialization" (v6 7/8, v6.9).
//
// Kernel: v6.9, the release that merged the series (ScenarioDef::kernel says so in every result). Its rules, and where
// each comes from:
//   * the pool: mm/hugetlb.c hugetlb_hstate_alloc_pages -> hugetlb_pages_alloc_boot / hugetlb_pages_alloc_boot_node
//     (2 MiB) and hugetlb_gigantic_pages_alloc_boot + gather_bootmem_prealloc (1 GiB), as hugetlb.hpp describes;
//   * the job: kernel/padata.c padata_do_multithreaded / padata_mt_helper, with patch 4's numa_aware (padata.hpp);
//   * pcp batch and high: mm/page_alloc.c nr_pcp_alloc (the refill size: order-9 refills take max(batch >> 9, 2)
//     blocks), nr_pcp_high and nr_pcp_free as rewritten in v6.7 ("mm, pcp: ..." series) and unchanged on the
//     allocation side through v6.9 (BatchRule::v6_7; v6.8's PCPF_FREE_HIGH_BATCH touches only frees);
//   * checks: none. Since v6.4 ("mm, page_alloc: reduce page alloc/free sanity checks") check_new_pages() in
//     __rmqueue_pcplist and rmqueue_buddy and the bulk-free checks in free_pcppages_bulk run only when
//     is_check_pages_enabled() (debug_pagealloc or init_on_*), off by default (CheckMode::off).
// Models: hugetlb_hstate_alloc_pages -> hugetlb_pages_alloc_boot(h) of v6.9 (2 MiB) and gather_bootmem_prealloc
// (the gigantic path, patch 8), on the page allocator model with those rules. The 2 MiB job is the kernel's
//     {thread_fn = hugetlb_pages_alloc_boot_node, start = 0, size = pages, align = 1, numa_aware,
//      max_threads = k * nodes, min_chunk = pages / nodes / k}     (C integer division, left to right)
// with nodes = num_node_state(N_MEMORY) and k the `multiplier` (the merged code has k = 2); the gigantic job is
// {thread_fn = gather_bootmem_prealloc_parallel, size = nr_node_ids, align = 1, min_chunk = 1,
//  max_threads = nodes, numa_aware}, whose folios come from a serial memblock stand-in run in prepare() (untimed,
// as it runs before SMP in the kernel). `multiplier` has no effect there: size = nr_node_ids caps nworks at the
// node count, as in the kernel. parallel=False is the pre-series serial loop on the calling thread.
//
// How padata maps onto the runner: one runner worker per padata work. padata's plan (nworks, chunk_size, the node
// of each queued work) depends only on the parameters and the model topology, so place() computes it and returns
// one slot per work: worker 0 is the caller (the boot CPU: the first PU of the first node with CPUs), worker i >= 1
// is helper i on the node queue_work_node() picked (numa_aware: round-robin over node_states[N_CPU] from
// next_node_in(last_used_nid = 0)), on that node's next free PU; without numa_aware every helper goes to the
// caller's node (queue_work on system_unbound_wq runs on the queueing CPU's pool). Timing, binding and bind_ok
// therefore come from the runner like every scenario's; an explicit placement list overrides padata's choice.
// The runner releases all workers at once, but a helper only starts when the caller has queue_work()ed it (it
// sleeps, as a kworker does), so worker 0's elapsed_s is the wall time of hugetlb_pages_alloc_boot(): the seed's
// figure. nr_workers() is valid after place() (the runner calls place() first: the count depends on the model).
// Each worker passes its model PU to the page allocator (its pcp lists), the model's smp_processor_id().
//
// Memory: node_mib = 0 sizes every memory node for exactly what the pool will take there (the round-robin is
// deterministic per chunk with the local cursor) plus the high watermark and pcp slack, in whole GiB for gigantic
// folios (so each node starts 1 GiB-aligned; the 1 GiB folio's mem_map is full size, 16 MiB of host memory per
// folio, and the runner refuses a pool whose mem_map does not fit the host); a smaller node_mib runs
// the pool out of memory, which is a result (allocated < pages, exhausted = True, the kernel's warning), not an
// error. Asking for more than the host has is an error before anything is allocated (MemorySystem).
// Lock counts checked after every run (lock_expectations, against lock_stat by the runner): hugetlb_lock (per list
// or per folio), padata_work_lock (nworks + chunks), and zone->lock: ceil(folios / 2) per (worker, node) for 2 MiB
// folios (each refill of the worker's pcp THP list brings 2 order-9 blocks), 0 for gigantic ones (see
// zone_lock_expectation()).
// Invariants checked after every run (std::logic_error if broken): check_pool() (every folio once on its node's
// free list, tails point at the head, counters agree), the folios the workers report equal nr_huge_pages, and
// after teardown (free_pool + drain_all_pages, untimed) every page is free again, check() passes and each node's
// free_area equals what it was before the run.
// Leaves out: what hugetlb.hpp and padata.hpp leave out; hugetlb_hstate_alloc_pages_onenode (per-node boot
// parameters); the kernel's other boot work running alongside.
#include <time.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "alloclab/kernel/padata.hpp"
#include "alloclab/mm/hugetlb.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace mm;

// The worker's CPU time: its thread's, or in a virtual-clock run its virtual clock (a virtual CPU is never
// descheduled: it runs, spins or waits on a lock for as long as its clock says).
uint64_t thread_cpu_ns() {
  if (virtual_clock()) return clock_ns();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t roundup(uint64_t x, uint64_t y) { return (x + y - 1) / y * y; }

struct alignas(64) BootWorker {
  int work = 0;        // padata work index (0: the caller)
  int cpu = 0;         // model PU
  int work_node = -1;  // the node padata queued this work on (-1: the caller, or not numa_aware)
  WorkerCtx* ctx = nullptr;
  HugetlbThreadStats st;
  uint64_t chunks = 0;
  std::vector<unsigned long> chunk_lens;  // end - start of each thread_fn call it ran (2 MiB path)
  uint64_t busy_ticks = 0;
  uint64_t cpu_ns = 0;
};

class HugetlbBoot final : public Scenario {
 public:
  explicit HugetlbBoot(const Params& p)
      : pages_(uint64_t(p.i("pages"))),
        parallel_(p.b("parallel")),
        multiplier_(int(p.i("multiplier"))),
        numa_aware_(p.b("numa_aware")),
        gigantic_(p.b("gigantic")),
        lock_mode_name_(p.s("hugetlb_lock")),
        next_nid_(kNextNidNames.parse(p.s("next_nid"), "next_nid")),
        hvo_ns_(uint64_t(p.i("hvo_ns"))),
        nodes_param_(int(p.i("nodes"))),
        node_mib_(uint64_t(p.i("node_mib"))),
        works_pool_(p.b("works_pool")) {
    lock_mode_ = lock_mode_name_ == "auto" ? (gigantic_ ? HugetlbLockMode::per_folio : HugetlbLockMode::per_worker)
                                           : kHugetlbLockModeNames.parse(lock_mode_name_, "hugetlb_lock");
  }

  int nr_workers() const override { return placed_ ? int(slots_.size()) : 1; }

  std::vector<Slot> place(const Machine& m, const Placement& placement) const override {
    const Topology& t = m.model();
    nr_node_ids_ = t.nr_nodes();
    mem_nodes_ = nodes_param_ ? nodes_param_ : nr_node_ids_;
    if (mem_nodes_ > nr_node_ids_)
      throw std::invalid_argument("nodes: " + std::to_string(nodes_param_) +
                                  " memory nodes but the model topology has " + std::to_string(nr_node_ids_) +
                                  " (give a topology with more nodes, e.g. topology=" + "'node:" +
                                  std::to_string(nodes_param_) + " core:1 pu:1', or nodes=0 for all)");
    std::vector<bool> cpu_nodes(size_t(nr_node_ids_), false);
    for (int n = 0; n < nr_node_ids_; ++n) cpu_nodes[size_t(n)] = !t.pus_of_node(n).empty();
    caller_node_ = next_node_in(-1, cpu_nodes);

    job_ = padata_mt_job{};
    job_.align = 1;
    job_.numa_aware = numa_aware_;
    job_.start = 0;
    if (gigantic_) {
      job_.size = (unsigned long)nr_node_ids_;
      job_.min_chunk = 1;
      job_.max_threads = mem_nodes_;
    } else {
      job_.size = pages_;
      job_.max_threads = mem_nodes_ * multiplier_;
      job_.min_chunk = pages_ / (unsigned long)mem_nodes_ / (unsigned long)multiplier_;
    }
    // padata_init: a pool of num_possible_cpus() works (only enforced with works_pool=True, see the parameter).
    pinst_ = std::make_unique<PadataInstance>(works_pool_ ? t.nr_pus() : INT_MAX / 2, cpu_nodes);
    if (parallel_) {
      plan_ = padata_plan(*pinst_, job_);
    } else {
      plan_ = PadataPlan{};
      plan_.nworks_wanted = 1;
      plan_.nworks = 1;
      plan_.chunk_size = job_.size;
      plan_.nr_chunks = 1;  // the serial loop runs (and takes its lock) even for 0 pages
      plan_.work_nodes = {-1};
    }
    const int n = std::max(plan_.nworks, 1);
    if (placement.policy == Placement::Policy::list) {
      slots_ = m.place(n, placement);
    } else {
      slots_.clear();
      std::vector<int> on_node(size_t(nr_node_ids_), 0);
      for (int i = 0; i < n; ++i) {
        int node = caller_node_;
        if (i > 0 && size_t(i) < plan_.work_nodes.size() && plan_.work_nodes[size_t(i)] >= 0)
          node = plan_.work_nodes[size_t(i)];
        slots_.push_back(m.slot_on_node(i, node, on_node[size_t(node)]++));
      }
    }
    placed_ = true;
    return slots_;
  }

  // mem_map, pageblock bitmaps, zones and pcps of every node (no page contents: backing none), and the folio lists
  // (the workers' and the gigantic path's huge_boot_pages). After place().
  MemoryNeed memory_needed(const Machine& m) const override {
    MemoryConfig cfg;
    cfg.node_pages = node_pages();
    uint64_t frames = 0;
    for (uint64_t p : cfg.node_pages) frames += p;
    return {MemorySystem::bytes_needed(cfg, m.model().nr_pus()) + 2 * pages_ * sizeof(Page*),
            "mem_map of " + std::to_string(frames) + " pages (" + std::to_string(frames >> 8) +
                " MiB of model memory) and the folio lists"};
  }

  void prepare(const RunEnv& env) override {
    if (!placed_ || env.slots.size() != slots_.size())
      throw std::logic_error("hugetlb_boot: prepare() before place(), or the runner changed the worker count");
    MemoryConfig cfg;
    cfg.batch_rule = BatchRule::v6_7;  // the v6.9 kernel's pcp rules
    cfg.check = CheckMode::off;        // v6.4+: no check_new_pages without check_pages_enabled
    cfg.node_pages = node_pages();
    ps_.reset();
    hugetlb_.reset();
    baseline_.clear();
    bootmem_ = 0;
    bootmem_s_ = 0;
    ms_ = std::make_unique<MemorySystem>(env.machine, env.locks, cfg, env.interruption_points());
    for (int n = 0; n < ms_->nr_nodes(); ++n) baseline_.push_back(ms_->free_area_state(n));
    HugetlbConfig hc;
    hc.lock_mode = lock_mode_;
    hc.next_nid = next_nid_;
    hc.hvo_ns = hvo_ns_;
    hugetlb_ = std::make_unique<Hugetlb>(*ms_, env.locks, hc);
    h_ = gigantic_ ? &hugetlb_->gigantic_hstate() : &hugetlb_->default_hstate();
    h_->max_huge_pages = pages_;
    if (gigantic_) {
      const uint64_t t0 = clock_ticks();
      bootmem_ = hugetlb_->hugetlb_gigantic_pages_alloc_boot(*h_, pages_, env.slots[0].model_pu);
      bootmem_s_ = ticks_to_ns(clock_ticks() - t0) * 1e-9;
    }
    workers_ = std::vector<BootWorker>(env.slots.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
      workers_[i].work = int(i);
      workers_[i].cpu = env.slots[i].model_pu;
      if (i < plan_.work_nodes.size()) workers_[i].work_node = plan_.work_nodes[i];
    }
    if (gigantic_) {
      job_.thread_fn = [this](unsigned long start, unsigned long end, void*) {
        // gather_bootmem_prealloc_parallel()
        BootWorker& w = current_worker();
        for (unsigned long nid = start; nid < end; ++nid)
          hugetlb_->gather_bootmem_prealloc_node(int(nid), w.st, [&w] { return w.ctx->stopped(); });
      };
    } else {
      job_.thread_fn = [this](unsigned long start, unsigned long end, void*) {
        BootWorker& w = current_worker();
        w.chunk_lens.push_back(end - start);
        hugetlb_->hugetlb_pages_alloc_boot_node(*h_, start, end, w.cpu, w.st, [&w] { return w.ctx->stopped(); });
      };
    }
    job_.fn_arg = h_;
    if (plan_.nworks >= 2) ps_ = std::make_unique<PadataMtJobState>(env.locks, job_, plan_);
  }

  void work(WorkerCtx& ctx) override {
    BootWorker& w = workers_[size_t(ctx.slot.worker)];
    w.ctx = &ctx;
    const auto stopped = [&ctx] { return ctx.stopped(); };
    auto timed = [&w](auto&& fn) {
      const uint64_t t0 = clock_ticks(), c0 = thread_cpu_ns();
      fn();
      w.busy_ticks += clock_ticks() - t0;
      w.cpu_ns += thread_cpu_ns() - c0;
    };
    if (w.work == 0) {
      // hugetlb_pages_alloc_boot(h) / gather_bootmem_prealloc(): padata_do_multithreaded(&job).
      if (plan_.nworks == 1) {
        // The serial loop, or padata with nworks == 1: thread_fn inline on the whole range.
        timed([&] { job_.thread_fn(job_.start, job_.start + job_.size, job_.fn_arg); });
        w.chunks = 1;
      } else if (plan_.nworks >= 2) {
        for (int i = 1; i < plan_.nworks; ++i) ps_->queue_work(i);
        // Use the current thread, which saves starting a workqueue worker.
        timed([&] { w.chunks = ps_->padata_mt_helper(0); });
        ps_->wait_for_completion(stopped);  // a stopped run may leave helpers that never started
      }
    } else if (ps_ && ps_->wait_until_queued(w.work, stopped)) {
      timed([&] { w.chunks = ps_->padata_mt_helper(w.work); });
    }
    ctx.add_ops(w.st.folios);
  }

  // hugetlb_lock: once per prep_and_add_*_folios call (thread_fn calls for 2 MiB, gather_bootmem_prealloc_node
  // calls = nr_node_ids for gigantic), or once per folio; ps.lock: each work takes it once, plus once more after
  // each chunk.
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult&) const override {
    const auto n = [](uint64_t v) { return std::to_string(v); };
    const uint64_t thread_fn_calls = plan_.nworks == 0 ? 0 : (parallel_ ? plan_.nr_chunks : 1);
    const uint64_t lists = gigantic_ ? (thread_fn_calls ? uint64_t(nr_node_ids_) : 0) : thread_fn_calls;
    const bool per_folio = lock_mode_ == HugetlbLockMode::per_folio;
    const uint64_t hl = per_folio ? h_->nr_huge_pages : lists;
    const std::string hl_text = per_folio
                                    ? "one per folio = " + n(hl)
                                    : (gigantic_ ? "one per gather_bootmem_prealloc_node call = nr_node_ids = "
                                                 : "one per prep_and_add_allocated_folios call = thread_fn calls = ") +
                                          n(hl);
    const uint64_t works = uint64_t(plan_.nworks), chunks = uint64_t(plan_.nr_chunks);
    const uint64_t pl = works >= 2 ? works + chunks : 0;
    const std::string pl_text = works >= 2 ? "nworks + chunks = " + n(works) + " + " + n(chunks) + " = " + n(pl)
                                           : "0: one work runs thread_fn inline, without ps.lock";
    return {{"hugetlb_lock", "hugetlb_lock", hl, hl_text},
            {"padata_lock", "padata_work_lock", pl, pl_text},
            zone_lock_expectation()};
  }

  // zone->lock, from the geometry. Gigantic: 0 (the memblock stand-in ran in prepare(), uncounted, and
  // gather_bootmem_prealloc takes nothing from the buddy allocator). 2 MiB: every folio is an order-9
  // alloc_pages(__GFP_THISNODE) served from the worker's pcp THP list of that node's zone, which rmqueue_bulk refills
  // under zone->lock with nr_pcp_alloc()'s max(batch >> 9, 2) = 2 blocks (mm/page_alloc.c of v6.7-v6.9), so a worker
  // that takes n folios from a node takes refills(n) = ceil(n / 2) zone->locks there (pcp_expect_alloc_then_free).
  // n follows from the chunks it ran: hugetlb_pages_alloc_boot_node's cursor starts at first_online_node on every
  // call, so a chunk of L folios gives node i of m L / m + (i < L % m). No formula (none, with the reason) when an
  // allocation failed, when the cursor is the shared h->next_nid_to_alloc with several workers (its racy
  // round-robin decides the nodes), or when two workers share a model CPU (and so a pcp, whose trylock can fail).
  LockExpectation zone_lock_expectation() const {
    const auto n = [](uint64_t v) { return std::to_string(v); };
    const auto none = [](const std::string& why) {
      return LockExpectation{"zone_lock", "zone->lock", std::nullopt, "no formula: " + why};
    };
    if (gigantic_)
      return LockExpectation{"zone_lock", "zone->lock", 0,
                             "0: gather_bootmem_prealloc takes no page from the buddy allocator"};
    if (h_->nr_huge_pages != pages_) return none("an allocation failed");
    std::set<int> cpus;
    for (const BootWorker& w : workers_) {
      if (w.st.alloc_failed || w.st.node_attempts != w.st.folios) return none("an allocation failed");
      if (!cpus.insert(w.cpu).second) return none("two workers share a model CPU and its pcp");
    }
    if (next_nid_ == NextNid::shared && plan_.nworks > 1)
      return none("the workers share h->next_nid_to_alloc, whose racy round-robin decides the nodes");
    const uint64_t m = uint64_t(mem_nodes_);
    uint64_t total = 0, pairs = 0, odd = 0;
    for (const BootWorker& w : workers_)
      for (uint64_t node = 0; node < m; ++node) {
        uint64_t folios = 0;
        for (unsigned long len : w.chunk_lens) folios += len / m + (node < len % m ? 1 : 0);
        if (!folios) continue;
        const Zone& z = ms_->zone(int(node));
        total += pcp_expect_alloc_then_free(z.pageset_batch, z.pageset_high_min, z.pageset_high_max, true,
                                            HUGETLB_PAGE_ORDER, folios)
                     .refills;
        ++pairs;
        odd += folios % 2;
      }
    // With 2 blocks per refill (pcp->batch > 1) the sum is (folios + pairs with an odd count) / 2.
    const std::string sum = total * 2 == pages_ + odd ? "(" + n(pages_) + " + " + n(odd) + " odd) / 2 = " : "";
    return LockExpectation{"zone_lock", "zone->lock", total,
                           "one rmqueue_bulk per refill of a worker's pcp THP list for a node (nr_pcp_alloc: "
                           "max(batch >> 9, 2) blocks): sum over " +
                               n(pairs) + " (worker, node) pairs of ceil(folios / blocks) = " + sum + n(total) +
                               " for " + n(pages_) + " folios"};
  }

  void finish(const RunEnv& env, RunResult& r) override {
    hstate& h = *h_;
    const HugetlbCheck pool = hugetlb_->check_pool(h);
    if (!pool.ok) throw std::logic_error("hugetlb_boot: " + pool.summary());
    uint64_t folios = 0, chunks = 0, cpu_ns = 0, busy = 0, tails = 0, attempts = 0;
    for (const BootWorker& w : workers_) {
      folios += w.st.folios;
      chunks += w.chunks;
      cpu_ns += w.cpu_ns;
      busy += w.busy_ticks;
      tails += w.st.tails_written;
      attempts += w.st.node_attempts;
    }
    if (folios != h.nr_huge_pages)
      throw std::logic_error("hugetlb_boot: workers report " + std::to_string(folios) +
                             " folios but nr_huge_pages is " + std::to_string(h.nr_huge_pages));
    const uint64_t allocated = h.nr_huge_pages;
    for (size_t i = 0; i < r.workers.size() && i < workers_.size(); ++i) {
      const BootWorker& w = workers_[i];
      auto& m = r.workers[i].metrics;
      m.emplace_back("work_node", double(w.work_node));
      m.emplace_back("folios", double(w.st.folios));
      m.emplace_back("chunks", double(w.chunks));
      m.emplace_back("busy_s", ticks_to_ns(w.busy_ticks) * 1e-9);
      m.emplace_back("cpu_s", double(w.cpu_ns) * 1e-9);
      m.emplace_back("cpu_us_per_folio", w.st.folios ? double(w.cpu_ns) * 1e-3 / double(w.st.folios) : 0.0);
      m.emplace_back("alloc_failed", double(w.st.alloc_failed));
      if (gigantic_) m.emplace_back("tails_written", double(w.st.tails_written));
    }

    const LockStatRow* zone_row = r.lock_row("zone->lock");
    const int64_t zl = zone_row ? int64_t(zone_row->acquisitions) : 0;
    const uint64_t thread_fn_calls = plan_.nworks == 0 ? 0 : (parallel_ ? plan_.nr_chunks : 1);
    const int nworks = plan_.nworks;

    std::string per_node, helper_nodes;
    for (int n = 0; n < nr_node_ids_; ++n) per_node += (n ? "," : "") + std::to_string(h.nr_huge_pages_node[size_t(n)]);
    for (size_t i = 1; i < plan_.work_nodes.size(); ++i)
      helper_nodes += (i > 1 ? "," : "") + std::to_string(plan_.work_nodes[i]);

    const int64_t pool_digest = [&] {  // the pool's folios, node by node in free-list order (63 bits)
      uint64_t d = 0;
      for (int n = 0; n < ms_->nr_nodes(); ++n) {
        if (h.hugepage_freelists[size_t(n)].empty()) continue;  // (a node without memory has no zone)
        const Zone& z = ms_->zone(n);
        for (uint32_t i = h.hugepage_freelists[size_t(n)].head(); i != kNoPage; i = z.zone_mem_map[i].lru.next) {
          env.interruption_point();
          d = digest_step(d, z.zone_start_pfn + i);
        }
      }
      return int64_t(d >> 1);
    }();

    // ---- teardown (untimed): every page goes back, and the buddy lists are what they were ----
    const int cpu0 = workers_.empty() ? 0 : workers_[0].cpu;
    const unsigned long freed = hugetlb_->free_pool(h, cpu0);
    if (freed != allocated)
      throw std::logic_error("hugetlb_boot: freed " + std::to_string(freed) + " of " + std::to_string(allocated) +
                             " folios");
    ms_->drain_all_pages();
    const CheckReport rep = ms_->check();
    if (!rep.ok || rep.allocated_pages != 0 || rep.pcp_pages != 0)
      throw std::logic_error("hugetlb_boot: memory not returned after teardown: " + rep.summary());
    for (int n = 0; n < ms_->nr_nodes(); ++n)
      if (!(ms_->free_area_state(n) == baseline_[size_t(n)]))
        throw std::logic_error("hugetlb_boot: node " + std::to_string(n) + "'s free_area differs after teardown:\n" +
                               ms_->free_area_state(n).to_string() + "\nbefore the run:\n" +
                               baseline_[size_t(n)].to_string());

    auto& s = r.summary;
    s.emplace_back("allocated", int64_t(allocated));
    s.emplace_back("pool_digest", pool_digest);
    s.emplace_back("requested", int64_t(pages_));
    s.emplace_back("exhausted", allocated < pages_);
    s.emplace_back("nworks", int64_t(nworks));
    s.emplace_back("chunk_size", int64_t(plan_.chunk_size));
    s.emplace_back("chunks", int64_t(parallel_ ? plan_.nr_chunks : thread_fn_calls));
    s.emplace_back("chunks_run", int64_t(chunks));
    s.emplace_back("max_threads", int64_t(job_.max_threads));
    s.emplace_back("min_chunk", int64_t(job_.min_chunk));
    s.emplace_back("nworks_wanted", int64_t(plan_.nworks_wanted));
    s.emplace_back("nodes", int64_t(mem_nodes_));
    s.emplace_back("nr_node_ids", int64_t(nr_node_ids_));
    s.emplace_back("helper_nodes", helper_nodes);
    s.emplace_back("folio_order", int64_t(h.order));
    s.emplace_back("folio_kib", int64_t((PAGE_SIZE << h.order) >> 10));
    s.emplace_back("hugetlb_lock_mode", std::string(to_string(lock_mode_)));
    s.emplace_back("zone_lock_per_folio", r.lockstat_on && allocated ? double(zl) / double(allocated) : NAN);
    s.emplace_back("node_attempts", int64_t(attempts));
    // The seed's per-folio thread time: threads x wall / folios; and what the threads really spent on the CPU.
    s.emplace_back("thread_us_per_folio",
                   allocated ? double(std::max(nworks, 1)) * r.elapsed_s * 1e6 / double(allocated) : 0.0);
    s.emplace_back("cpu_us_per_folio", allocated ? double(cpu_ns) * 1e-3 / double(allocated) : 0.0);
    s.emplace_back("busy_us_per_folio", allocated ? ticks_to_ns(busy) * 1e-3 / double(allocated) : 0.0);
    s.emplace_back("per_node_folios", per_node);
    if (gigantic_) {
      s.emplace_back("bootmem_folios", int64_t(bootmem_));
      s.emplace_back("bootmem_s", bootmem_s_);
      s.emplace_back("tails_written", int64_t(tails));
    }
    uint64_t frames = 0;
    for (int n = 0; n < ms_->nr_nodes(); ++n) frames += ms_->node_present_pages(n);
    s.emplace_back("model_mib", int64_t(frames >> 8));
    s.emplace_back("pool_check", pool.summary());
    s.emplace_back("check", rep.summary());
    if (allocated < pages_)
      s.emplace_back("warning", "HugeTLB: allocating " + std::to_string(pages_) + " of page size " +
                                    std::to_string((PAGE_SIZE << h.order) >> 10) + " KiB failed.  Only allocated " +
                                    std::to_string(allocated) + " hugepages.");
  }

 private:
  // The worker running thread_fn: what the kernel's thread_fn finds in `current`.
  BootWorker& current_worker() { return workers_[size_t(WorkerCtx::current()->slot.worker)]; }

  // Frames per model node: exactly the folios the pool will put there, plus the high watermark and pcp slack.
  std::vector<uint64_t> node_pages() const {
    const uint64_t folio_pages = uint64_t(1) << (gigantic_ ? HUGETLB_GIGANTIC_ORDER : HUGETLB_PAGE_ORDER);
    const uint64_t m = uint64_t(mem_nodes_);
    std::vector<uint64_t> pages(size_t(nr_node_ids_), 0);
    if (node_mib_) {
      for (int n = 0; n < mem_nodes_; ++n) pages[size_t(n)] = roundup(node_mib_ << 8, pageblock_nr_pages);
      return pages;
    }
    std::vector<uint64_t> demand(size_t(mem_nodes_), 0);
    auto round_robin = [&](uint64_t len, uint64_t extra) {
      for (uint64_t i = 0; i < m; ++i) demand[i] += len / m + (i < len % m ? 1 : 0) + extra;
    };
    if (gigantic_ || next_nid_ == NextNid::shared) {
      // One round-robin over every folio; a shared cursor is updated racily, so allow a folio per worker more.
      round_robin(pages_, gigantic_ ? 0 : uint64_t(std::max(plan_.nworks, 1)));
    } else if (plan_.nworks >= 2) {
      for (const auto& [s, e] : padata_chunks(job_.start, job_.size, plan_.chunk_size)) round_robin(e - s, 0);
    } else {
      round_robin(pages_, 0);  // each chunk's local cursor starts at first_online_node
    }
    MemoryConfig cfg;
    cfg.batch_rule = BatchRule::v6_7;
    cfg.node_pages.assign(size_t(nr_node_ids_), 0);
    // Pages a worker's pcp may hold per zone (a refill pulls two order-9 blocks), for every worker, plus one.
    const uint64_t pcp_slack = (2 * uint64_t(slots_.size()) + 2) << HUGETLB_PAGE_ORDER;
    std::vector<uint64_t> headroom(size_t(mem_nodes_), MAX_ORDER_NR_PAGES);
    for (int iter = 0; iter < 4; ++iter) {
      for (int n = 0; n < mem_nodes_; ++n)
        cfg.node_pages[size_t(n)] = demand[size_t(n)] * folio_pages + headroom[size_t(n)];
      for (int n = 0; n < mem_nodes_; ++n) {
        const auto w = MemorySystem::watermarks(cfg, n);
        headroom[size_t(n)] = std::max(headroom[size_t(n)], roundup(w[WMARK_HIGH] + pcp_slack, MAX_ORDER_NR_PAGES));
      }
    }
    // Gigantic: whole GiB per node, so that every node starts 1 GiB-aligned and holds its folios' aligned ranges.
    const uint64_t unit = gigantic_ ? folio_pages : 1;
    for (int n = 0; n < mem_nodes_; ++n)
      pages[size_t(n)] = roundup(demand[size_t(n)] * folio_pages + headroom[size_t(n)], unit);
    return pages;
  }

  // parameters
  const uint64_t pages_;
  const bool parallel_;
  const int multiplier_;
  const bool numa_aware_;
  const bool gigantic_;
  const std::string lock_mode_name_;
  HugetlbLockMode lock_mode_;
  const NextNid next_nid_;
  const uint64_t hvo_ns_;
  const int nodes_param_;
  const uint64_t node_mib_;
  const bool works_pool_;
  // layout, from place()
  mutable bool placed_ = false;
  mutable int nr_node_ids_ = 1, mem_nodes_ = 1, caller_node_ = 0;
  mutable padata_mt_job job_;
  mutable PadataPlan plan_;
  mutable std::unique_ptr<PadataInstance> pinst_;
  mutable std::vector<Slot> slots_;
  // run state (declared in destruction order: the pool before the memory it lives in)
  std::unique_ptr<MemorySystem> ms_;
  std::unique_ptr<Hugetlb> hugetlb_;
  std::unique_ptr<PadataMtJobState> ps_;
  hstate* h_ = nullptr;
  std::vector<FreeAreaState> baseline_;
  std::vector<BootWorker> workers_;
  unsigned long bootmem_ = 0;
  double bootmem_s_ = 0;
};

}  // namespace

ScenarioDef hugetlb_boot_scenario() {
  ScenarioDef d;
  d.name = "hugetlb_boot";
  d.doc =
      "boot-time hugetlb pool init (hugetlb_pages_alloc_boot, v6.9): serial, or padata_do_multithreaded with "
      "max_threads = multiplier x nodes and min_chunk = pages / nodes / multiplier; one runner worker per padata "
      "work (worker 0 is the caller); summary: elapsed_s (the pool's wall time), allocated, nworks, chunk_size";
  d.params = {
      ParamSpec::integer("pages", 4096, 0, int64_t(1) << 26,
                         "folios to allocate (h->max_huge_pages): 2 MiB each, or 1 GiB with gigantic"),
      ParamSpec::boolean("parallel", true, "padata_do_multithreaded (the series); False: the pre-series serial loop"),
      ParamSpec::integer("multiplier", 2, 1, 64,
                         "k: max_threads = k x nodes, min_chunk = pages / nodes / k (the merged kernel: 2)"),
      ParamSpec::boolean("numa_aware", true,
                         "padata places helper i on node next_node_in(last_used_nid) (patch 4); False: all helpers "
                         "on the caller's node"),
      ParamSpec::choice("hugetlb_lock", "auto", {"auto", "per_worker", "per_folio"},
                        "hugetlb_lock once per prep_and_add list (per_worker) or once per folio (per_folio); auto: "
                        "as merged (per_worker for 2 MiB, per_folio for gigantic)"),
      ParamSpec::choice("next_nid", "local", kNextNidNames.list(),
                        "alloc_pool_huge_folio's node cursor: worker-local (patch 3) or the shared "
                        "h->next_nid_to_alloc (before it)"),
      ParamSpec::boolean("gigantic", false,
                         "the gigantic path: 1 GiB folios (order 18, PUD_ORDER on x86-64) from a memblock stand-in "
                         "(untimed), then gather_bootmem_prealloc over the nodes, initialising all 262,144 struct "
                         "pages of each folio (64 with HVO); the mem_map is full size, 16 MiB of host memory per "
                         "folio"),
      ParamSpec::integer("hvo_ns", 0, 0, 10000000,
                         "HVO cost per folio in ns (hugetlb_vmemmap_optimize_folios); 0: HVO off"),
      ParamSpec::integer("nodes", 0, 0, 1024,
                         "memory nodes (num_node_state(N_MEMORY)): the first `nodes` of the model topology; 0: all"),
      ParamSpec::integer("node_mib", 0, 0, int64_t(1) << 30,
                         "MiB per memory node; 0: what the pool needs plus watermarks (smaller: the pool runs out, "
                         "which is reported, not an error)"),
      ParamSpec::boolean("works_pool", false,
                         "cap helpers at padata's pool of num_possible_cpus() works (the model's PUs), as the kernel "
                         "does; off by default since the seed's machines never hit it"),
  };
  d.make = [](const Params& p) { return std::make_unique<HugetlbBoot>(p); };
  d.size = size_is("pages");
  d.kernel =
      "v6.9 (Gang Li's v6 series as merged: mm/hugetlb.c hugetlb_pages_alloc_boot, gather_bootmem_prealloc; "
      "kernel/padata.c padata_do_multithreaded); pcp batch/high: mm/page_alloc.c nr_pcp_alloc/nr_pcp_high/"
      "nr_pcp_free of v6.7, unchanged for allocation through v6.9 (BatchRule::v6_7); check: check_new_pages only "
      "with is_check_pages_enabled() since v6.4, off by default (CheckMode::off)";
  d.small = {{"pages", int64_t(64)}, {"multiplier", int64_t(1)}};
  return d;
}

}  // namespace alloclab
