// pcp_refill: the seed "mm: reduce lock contention of pcp buffer refill" (Halbuer, 2023), as his kernel module ran
// it: `threads` workers, each on its own model CPU, allocate `count` blocks of `order` from one node with
// alloc_pages_node() (timed, no frees in between), then free them (untimed). The switch is `check`:
// in_lock (v6.2: check_pcp_refill() reads every struct page of every block a refill pulls, inside zone->lock),
// after_unlock (the patch: the same reads after the unlock) and off (v6.4+ default). `batch_rule` picks the v6.2 or
// v6.7 refill sizes. Model: mm/page_alloc.c of v6.2 through alloclab::mm::MemorySystem (see memory_system.hpp for
// what it leaves out); the node's memory is sized so that no allocation ever meets a watermark.
//
// Per worker: ns per allocation (elapsed / allocations, and per-call mean, p50, p99), its pcp's refills, bulk frees
// and struct pages checked under zone->lock. Summary: mean ns per allocation, refills, pages pulled,
// pages_checked_under_lock (exact: (1 << order) x blocks pulled with in_lock, 0 otherwise), hold per refill.
//
// The exact-count promise. Every worker owns its pcp (one model CPU each, so pcp_spin_trylock never fails), starts
// with it empty, and the free pages never come near a watermark, so zone->lock is taken exactly once per refill and
// once per bulk return of the free phase and nowhere else:
//
//   zone->lock acquisitions = threads x (R + F)                                  (orders 0-3 and 9, on the pcp)
//     R = refills while allocating count blocks. v6.2: R = ceil(count / B), B = max(pcp->batch >> order, 2)
//         (pcp->batch = 63 on a zone of 1 GiB or more, so B = 63 at order 0 and 2 at order 9). v6.7: B follows
//         nr_pcp_alloc() (order 0: batch << alloc_factor, growing by one step per refill up to << 5, capped by
//         high - count - batch).
//     F = free_pcppages_bulk() calls while freeing them: each free that brings pcp->count to pcp->high returns
//         nr_pcp_free() pages (v6.2: batch << free_factor clamped to [batch, high - batch]; v6.7: free_count
//         clamped the same way). With high < 512, every order-9 free is one bulk return: F = count.
//   zone->lock acquisitions = threads x 2 x count                                (orders 4-8 and 10: rmqueue_buddy
//                                                                                 and free_one_page, one each)
//   pcp->lock acquisitions  = threads x 2 x count on the pcp orders, 0 otherwise.
// lock_expectations() computes R and F by walking the batch rules for one pcp (pcp_expect_alloc_then_free) and gives
// the formula with its numbers (`zone_lock_formula`); the runner raises if lock_stat disagrees. The final drain and
// check() run on the controlling thread, which lock_stat does not count.
#include <algorithm>
#include <stdexcept>

#include "alloclab/mm/memory_system.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace alloclab::mm;

class PcpRefill final : public Scenario {
 public:
  explicit PcpRefill(const Params& p)
      : threads_(int(p.i("threads"))),
        order_(unsigned(p.i("order"))),
        count_(uint64_t(p.i("count"))),
        alloc_(p, "; 0 sizes it for you") {}

  int nr_workers() const override { return threads_; }

  std::vector<Slot> place(const Machine& m, const Placement& p) const override {
    std::vector<Slot> slots = m.place(threads_, p);
    std::vector<bool> used(size_t(m.model().nr_pus()), false);
    for (const Slot& s : slots) {
      if (used[size_t(s.model_pu)])
        throw std::invalid_argument("threads: " + std::to_string(threads_) +
                                    " workers need as many model CPUs (each owns a pcp, as a kernel "
                                    "thread owns its CPU) but the placement puts two on model PU " +
                                    std::to_string(s.model_pu) + " of a model with " +
                                    std::to_string(m.model().nr_pus()) +
                                    " PUs; model more CPUs than the host has with a synthetic topology, e.g. "
                                    "Topology.synthetic('node:1 core:" +
                                    std::to_string(threads_) + " pu:1') (the run is then oversubscribed)");
      used[size_t(s.model_pu)] = true;
    }
    return slots;
  }

  // The node's frames (its mem_map and pcps) and every worker's array of blocks.
  MemoryNeed memory_needed(const Machine& m) const override {
    const MemoryConfig cfg = memory_config(m);
    const uint64_t mem = MemorySystem::bytes_needed(cfg, m.model().nr_pus());
    const uint64_t held = uint64_t(threads_) * count_ * sizeof(Page*);
    return {mem + held, "node of " + std::to_string(cfg.node_pages[size_t(alloc_.node)]) + " pages " +
                            format_bytes(mem) + " + the workers' block arrays " + format_bytes(held)};
  }

