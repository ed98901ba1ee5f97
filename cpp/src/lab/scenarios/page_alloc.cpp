// page_alloc: the page-frame allocator benchmarks of LLFree (Wrenger et al., USENIX ATC'23) on the model of the
// Linux buddy allocator (alloclab::mm::MemorySystem, mm/page_alloc.c of v6.2 with the v6.7 pcp rules selectable).
// Every worker runs on its own model CPU and allocates blocks of `order` from `node` (-1: its own node, as
// alloc_pages() does):
//   bulk    allocate its share of the node's memory (`share` x the pages above the high watermark, split between the
//           node's workers), then free all of it; both phases timed, reported separately (LLFree's "bulk");
//   repeat  `iterations` times: allocate one block and free it again at once (LLFree's "repeat": the pcp hit path);
//   rand    allocate its share (untimed in the figures), then `iterations` times free a random one of its blocks
//           and allocate a replacement (LLFree's "rand"), then free everything.
// Per worker: ns per allocation and per free (the timed phases), failed allocations. Summary: the means over the
// workers, zone->lock acquisitions per 1000 allocations, the share of allocations served from the pcp lists, refills,
// bulk frees, pageblock steals. After the run every pcp is drained and check() must find every page free again.
// Unlike pcp_refill this scenario promises no exact lock counts: `rand` frees in random order, so pcp->high is
// crossed at times that depend on the seed (fixed by the seed, but with no closed form).
// Leaves out: LLFree's own allocator (only the Linux model is measured), huge-page (order 9/18) "frames" beyond
// what `order` gives, reclaim (the shares stay above the high watermark).
#include <algorithm>
#include <stdexcept>

#include "alloclab/mm/memory_system.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace alloclab::mm;

enum class Pattern { bulk, repeat, rand };
constexpr EnumNames<Pattern, 3> kPatternNames{
    {{{Pattern::bulk, "bulk"}, {Pattern::repeat, "repeat"}, {Pattern::rand, "rand"}}}};

class PageAlloc final : public Scenario {
 public:
  explicit PageAlloc(const Params& p)
      : threads_(int(p.i("threads"))),
        pattern_(kPatternNames.parse(p.s("pattern"), "pattern")),
        order_(unsigned(p.i("order"))),
        share_(p.f("share")),
        iterations_(uint64_t(p.i("iterations"))),
        alloc_(p, "") {}

  int nr_workers() const override { return threads_; }

  // Every node's frames, and the workers' arrays of blocks: at most `share` of every node's pages.
  MemoryNeed memory_needed(const Machine& m) const override {
    const MemoryConfig cfg = memory_config(m);
    const uint64_t mem = MemorySystem::bytes_needed(cfg, m.model().nr_pus());
    const uint64_t held =
        pattern_ == Pattern::repeat
            ? 0
            : uint64_t(share_ * double(alloc_.node_pages)) * uint64_t(m.model().nr_nodes()) * sizeof(Page*) >> order_;
    return {mem + held, std::to_string(m.model().nr_nodes()) + " node(s) of " + std::to_string(alloc_.node_pages) +
                            " pages " + format_bytes(mem) + " + the workers' block arrays " + format_bytes(held)};
  }

  void prepare(const RunEnv& env) override {
    const int nodes = env.machine.model().nr_nodes();
    ms_ = std::make_unique<MemorySystem>(env.machine, env.locks, memory_config(env.machine), env.interruption_points());
    // Each worker's share of its target node's memory above the high watermark.
    std::vector<int> on_node(size_t(nodes), 0);
    nid_.clear();
    cpu_.clear();
    for (const Slot& s : env.slots) {
      const int nid = alloc_.node < 0 ? s.model_node : alloc_.node;
      nid_.push_back(nid);
      cpu_.push_back(s.model_pu);
      on_node[size_t(nid)]++;
    }
    blocks_.clear();
    for (size_t w = 0; w < env.slots.size(); ++w) {
      const Zone& z = ms_->zone(nid_[w]);
      const uint64_t above = z.managed_pages() > z.high_wmark_pages() ? z.managed_pages() - z.high_wmark_pages() : 0;
      const uint64_t n = uint64_t(share_ * double(above) / double(on_node[size_t(nid_[w])])) >> order_;
      if (pattern_ != Pattern::repeat && n == 0)
        throw std::invalid_argument("share: " + std::to_string(share_) + " of node " + std::to_string(nid_[w]) + "'s " +
                                    std::to_string(above) + " pages above the high watermark, split between " +
                                    std::to_string(on_node[size_t(nid_[w])]) + " workers, is not one block of order " +
                                    std::to_string(order_) + "; raise share or node_pages");
      blocks_.push_back(pattern_ == Pattern::repeat ? 1 : n);
    }
    for (const Zone* z : zones()) initial_.push_back(ms_->free_area_state(z->node));
    held_.assign(size_t(threads_), {});
    for (size_t w = 0; w < held_.size(); ++w) held_[w].reserve(blocks_[w]);
  }