  void prepare(const RunEnv& env) override {
    const MemoryConfig cfg = memory_config(env.machine);
    node_pages_used_ = cfg.node_pages[size_t(alloc_.node)];
    ms_ = std::make_unique<MemorySystem>(env.machine, env.locks, cfg, env.interruption_points());
    initial_ = ms_->free_area_state(alloc_.node);
    held_.assign(size_t(threads_), {});
    for (auto& h : held_) h.reserve(count_);
    cpus_.clear();
    for (const Slot& s : env.slots) cpus_.push_back(s.model_pu);
  }

  // Frees worker w's blocks in the order it got them, on its CPU's pcp, until stop() says to leave the rest.
  template <class Stop>
  void free_held(size_t w, const Stop& stop) {
    release_held(
        held_[w], [&](Page* page) { ms_->free_pages(cpus_[w], page, order_); }, stop);
  }

  void work(WorkerCtx& ctx) override {
    const int cpu = ctx.slot.model_pu;
    std::vector<Page*>& held = held_[size_t(ctx.slot.worker)];
    uint64_t failed = 0;
    for (uint64_t i = 0; i < count_ && !ctx.stopped(); ++i) {
      const uint64_t t0 = clock_ticks();
      Page* page = ms_->alloc_pages(cpu, alloc_.node, order_, alloc_.gfp);
      const uint64_t t1 = clock_ticks();
      if (!page) {
        ++failed;
        break;
      }
      held.push_back(page);
      ctx.record_alloc(ms_->page_to_pfn(page));
      ctx.record_latency_ns(uint64_t(ticks_to_ns(t1 - t0)));
      ctx.add_ops();
    }
    ctx.end_timed();
    free_held(size_t(ctx.slot.worker), [&ctx] { return ctx.stopped(); });  // a stopped run leaves the rest to finish
    ctx.metric("alloc_failed", double(failed));
  }

  void finish(const RunEnv& env, RunResult& r) override {
    const MemoryStats st = ms_->stats();  // before the drain: exactly what the workers did
    // Per worker: its own pcp's counts.
    uint64_t allocations = 0, failed = 0;
    double ns_sum = 0;
    for (size_t w = 0; w < r.workers.size(); ++w) {
      WorkerRow& row = r.workers[w];
      const PcpStats& ps = ms_->pcp(cpus_[w], alloc_.node).stats;
      const double ns = row.ops ? row.elapsed_s * 1e9 / double(row.ops) : 0.0;
      ns_sum += ns;
      allocations += row.ops;
      for (const auto& [k, v] : row.metrics)
        if (k == "alloc_failed") failed += uint64_t(v);
      row.metrics.emplace_back("ns_per_alloc", ns);
      row.metrics.emplace_back("refills", double(ps.refills));
      row.metrics.emplace_back("bulk_frees", double(ps.bulk_frees));
      row.metrics.emplace_back("pages_checked_under_lock", double(ps.pages_checked_under_lock));
    }
    // Memory returns to its initial state (the blocks of a stopped run's workers are freed here, outside lock_stat).
    for (size_t w = 0; w < held_.size(); ++w) free_held(w, teardown_stop(env));
    ms_->drain_all_pages();
    const CheckReport rep = ms_->check();
    if (!rep.ok) throw std::logic_error("pcp_refill: check() failed after the run: " + rep.summary());
    if (rep.allocated_pages != 0)
      throw std::logic_error("pcp_refill: " + std::to_string(rep.allocated_pages) +
                             " pages still allocated after the run");
    const FreeAreaState after = ms_->free_area_state(alloc_.node);
    const bool same_types = after == initial_;
    for (unsigned o = 0; o < NR_PAGE_ORDERS && !same_types; ++o) {  // stealing may move blocks between types
      uint64_t a = 0, b = 0;
      for (int mt = 0; mt < MIGRATE_TYPES; ++mt) a += after.nr_free[o][mt], b += initial_.nr_free[o][mt];
      if (a != b)
        throw std::logic_error("pcp_refill: free_area did not return to its initial state:\nbefore\n" +
                               initial_.to_string() + "after\n" + after.to_string());
    }

    // The model's own count of zone->lock against the formula (lock_stat's is the runner's check).
    const Formula f = formula();
    if (!r.stopped && failed == 0 && allocations == uint64_t(threads_) * count_ &&
        st.zone.lock_acquisitions != f.zone_lock)
      throw std::logic_error("pcp_refill: the model took zone->lock " + std::to_string(st.zone.lock_acquisitions) +
                             " times, the formula says " + f.text);
    const PerCpuPages& p0 = ms_->pcp(cpus_[0], alloc_.node);

    auto& s = r.summary;
    s.emplace_back("ns_per_alloc", allocations ? ns_sum / double(r.workers.size()) : 0.0);
    double p50 = 0, p99 = 0;
    for (const auto& w : r.workers) p50 += w.lat_p50_ns, p99 += w.lat_p99_ns;
    s.emplace_back("ns_per_alloc_p50", p50 / double(r.workers.size()));
    s.emplace_back("ns_per_alloc_p99", p99 / double(r.workers.size()));
    s.emplace_back("allocations", int64_t(allocations));
    s.emplace_back("alloc_failed", int64_t(failed));
    s.emplace_back("refills", int64_t(st.zone.rmqueue_bulk));
    s.emplace_back("pages_pulled", int64_t(st.zone.rmqueue_bulk_blocks));
    s.emplace_back("bulk_frees", int64_t(st.zone.free_pcppages_bulk));
    s.emplace_back("pages_checked_under_lock", int64_t(st.zone.pages_checked_under_lock));
    s.emplace_back("pages_checked_after_unlock", int64_t(st.pcp.pages_checked_after_unlock));
    s.emplace_back("refill_hold_ns",
                   st.zone.rmqueue_bulk ? ticks_to_ns(st.zone.rmqueue_bulk_ticks) / double(st.zone.rmqueue_bulk) : 0.0);
    s.emplace_back("zone_lock_contentions", r.lock_count("zone->lock", &LockStatRow::contentions));
    s.emplace_back("zone_lock_wait_avg_ns", r.lock_figure("zone->lock", &LockStatRow::wait_avg_ns));
    s.emplace_back("zone_lock_hold_avg_ns", r.lock_figure("zone->lock", &LockStatRow::hold_avg_ns));
    s.emplace_back("pcp_batch", int64_t(p0.batch));
    s.emplace_back("pcp_high", int64_t(p0.high_min));
    s.emplace_back("node_pages", int64_t(node_pages_used_));
    s.emplace_back("free_area_same_migratetypes", same_types);
    s.emplace_back("check", rep.summary());
    ms_.reset();
  }

  // Exact when every worker allocated its count (see the file's header).
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult& r) const override {
    uint64_t allocations = 0;
    for (const WorkerRow& w : r.workers) allocations += w.ops;
    if (allocations != uint64_t(threads_) * count_) return {};  // an allocation failed: no formula
    const Formula f = formula();
    return {{"zone_lock", "zone->lock", f.zone_lock, f.text}, {"pcp_lock", "pcp->lock", f.pcp_lock, f.pcp_text}};
  }

 private:
  // Node `node` sized (node_pages=0) or checked: every worker's blocks, plus what its pcp can hold at most, must fit
  // above the high watermark (so no allocation meets a watermark and v6.7 never sees ZONE_BELOW_HIGH). Throws
  // std::invalid_argument naming node or count.
  MemoryConfig memory_config(const Machine& m) const {
    const int nodes = m.model().nr_nodes();
    if (alloc_.node >= nodes)
      throw std::invalid_argument("node: " + std::to_string(alloc_.node) + " is out of range (allowed: 0.." +
                                  std::to_string(nodes - 1) + " for this model topology)");
    const uint64_t need = uint64_t(threads_) * (count_ << order_);
    auto cfg_for = [&](uint64_t pages) {
      MemoryConfig c;
      c.node_pages.assign(size_t(nodes), 0);
      c.node_pages[size_t(alloc_.node)] = pages;
      alloc_.configure(c);
      return c;
    };
    auto slack = [&](uint64_t pages) {  // pcp pages held beyond the worker's own blocks, all workers
      const int batch = alloc_.pcp_batch ? alloc_.pcp_batch : std::max(1, zone_batchsize(pages));
      const uint64_t per = alloc_.rule == BatchRule::v6_7 && order_ == 0
                               ? uint64_t(batch) << CONFIG_PCP_BATCH_SCALE_MAX
                               : uint64_t(std::max(batch > 1 ? batch >> order_ : batch, 2)) << order_;
      return uint64_t(threads_) * (per + (uint64_t(1) << order_));
    };
    auto fits = [&](uint64_t pages) {
      const auto w = MemorySystem::watermarks(cfg_for(pages), alloc_.node);
      return pages > w[WMARK_HIGH] + need + slack(pages) + MAX_ORDER_NR_PAGES;
    };
    uint64_t pages = alloc_.node_pages;
    if (pages == 0) {
      pages = std::max<uint64_t>(uint64_t(1) << 18, (need + MAX_ORDER_NR_PAGES - 1) & ~(MAX_ORDER_NR_PAGES - 1));
      while (!fits(pages)) pages += std::max<uint64_t>(pages / 16, MAX_ORDER_NR_PAGES) & ~(MAX_ORDER_NR_PAGES - 1);
    } else if (!fits(pages)) {
      const auto w = MemorySystem::watermarks(cfg_for(pages), alloc_.node);
      throw std::invalid_argument("count: " + std::to_string(threads_) + " threads x " + std::to_string(count_) +
                                  " blocks of order " + std::to_string(order_) + " need " + std::to_string(need) +
                                  " pages plus " + std::to_string(slack(pages)) +
                                  " for the pcp lists above the high watermark (" + std::to_string(w[WMARK_HIGH]) +
                                  " pages), more than node_pages=" + std::to_string(pages) +
                                  " holds; lower count or raise node_pages (0 sizes it for you)");
    }
    return cfg_for(pages);
  }

  // The lock counts of a run in which every worker allocated `count` blocks and freed them.
  struct Formula {
    uint64_t zone_lock, pcp_lock;
    std::string text, pcp_text;
  };
  Formula formula() const {
    const bool on_pcp = pcp_allowed_order(order_);
    const PerCpuPages& p0 = ms_->pcp(cpus_[0], alloc_.node);
    const PcpExpect e =
        pcp_expect_alloc_then_free(p0.batch, p0.high_min, p0.high_max, alloc_.rule == BatchRule::v6_7, order_, count_);
    const uint64_t T = uint64_t(threads_);
    const auto n = [](uint64_t v) { return std::to_string(v); };
    Formula f;
    f.zone_lock = T * (on_pcp ? e.refills + e.bulk_frees : 2 * count_);
    f.text = on_pcp ? "threads x (refills + bulk_frees) = " + n(T) + " x (" + n(e.refills) + " + " + n(e.bulk_frees) +
                          ") = " + n(f.zone_lock)
                    : "threads x 2 x count = " + n(T) + " x 2 x " + n(count_) + " = " + n(f.zone_lock);
    f.pcp_lock = on_pcp ? T * 2 * count_ : 0;
    f.pcp_text = on_pcp ? "threads x 2 x count = " + n(T) + " x 2 x " + n(count_) + " = " + n(f.pcp_lock)
                        : "0: order " + n(order_) + " bypasses the pcp lists";
    return f;
  }

  int threads_;
  unsigned order_;
  uint64_t count_;
  PageAllocParams alloc_;
  uint64_t node_pages_used_ = 0;
  std::unique_ptr<MemorySystem> ms_;
  FreeAreaState initial_;
  std::vector<std::vector<Page*>> held_;
  std::vector<int> cpus_;
};

}  // namespace