  void work(WorkerCtx& ctx) override {
    const size_t w = size_t(ctx.slot.worker);
    const int cpu = cpu_[w], nid = nid_[w];
    std::vector<Page*>& held = held_[w];
    uint64_t failed = 0, allocs = 0, frees = 0, alloc_ticks = 0, free_ticks = 0;
    auto alloc_one = [&]() -> Page* {
      const uint64_t t0 = clock_ticks();
      Page* p = ms_->alloc_pages(cpu, nid, order_, alloc_.gfp);
      const uint64_t t1 = clock_ticks();
      if (!p) {
        ++failed;
        return nullptr;
      }
      alloc_ticks += t1 - t0;
      ++allocs;
      ctx.record_alloc(ms_->page_to_pfn(p));
      ctx.record_latency_ns(uint64_t(ticks_to_ns(t1 - t0)));
      ctx.add_ops();
      return p;
    };
    auto free_one = [&](Page* p) {
      const uint64_t t0 = clock_ticks();
      ms_->free_pages(cpu, p, order_);
      free_ticks += clock_ticks() - t0;
      ++frees;
    };
    // A stopped run's worker leaves the blocks it has not freed yet to finish().
    const auto stopped = [&ctx] { return ctx.stopped(); };
    switch (pattern_) {
      case Pattern::bulk:
        for (uint64_t i = 0; i < blocks_[w] && !ctx.stopped(); ++i)
          if (Page* p = alloc_one()) held.push_back(p);
        release_held(held, free_one, stopped);
        ctx.end_timed();
        break;
      case Pattern::repeat:
        for (uint64_t i = 0; i < iterations_ && !ctx.stopped(); ++i)
          if (Page* p = alloc_one()) free_one(p);
        ctx.end_timed();
        break;
      case Pattern::rand: {
        for (uint64_t i = 0; i < blocks_[w] && !ctx.stopped(); ++i)
          if (Page* p = ms_->alloc_pages(cpu, nid, order_, alloc_.gfp)) held.push_back(p);
        for (uint64_t i = 0; i < iterations_ && !ctx.stopped() && !held.empty(); ++i) {
          const size_t k = size_t(ctx.rng.below(held.size()));
          free_one(held[k]);
          Page* p = alloc_one();
          if (p) {
            held[k] = p;
          } else {
            held[k] = held.back();
            held.pop_back();
          }
        }
        ctx.end_timed();
        release_held(
            held, [&](Page* p) { ms_->free_pages(cpu, p, order_); }, stopped);
        break;
      }
    }
    ctx.metric("allocations", double(allocs));
    ctx.metric("alloc_failed", double(failed));
    ctx.metric("alloc_ns", allocs ? ticks_to_ns(alloc_ticks) / double(allocs) : 0.0);
    ctx.metric("free_ns", frees ? ticks_to_ns(free_ticks) / double(frees) : 0.0);
  }

  void finish(const RunEnv& env, RunResult& r) override {
    const MemoryStats st = ms_->stats();
    for (size_t w = 0; w < held_.size(); ++w)
      release_held(
          held_[w], [&](Page* p) { ms_->free_pages(cpu_[w], p, order_); }, teardown_stop(env));
    ms_->drain_all_pages();
    const CheckReport rep = ms_->check();
    if (!rep.ok) throw std::logic_error("page_alloc: check() failed after the run: " + rep.summary());
    if (rep.allocated_pages != 0)
      throw std::logic_error("page_alloc: " + std::to_string(rep.allocated_pages) + " pages still allocated");
    size_t k = 0;
    for (const Zone* z : zones()) {
      const FreeAreaState a = ms_->free_area_state(z->node), &b = initial_[k++];
      for (unsigned o = 0; o < NR_PAGE_ORDERS; ++o) {
        uint64_t x = 0, y = 0;
        for (int mt = 0; mt < MIGRATE_TYPES; ++mt) x += a.nr_free[o][mt], y += b.nr_free[o][mt];
        if (x != y)
          throw std::logic_error("page_alloc: node " + std::to_string(z->node) +
                                 " did not merge back to its initial free_area:\n" + a.to_string());
      }
    }
    double alloc_ns = 0, free_ns = 0, failed = 0, allocs = 0;
    for (const auto& w : r.workers)
      for (const auto& [key, v] : w.metrics) {
        if (key == "alloc_ns") alloc_ns += v;
        if (key == "free_ns") free_ns += v;
        if (key == "alloc_failed") failed += v;
        if (key == "allocations") allocs += v;
      }
    const double n = double(r.workers.size());
    const LockStatRow* zone_row = r.lock_row("zone->lock");
    const double zl = !r.lockstat_on ? NAN : zone_row ? double(zone_row->acquisitions) : 0.0;
    auto& s = r.summary;
    s.emplace_back("alloc_ns", alloc_ns / n);
    s.emplace_back("free_ns", free_ns / n);
    s.emplace_back("allocations", int64_t(allocs));
    s.emplace_back("alloc_failed", int64_t(failed));
    s.emplace_back("blocks_per_worker", int64_t(blocks_.empty() ? 0 : blocks_[0]));
    s.emplace_back("zone_lock_acquisitions", r.lock_count("zone->lock", &LockStatRow::acquisitions));
    s.emplace_back("zone_lock_per_1k_allocs", allocs > 0 ? 1000.0 * zl / allocs : NAN);
    s.emplace_back("zone_lock_contentions", r.lock_count("zone->lock", &LockStatRow::contentions));
    s.emplace_back("pcp_hit_share", st.pcp.allocs + st.zone.rmqueue_buddy
                                        ? double(st.pcp.allocs) / double(st.pcp.allocs + st.zone.rmqueue_buddy)
                                        : 0.0);
    s.emplace_back("refills", int64_t(st.zone.rmqueue_bulk));
    s.emplace_back("bulk_frees", int64_t(st.zone.free_pcppages_bulk));
    s.emplace_back("buddy_allocs", int64_t(st.zone.rmqueue_buddy));
    s.emplace_back("buddy_frees", int64_t(st.zone.free_one_page));
    s.emplace_back("fallbacks", int64_t(st.zone.fallbacks));
    s.emplace_back("pages_checked_under_lock", int64_t(st.zone.pages_checked_under_lock));
    s.emplace_back("check", rep.summary());
    ms_.reset();
  }