ScenarioDef pcp_refill_scenario() {
  return {"pcp_refill",
          "the pcp-refill seed (Halbuer 2023): workers each allocate `count` blocks of `order` from one node through "
          "their per-CPU lists (timed), then free them; check_pcp_refill inside zone->lock (v6.2), after it (the "
          "patch) or off (v6.4+); exact zone->lock counts",
          {
              threads_param(2, "workers, one model CPU (and pcp) each; more than host PUs: oversubscribed"),
              ParamSpec::integer("order", 9, 0, MAX_PAGE_ORDER,
                                 "block order (0 = 4 KiB, 9 = 2 MiB THP; the pcp caches orders 0-3 and 9)"),
              ParamSpec::integer("count", 1024, 1, int64_t(1) << 30, "blocks each worker allocates, then frees"),
              ParamSpec::choice("check", "in_lock", v6_check_mode_names(),
                                "check_pcp_refill: in_lock = v6.2, after_unlock = the patch, off = v6.4+"),
              ParamSpec::choice("batch_rule", "v6.2", v6_batch_rule_names(),
                                "pcp refill size: v6.2 = max(batch >> order, 2); v6.7 = nr_pcp_alloc (alloc_factor)"),
              ParamSpec::integer("node_pages", 0, 0, int64_t(kNoPage) - int64_t(pageblock_nr_pages),
                                 "4 KiB frames on the node (multiple of 512); 0 = just enough, at least 1 GiB"),
              ParamSpec::integer("pcp_batch", 0, 0, 65536, "pcp->batch; 0 = zone_batchsize() (63 from 1 GiB up)"),
              ParamSpec::integer("node", 0, 0, MAX_NUMNODES - 1, "the model node allocated from (alloc_pages_node)"),
              ParamSpec::choice("gfp", "movable", {"movable", "kernel"},
                                "GFP_HIGHUSER_MOVABLE, or GFP_KERNEL (unmovable: steals movable pageblocks)"),
          },
          [](const Params& p) { return std::make_unique<PcpRefill>(p); },
          size_is("count"),
          {{"threads", int64_t(2)}, {"count", int64_t(256)}},
          "v6.2 (the seed's base): pcp rules and check_pcp_refill inside zone->lock; check=after_unlock is the patch"};
}

}  // namespace alloclab