 private:
  // node_pages on every model node; throws std::invalid_argument naming node for a node the model does not have.
  MemoryConfig memory_config(const Machine& m) const {
    const int nodes = m.model().nr_nodes();
    if (alloc_.node >= nodes)
      throw std::invalid_argument("node: " + std::to_string(alloc_.node) +
                                  " is out of range (allowed: -1 (local) or 0.." + std::to_string(nodes - 1) + ")");
    MemoryConfig cfg = MemoryConfig::uniform(m, alloc_.node_pages);
    alloc_.configure(cfg);
    return cfg;
  }

  std::vector<const Zone*> zones() const {
    std::vector<const Zone*> v;
    for (int n = 0; n < ms_->nr_nodes(); ++n)
      if (ms_->zone(n).populated()) v.push_back(&ms_->zone(n));
    return v;
  }

  int threads_;
  Pattern pattern_;
  unsigned order_;
  double share_;
  uint64_t iterations_;
  PageAllocParams alloc_;
  std::unique_ptr<MemorySystem> ms_;
  std::vector<int> nid_, cpu_;
  std::vector<uint64_t> blocks_;
  std::vector<FreeAreaState> initial_;
  std::vector<std::vector<Page*>> held_;
};

}  // namespace

ScenarioDef page_alloc_scenario() {
  return {
      "page_alloc",
      "LLFree's page-frame benchmarks on the Linux buddy model: bulk (allocate a share, free it), repeat "
      "(allocate and free one block), rand (free random blocks and replace them), for any order",
      {
          threads_param(2),
          ParamSpec::choice("pattern", "bulk", kPatternNames.list(),
                            "bulk: allocate a share then free it; repeat: alloc+free one block; rand: random "
                            "free and replace"),
          ParamSpec::integer("order", 0, 0, MAX_PAGE_ORDER, "block order (0 = 4 KiB, 9 = 2 MiB)"),
          ParamSpec::real("share", 0.5, 0.001, 0.95,
                          "bulk and rand: fraction of the node's pages above the high watermark allocated in all"),
          ParamSpec::integer("iterations", 100000, 1, int64_t(1) << 34, "repeat and rand: alloc/free pairs per worker"),
          ParamSpec::integer("node_pages", 1 << 18, 512, int64_t(kNoPage) - int64_t(pageblock_nr_pages),
                             "4 KiB frames per model node (multiple of 512; default 1 GiB)"),
          ParamSpec::choice("check", "in_lock", v6_check_mode_names(),
                            "check_pcp_refill: in_lock = v6.2, after_unlock = the pcp-refill patch, off = v6.4+"),
          ParamSpec::choice("batch_rule", "v6.2", v6_batch_rule_names(), "pcp batch and high rules"),
          ParamSpec::integer("pcp_batch", 0, 0, 65536, "pcp->batch; 0 = zone_batchsize()"),
          ParamSpec::integer("node", -1, -1, MAX_NUMNODES - 1, "node allocated from; -1 = the worker's own node"),
          ParamSpec::choice("gfp", "movable", {"movable", "kernel"}, "GFP_HIGHUSER_MOVABLE or GFP_KERNEL"),
      },
      [](const Params& p) { return std::make_unique<PageAlloc>(p); },
      // bulk allocates a share of the node's pages once: its size is the node; repeat and rand loop.
      [](const Params& p) {
        return kPatternNames.parse(p.s("pattern"), "pattern") == Pattern::bulk
                   ? SizeParam{"node_pages", int64_t(pageblock_nr_pages)}
                   : SizeParam{"iterations", 1};
      },
      {{"threads", int64_t(2)}, {"iterations", int64_t(2000)}, {"node_pages", int64_t(8192)}},
      "v6.2: pcp batch/high rules and check_pcp_refill inside zone->lock (batch_rule and check select others)"};
}

}  // namespace alloclab
