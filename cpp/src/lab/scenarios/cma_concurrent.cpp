// cma_concurrent: the seed "mm/cma: using per-CMA locks to improve concurrent allocation performance" (Ge Yang,
// 2025). The seed booted with hugetlb_cma=30G on 3 nodes (a 10 GiB CMA area per node), filled the areas with dd to
// one /dev/shm file, then allocated 10 GiB from each area at once through debugfs: with the global cma_mutex the
// three finished at ~7/14/21 s, with a per-area cma->alloc_mutex at ~7/8/7 s.
//
// Kernel: the seed (v2, 2025-02-10) patches mm-unstable on v6.14-rc: its context is cma_range_alloc() with struct
// cma_memrange (Frank van der Linden's multi-range series, released with the patch in v6.15). The scenario runs
// that kernel's rules by default (the `batch_rule` and `check` parameters select the older ones):
//   * CMA: mm/cma.c cma_range_alloc() of that tree, for single-range areas (hugetlb_cma areas have one range):
//     under cma->lock (spin_lock_irq) stop if count > cma->available_count, bitmap_find_next_zero_area_off,
//     bitmap_set, available_count -= count; then alloc_contig_range() under the global cma_mutex (the seed's
//     "before") or cma->alloc_mutex (its "after"); cma_clear_bitmap() and retry at bitmap_no + mask + 1 on -EBUSY.
//   * pcp batch and high: mm/page_alloc.c zone_batchsize() / zone_highsize() and the high_min/high_max
//     auto-tuning (nr_pcp_alloc, nr_pcp_high, free_count, alloc_factor) of v6.7, unchanged in v6.14:
//     BatchRule::v6_7.
//   * check_new_pages: v6.4 removed check_pcp_refill from rmqueue_bulk; check_new_pages runs only when the
//     check_pages_enabled static key is on (mm/mm_init.c: CONFIG_DEBUG_VM, or init_on_free / page poisoning /
//     debug_pagealloc at boot), which a production kernel has off: CheckMode::off. When it is on, v6.14 checks
//     each page in __rmqueue_pcplist under pcp->lock, a placement the model does not have (in_lock is v6.2's
//     check under zone->lock, after_unlock the pcp-refill seed's).
//   * alloc_contig_range: the v6.2 phases (isolate, drain_all_pages, __alloc_contig_migrate_range,
//     test_pages_isolated, isolate_freepages_range, undo), which v6.14's alloc_contig_range_noprof keeps.
//   Not modelled from that kernel: drain_pages_zone() freeing at most pcp->batch << CONFIG_PCP_BATCH_SCALE_MAX
//   pages per pcp->lock (v6.10: a drain of a larger pcp takes the lock more than once; the model drains in one
//   section); migrate_pages() in batches (v6.3: unmap every folio of the list, then move them; the model moves
//   page by page, the same locks in another order); cma_declare_contiguous_nid() trying bottom-up above 4 GiB
//   first (the model places areas top-down in their node); the frozen-page API.
// See cma.hpp, page_alloc_contig.hpp and migrate.hpp for what each part models and leaves out.
//   prepare (untimed, not in lock_stat): `regions` areas of `pages_per_region` pages, area i on model node
//     i % nodes, placed at the top of the node, with room below for the migration targets (every page that may be
//     migrated, plus the high watermark and the pcp lists). Each area is filled to `fill` with page-cache pages of
//     a shmem file (`files`: one shared file as the seed's dd, or one per area), allocated through the allocator
//     as movable pages on the area's node — they land in the area through the ALLOC_CMA fallback; the pages that
//     land elsewhere are freed again afterwards (other files the test deleted). The allocator's watermarks stop
//     the fill a few hundred pages short of a full area (`filled_pages` says how many). With backing='real' every
//     frame is touched first, so the host's own page faults stay out of the measured copies.
//   work (timed): worker i, pinned to a PU of its area's node, runs cma_alloc(area i, alloc_pages, align).
//   finish (untimed): lock counts checked against the formula below, then cma_release, the files truncated, and
//     every page back: check(), empty bitmaps, free lists as they were after the areas were activated.
// Per worker: elapsed_s, pages, pages_migrated, retries (-EBUSY attempts), attempts, failed, error, filled_pages,
// mutex_wait_s (waiting for the alloc mutex), alloc_contig_s (holding it), and the phase times.
// Summary: completion times sorted (completion_s_1 ... and completion_sorted_s), fastest_s, slowest_s,
// ratio_slowest_fastest, totals, and every lock count beside its formula.
//
// Migration copies each page for real by default (backing='real': 4 KiB of node memory per frame, prefaulted; in
// virtual time the copy costs the profile's copy_page, vcost::pages); copy_ns is an experiment with
// backing='none' only: a busy-wait per copy instead of one.
// The formula (per attempt on a range of B pageblocks with M pages migrated; see page_alloc_contig.hpp):
//   alloc mutex (cma_mutex if global, else cma->alloc_mutex) = sum over workers of A = min(1 + E, P)
//   cma->lock          = sum over workers of A + (A - S) + [S = 0 and E = P]
//                        from the geometry (cma_alloc_positions): P = the bitmap positions alloc_pages at align
//                        can take in the worker's area; E = its -EBUSY attempts, a race (pages a concurrent
//                        call frees into its range, a pcp the drain missed), counted: the layout forces none,
//                        since every area is whole pageblocks of its own holding only movable page cache; S = 1 if
//                        it got its pages. The search never stops on available_count: one worker per area.
//   pcpu_drain_mutex   = one per isolated range (the drain after start_isolate_page_range)
//   zone->lock         = sum (2B + M + 1 + T + H) + R + D + Y
//                        (isolate + undo per pageblock, one free per migrated page, the test, the take sections,
//                        head/tail frees into isolated blocks or via pcp bulk returns (ContigStats::
//                        headtail_zone_locks: with buddy areas unserialised, one call's tail can land in a block the
//                        other already un-isolated); R = pcp refills for targets, D = pcp drains that found pages, Y =
//                        pcp trylock failures that fell back to the buddy lists: 0 with one area per node)
//   mapping->i_pages   = one per folio_migrate_mapping (= M when nothing is pinned)
//   lru_lock           = isolation sections (one per 32 pages of a full range) + one per migrated page
//   pcp->lock          = targets allocated + targets given back + head/tail frees onto the pcp + L - Y' (Y' = the
//                        trylock failures of target allocations; L = drains that took a pcp->lock: with
//                        several areas in one zone a drain may find a pcp non-empty by its racy read and empty
//                        under the lock, so L >= D)
// Every one of these is exact, with any number of areas per node: lock_expectations() gives them to the runner,
// which checks them against lock_stat.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "alloclab/mm/address_space.hpp"
#include "alloclab/mm/cma.hpp"
#include "alloclab/mm/lruvec.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/migrate.hpp"
#include "alloclab/mm/page_alloc_contig.hpp"
#include "alloclab/topology/host_memory.hpp"
#include "scenarios.hpp"

namespace alloclab {

namespace {

using namespace alloclab::mm;

uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

std::string errname(int e) {
  switch (e) {
    case 0: return "ok";
    case -EBUSY: return "EBUSY";
    case -ENOMEM: return "ENOMEM";
    case -EINTR: return "EINTR";
    default: return std::to_string(e);
  }
}

class CmaConcurrent final : public Scenario {
 public:
  explicit CmaConcurrent(const Params& p)
      : regions_(int(p.i("regions"))),
        pages_(uint64_t(p.i("pages_per_region"))),
        fill_(p.f("fill")),
        shared_file_(p.s("files") == "shared"),
        alloc_pages_(uint64_t(p.i("alloc_pages"))),
        align_(uint64_t(p.i("align"))),
        mode_(kAllocMutexNames.parse(p.s("alloc_mutex"), "alloc_mutex")),
        order_per_bit_(unsigned(p.i("order_per_bit"))),
        backing_(p.s("backing") == "real" ? Backing::real : Backing::none),
        copy_ns_(uint64_t(p.i("copy_ns"))),
        migrate_ns_(uint64_t(p.i("migrate_ns"))),
        rule_(kBatchRuleNames.parse(p.s("batch_rule"), "batch_rule")),
        check_(kCheckModeNames.parse(p.s("check"), "check")) {
    if (copy_ns_ && backing_ == Backing::real)
      throw std::invalid_argument("copy_ns: " + std::to_string(copy_ns_) +
                                  " with backing='real' (allowed: 0; the real backing copies each 4 KiB page, and "
                                  "copy_ns is the stated cost of a copy with backing='none')");
    if (pages_ % pageblock_nr_pages)
      throw std::invalid_argument("pages_per_region: " + std::to_string(pages_) + " is not a multiple of " +
                                  std::to_string(pageblock_nr_pages) +
                                  " (pageblock_nr_pages: a CMA area is made of whole pageblocks)");
    if (alloc_pages_ == 0) alloc_pages_ = pages_;
    if (alloc_pages_ > pages_)
      throw std::invalid_argument("alloc_pages: " + std::to_string(alloc_pages_) +
                                  " is more than the area holds (allowed: 1.." + std::to_string(pages_) +
                                  " = pages_per_region, or 0 for the whole area)");
    if (align_ == 0 || (align_ & (align_ - 1)))
      throw std::invalid_argument("align: " + std::to_string(align_) +
                                  " is not a power of two (allowed: 1, 2, 4, ... pages)");
    if (align_ > pages_)
      throw std::invalid_argument("align: " + std::to_string(align_) +
                                  " pages is larger than the area (allowed: up to " + std::to_string(pages_) + ")");
  }

  int nr_workers() const override { return regions_; }

  // One worker per area, pinned to the area's node (the k-th PU there for the node's k-th area); `placement` is
  // not used. Two workers on one model PU would share its pcp, which no kernel task does: refused.
  std::vector<Slot> place(const Machine& m, const Placement&) const override {
    const int nodes = m.model().nr_nodes();
    std::vector<int> k(size_t(nodes), 0);
    std::vector<Slot> slots;
    std::vector<int> used(size_t(m.model().nr_pus()), -1);
    for (int i = 0; i < regions_; ++i) {
      const int n = i % nodes;
      Slot s = m.slot_on_node(i, n, k[size_t(n)]++);
      if (used[size_t(s.model_pu)] >= 0)
        throw std::invalid_argument(
            "regions: " + std::to_string(regions_) + " areas on " + std::to_string(nodes) +
            " model node(s) need one model PU each on their node (a worker owns its CPU's pcp), but areas " +
            std::to_string(used[size_t(s.model_pu)]) + " and " + std::to_string(i) + " land on model PU " +
            std::to_string(s.model_pu) + "; use a model with more nodes or PUs, e.g. Topology.synthetic('node:" +
            std::to_string(regions_) + " core:1 pu:1') (the run is then oversubscribed if the host has fewer PUs)");
      used[size_t(s.model_pu)] = i;
      slots.push_back(s);
    }
    return slots;
  }

  // Every node's frames (the areas and room for their migration targets), the shmem files' page-cache slots, and
  // each worker's list of isolated free chunks (isolate_freepages_range: up to one per page, in a growing vector).
  MemoryNeed memory_needed(const Machine& m) const override {
    const MemoryConfig cfg = memory_config(m);
    const uint64_t mem = MemorySystem::bytes_needed(cfg, m.model().nr_pus());
    const uint64_t lists =
        uint64_t(regions_) * (fill_pages() * sizeof(Page*) + alloc_pages_ * 2 * sizeof(std::pair<Page*, unsigned>));
    uint64_t frames = 0;
    for (uint64_t p : cfg.node_pages) frames += p;
    return {mem + lists, std::to_string(frames) + " frames " + format_bytes(mem) +
                             " + page-cache slots and isolation lists " + format_bytes(lists)};
  }

  void prepare(const RunEnv& env) override {
    const Machine& machine = env.machine;
    const int nodes = machine.model().nr_nodes();
    const MemoryConfig cfg = memory_config(machine);
    uint64_t total = 0;
    for (uint64_t p : cfg.node_pages) total += p;
    try {
      ms_ = std::make_unique<MemorySystem>(machine, env.locks, cfg, env.interruption_points());
    } catch (const MemoryRefused&) {
      throw;  // already names both figures
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("pages_per_region: " + std::to_string(regions_) + " areas of " +
                                  std::to_string(pages_) + " pages plus room for their migration targets need " +
                                  std::to_string(total) + " pages (" + std::to_string(total >> 8) +
                                  " MiB of model memory), which does not fit: " + e.what());
    }
    ms_->prefault_backing();  // the migration targets' frames too: host page faults are not the copy's cost
    node_pages_ = cfg.node_pages;
    // ---- declare and activate the areas (cma_declare_contiguous_nid + cma_activate_area) ----
    std::vector<CmaAreaSpec> specs;
    for (int i = 0; i < regions_; ++i) specs.push_back({i % nodes, pages_});
    cma_ = std::make_unique<CmaAreas>(*ms_, env.locks, specs, mode_, order_per_bit_);
    for (int n = 0; n < nodes; ++n)
      if (cfg.node_pages[size_t(n)]) initial_.emplace_back(n, ms_->free_area_state(n));
    lru_ = std::make_unique<NodeLruvecs>(*ms_, env.locks);
    mc_ = std::make_unique<MigrateContext>(*ms_, *lru_, copy_ns_, migrate_ns_);
    // ---- fill: dd to /dev/shm ----
    const uint64_t per_area = fill_pages();
    files_.clear();
    if (shared_file_)
      files_.push_back(std::make_unique<AddressSpace>(env.locks, "shm0", per_area * uint64_t(regions_)));
    else
      for (int i = 0; i < regions_; ++i)
        files_.push_back(std::make_unique<AddressSpace>(env.locks, "shm" + std::to_string(i), per_area));
    std::vector<uint64_t> next_pgoff(files_.size(), 0);
    filled_.assign(size_t(regions_), 0);
    for (int i = 0; i < regions_; ++i) {
      const Cma& area = (*cma_)[i];
      const int cpu = env.slots[size_t(i)].model_pu;
      const size_t f = shared_file_ ? 0 : size_t(i);
      std::vector<Page*> elsewhere;
      while (filled_[size_t(i)] < per_area) {
        env.interruption_point();
        Page* page = ms_->alloc_pages(cpu, area.nid, 0, GFP_HIGHUSER_MOVABLE | __GFP_THISNODE);
        if (!page) break;  // the watermarks stop dd a little short of a full area
        if (!area.contains(ms_->page_to_pfn(page))) {
          elsewhere.push_back(page);
          continue;
        }
        const uint64_t pgoff = next_pgoff[f]++;
        if (backing_ == Backing::real) write_pattern(page, f, pgoff);
        files_[f]->shmem_add_to_page_cache(page, pgoff, *lru_);
        ++filled_[size_t(i)];
      }
      for (Page* page : elsewhere) ms_->free_pages(cpu, page, 0);
    }
    ms_->drain_all_pages();
    // ---- per-worker state, counters at the start of the timed part ----
    cpus_.clear();
    for (const Slot& s : env.slots) cpus_.push_back(s.model_pu);
    allocated_.assign(size_t(regions_), nullptr);
    stats_.assign(size_t(regions_), CmaAllocStats{});
    before_ = counters();
  }

  void work(WorkerCtx& ctx) override {
    const int w = ctx.slot.worker;
    CmaAllocStats& st = stats_[size_t(w)];
    Page* page =
        cma_alloc((*cma_)[w], *mc_, ctx.slot.model_pu, alloc_pages_, align_, &st, [&ctx] { return ctx.stopped(); });
    ctx.end_timed();
    allocated_[size_t(w)] = page;
    if (page) {
      ctx.add_ops();
      ctx.record_alloc(ms_->page_to_pfn(page));
    }
    const double ns = ns_per_tick() * 1e-9;
    const ContigStats& c = st.contig;
    ctx.metric("pages", page ? double(alloc_pages_) : 0.0);
    ctx.metric("pages_migrated", double(c.migrate.pages_migrated));
    ctx.metric("retries", double(st.busy_retries));
    ctx.metric("attempts", double(st.attempts));
    ctx.metric("failed", page ? 0.0 : 1.0);
    ctx.metric("error", page ? 0.0 : double(st.last_error));
    ctx.metric("filled_pages", double(filled_[size_t(w)]));
    ctx.metric("mutex_wait_s", double(st.mutex_wait_ticks) * ns);
    ctx.metric("alloc_contig_s", double(st.mutex_hold_ticks) * ns);
    ctx.metric("isolate_s", double(c.isolate_ticks) * ns);
    ctx.metric("migrate_s", double(c.migrate_ticks) * ns);
    ctx.metric("test_s", double(c.test_ticks) * ns);
    ctx.metric("take_s", double(c.take_ticks) * ns);
    ctx.metric("undo_s", double(c.undo_ticks) * ns);
  }

  // The formula of the file's header, term by term, for this run's attempts, ranges and events.
  std::vector<LockExpectation> lock_expectations(const RunEnv&, const RunResult&) const override {
    CmaAllocStats all;
    for (const auto& st : stats_) all += st;
    const ContigStats& c = all.contig;
    const Counters after = counters();
    const uint64_t B = c.pageblocks_isolated, M = c.migrate.pages_migrated + c.migrate.pages_already_freed;
    const uint64_t R = after.refills - before_.refills, D = after.drains - before_.drains;
    const uint64_t L = after.drain_locks - before_.drain_locks, Y = after.trylock_fail - before_.trylock_fail;
    const uint64_t T = c.take_sections, H = c.headtail_zone_locks();
    const uint64_t zone = B + c.pageblocks_undone + M + c.test_locks + T + H + R + D + Y;
    // A failed pcp_spin_trylock (a drain held that pcp) takes no pcp->lock: the target came from the buddy lists.
    const uint64_t pcp_takers = c.migrate.targets_allocated + c.migrate.eagain + L;
    const uint64_t pcp_skipped = std::min(Y - c.headtail_trylock_fail, pcp_takers);
    const uint64_t pcp = pcp_takers + c.headtail_to_pcp - pcp_skipped;
    const auto n = [](uint64_t v) { return std::to_string(v); };
    // alloc mutex and cma->lock from the geometry (cma.hpp): each area's bitmap positions P for alloc_pages at
    // align, and, per worker, the -EBUSY attempts E (a race: the layout forces none, as each area is whole
    // pageblocks of its own and holds only movable page cache) and whether it got its pages (S).
    uint64_t mutex = 0, cma_lock = 0;
    std::string ps, es, ss;
    for (int w = 0; w < regions_; ++w) {
      const uint64_t P = cma_alloc_positions((*cma_)[w], alloc_pages_, align_);
      const uint64_t E = stats_[size_t(w)].busy_retries, S = allocated_[size_t(w)] ? 1 : 0;
      const uint64_t A = std::min(1 + E, P);
      mutex += A;
      cma_lock += A + (A - S) + (S == 0 && E == P ? 1 : 0);
      const std::string sep = w ? "," : "";
      ps += sep + n(P), es += sep + n(E), ss += sep + n(S);
    }
    const std::string geometry = "per worker, P = bitmap positions of " + n(alloc_pages_) + " pages at align " +
                                 n(align_) + " in its area = [" + ps + "], E = -EBUSY races counted = [" + es +
                                 "], S = got its pages = [" + ss + "]";
    return {
        {"alloc_mutex", alloc_mutex_class(), mutex,
         "sum of attempts A = min(1 + E, P); " + geometry + " = " + n(mutex)},
        {"cma_lock", "cma->lock", cma_lock,
         "sum of A claims + (A - S) roll-backs + 1 if the positions ran out (S = 0, E = P); " + geometry + " = " +
             n(cma_lock)},
        {"pcpu_drain_mutex", "pcpu_drain_mutex", c.isolations, "one per isolated range = " + n(c.isolations)},
        {"zone_lock", "zone->lock", zone,
         "2B + M + tests + T + H + R + D + Y = 2x" + n(B) + " + " + n(M) + " + " + n(c.test_locks) + " + " + n(T) +
             " + " + n(H) + " + " + n(R) + " + " + n(D) + " + " + n(Y) + " = " + n(zone)},
        {"i_pages", "mapping->i_pages", c.migrate.mapping_locks,
         "one per folio_migrate_mapping = " + n(c.migrate.mapping_locks)},
        {"lru_lock", "lru_lock", c.lru_lock_expected(),
         "isolation sections + LRU adds + putbacks = " + n(c.migrate.lru_isolate_sections) + " + " +
             n(c.migrate.lru_adds) + " + " + n(c.migrate.putbacks) + " = " + n(c.lru_lock_expected())},
        {"pcp_lock", "pcp->lock", pcp,
         "targets + EAGAIN + drains that locked + head/tail onto the pcp - failed trylocks = " +
             n(c.migrate.targets_allocated) + " + " + n(c.migrate.eagain) + " + " + n(L) + " + " +
             n(c.headtail_to_pcp) + " - " + n(pcp_skipped) + " = " + n(pcp)},
    };
  }

  void finish(const RunEnv& env, RunResult& r) override {
    auto& s = r.summary;
    // ---- completion times ----
    std::vector<double> t;
    for (const WorkerRow& w : r.workers) t.push_back(w.elapsed_s);
    std::sort(t.begin(), t.end());
    std::ostringstream sorted;  // four significant figures: 0.000707 / 0.001365, never 0.001 / 0.001
    sorted.precision(4);
    for (size_t i = 0; i < t.size(); ++i) sorted << (i ? " / " : "") << t[i];
    const double fastest = t.empty() ? 0 : t.front(), slowest = t.empty() ? 0 : t.back();
    double mean = 0;
    for (double x : t) mean += x / double(t.size());
    s.emplace_back("completion_sorted_s", sorted.str());
    for (size_t i = 0; i < t.size(); ++i) s.emplace_back("completion_s_" + std::to_string(i + 1), t[i]);
    s.emplace_back("fastest_s", fastest);
    s.emplace_back("slowest_s", slowest);
    s.emplace_back("mean_s", mean);
    s.emplace_back("ratio_slowest_fastest", fastest > 0 ? slowest / fastest : 0.0);

    // ---- totals ----
    CmaAllocStats all;
    for (const auto& st : stats_) all += st;
    const ContigStats& c = all.contig;
    uint64_t failed = 0, filled = 0;
    std::string errors;
    for (size_t w = 0; w < stats_.size(); ++w) {
      filled += filled_[w];
      if (!allocated_[w]) {
        ++failed;
        errors += (errors.empty() ? "" : ", ") + std::string("worker ") + std::to_string(w) + ": " +
                  errname(stats_[w].last_error);
      }
    }
    s.emplace_back("pages_allocated", int64_t(uint64_t(regions_ - int(failed)) * alloc_pages_));
    s.emplace_back("pages_migrated", int64_t(c.migrate.pages_migrated));
    s.emplace_back("filled_pages", int64_t(filled));
    s.emplace_back("fill_actual", pages_ ? double(filled) / double(pages_ * uint64_t(regions_)) : 0.0);
    s.emplace_back("attempts", int64_t(all.attempts));
    s.emplace_back("retries", int64_t(all.busy_retries));
    s.emplace_back("failures", int64_t(failed));
    s.emplace_back("failure_reasons", errors);
    s.emplace_back("alloc_mutex_class", std::string(alloc_mutex_class()));
    s.emplace_back("alloc_mutex_wait_s", r.lock_figure(alloc_mutex_class(), &LockStatRow::wait_total_ns) * 1e-9);
    s.emplace_back("node_pages", [&] {
      std::string v;
      for (uint64_t p : node_pages_) v += (v.empty() ? "" : ",") + std::to_string(p);
      return v;
    }());

    // ---- give everything back and check it all came back ----
    bool contents_ok = true;
    if (backing_ == Backing::real) contents_ok = check_contents(env);
    s.emplace_back("contents_checked", backing_ == Backing::real);
    s.emplace_back("contents_ok", contents_ok);
    teardown(env);
    if (!contents_ok) throw std::logic_error("cma_concurrent: a migrated page lost its contents");
  }

 private:
  // Every node sized for its areas + room for the migration targets (every page that may be migrated, plus the
  // watermarks and pcp lists, which depend on the node sizes: iterated to a fit).
  MemoryConfig memory_config(const Machine& machine) const {
    const int nodes = machine.model().nr_nodes();
    std::vector<uint64_t> areas_on(size_t(nodes), 0);
    for (int i = 0; i < regions_; ++i) ++areas_on[size_t(i % nodes)];
    MemoryConfig cfg;
    cfg.backing = backing_;
    cfg.batch_rule = rule_;
    cfg.check = check_;
    cfg.node_pages.assign(size_t(nodes), 0);
    for (int n = 0; n < nodes; ++n)
      if (areas_on[size_t(n)])
        cfg.node_pages[size_t(n)] = round_up(areas_on[size_t(n)] * (pages_ + alloc_pages_), MAX_ORDER_NR_PAGES);
    const int nr_pus = machine.model().nr_pus();
    for (int iter = 0; iter < 8; ++iter) {
      bool changed = false;
      for (int n = 0; n < nodes; ++n) {
        if (!areas_on[size_t(n)]) continue;
        const auto w = MemorySystem::watermarks(cfg, n);
        const uint64_t pcp_slack = uint64_t(nr_pus) * 2 * uint64_t(zone_batchsize(cfg.node_pages[size_t(n)]));
        const uint64_t need = round_up(areas_on[size_t(n)] * (pages_ + alloc_pages_) + w[WMARK_HIGH] + w[WMARK_LOW] +
                                           pcp_slack + MAX_ORDER_NR_PAGES,
                                       MAX_ORDER_NR_PAGES);
        if (need > cfg.node_pages[size_t(n)]) {
          cfg.node_pages[size_t(n)] = need;
          changed = true;
        }
      }
      if (!changed) break;
    }
    return cfg;
  }
  // Pages of shmem page cache each area is filled with (dd).
  uint64_t fill_pages() const { return uint64_t(std::llround(fill_ * double(pages_))); }

  struct Counters {
    uint64_t refills = 0, drain_locks = 0, drains = 0, trylock_fail = 0;
  };
  Counters counters() const {
    Counters c;
    const MemoryStats st = ms_->stats();
    c.refills = st.pcp.refills;
    c.drain_locks = st.pcp.drain_locks;
    c.drains = st.pcp.drains;
    c.trylock_fail = st.pcp_trylock_fail;
    return c;
  }
  std::string alloc_mutex_class() const { return mode_ == AllocMutex::global ? "cma_mutex" : "cma->alloc_mutex"; }
  static uint64_t pattern(size_t file, uint64_t pgoff) { return (uint64_t(file + 1) << 48) ^ pgoff ^ 0x5a5a000000ull; }
  void write_pattern(Page* page, size_t file, uint64_t pgoff) {
    auto* p = static_cast<uint64_t*>(ms_->page_address(page));
    p[0] = pattern(file, pgoff);
    p[PAGE_SIZE / 8 - 1] = ~pattern(file, pgoff);
  }
  bool check_contents(const RunEnv& env) const {
    for (size_t f = 0; f < files_.size(); ++f)
      for (uint64_t pgoff = 0; pgoff < files_[f]->max_pages(); ++pgoff) {
        env.interruption_point();
        const Page* page = files_[f]->xa_load(pgoff);
        if (!page) continue;
        const auto* p = static_cast<const uint64_t*>(ms_->page_address(page));
        if (p[0] != pattern(f, pgoff) || p[PAGE_SIZE / 8 - 1] != ~pattern(f, pgoff)) return false;
      }
    return true;
  }

  void teardown(const RunEnv& env) {
    std::string problems;
    auto fail = [&](const std::string& e) { problems += "\n  " + e; };
    for (const auto& f : files_)
      for (const auto& e : f->check(env.interruption_points())) fail(e);
    for (const auto& e : cma_->check()) fail(e);
    for (int w = 0; w < regions_; ++w)
      if (allocated_[size_t(w)] &&
          !cma_release((*cma_)[w], *ms_, cpus_[size_t(w)], allocated_[size_t(w)], alloc_pages_))
        fail("cma_release refused worker " + std::to_string(w) + "'s pages");
    for (size_t f = 0; f < files_.size(); ++f) files_[f]->truncate(*ms_, *lru_, cpus_[shared_file_ ? 0 : f]);
    ms_->drain_all_pages();
    const CheckReport rep = ms_->check();
    if (!rep.ok) fail("check(): " + rep.summary());
    if (rep.allocated_pages) fail(std::to_string(rep.allocated_pages) + " pages still allocated");
    if (lru_->nr_pages()) fail(std::to_string(lru_->nr_pages()) + " pages still on an LRU");
    for (const auto& e : cma_->check(true)) fail(e);
    for (const auto& [n, state] : initial_)
      if (!(ms_->free_area_state(n) == state))
        fail("node " + std::to_string(n) + ": free lists differ from their state after cma_activate_area:\nbefore\n" +
             state.to_string() + "after\n" + ms_->free_area_state(n).to_string());
    files_.clear();
    mc_.reset();
    lru_.reset();
    cma_.reset();
    ms_.reset();
    if (!problems.empty()) throw std::logic_error("cma_concurrent: memory did not come back:" + problems);
  }

  const int regions_;
  const uint64_t pages_;
  const double fill_;
  const bool shared_file_;
  uint64_t alloc_pages_;
  const uint64_t align_;
  const AllocMutex mode_;
  const unsigned order_per_bit_;
  const Backing backing_;
  const uint64_t copy_ns_, migrate_ns_;
  const BatchRule rule_;
  const CheckMode check_;

  std::unique_ptr<MemorySystem> ms_;
  std::unique_ptr<CmaAreas> cma_;
  std::unique_ptr<NodeLruvecs> lru_;
  std::unique_ptr<MigrateContext> mc_;
  std::vector<std::unique_ptr<AddressSpace>> files_;
  std::vector<std::pair<int, FreeAreaState>> initial_;
  std::vector<uint64_t> node_pages_;
  std::vector<uint64_t> filled_;
  std::vector<int> cpus_;
  std::vector<Page*> allocated_;
  std::vector<CmaAllocStats> stats_;
  Counters before_;
};

}  // namespace

ScenarioDef cma_concurrent_scenario() {
  return {"cma_concurrent",
          "one worker per CMA area allocates the whole (filled) area at once with cma_alloc -> alloc_contig_range "
          "(isolate, drain, migrate, test, take, undo); alloc_mutex global (cma_mutex) vs per_area "
          "(cma->alloc_mutex): the 7/14/21 s vs 7/8/7 s table",
          {
              ParamSpec::integer("regions", 2, 1, 256,
                                 "CMA areas, one worker each, area i on model node i % nodes (the seed: 3, one per "
                                 "node: use a model with that many nodes, e.g. 'node:3 core:1 pu:1')"),
              ParamSpec::integer("pages_per_region", 131072, 512, int64_t(1) << 30,
                                 "pages per area, a multiple of 512 (the seed: 2621440 = 10 GiB)"),
              ParamSpec::real("fill", 1.0, 0.0, 1.0,
                              "fraction of each area filled with shmem page-cache pages before the timed part "
                              "(the seed's dd: 1.0)"),
              ParamSpec::choice("files", "shared", {"shared", "per_area"},
                                "who owns the fill: one /dev/shm file (one mapping->i_pages for all areas, as the "
                                "seed) or one file per area"),
              ParamSpec::integer("alloc_pages", 0, 0, int64_t(1) << 30,
                                 "pages each worker asks cma_alloc for; 0 = the whole area"),
              ParamSpec::integer("align", 1, 1, int64_t(1) << 30,
                                 "cma_alloc alignment in pages, a power of two (the debugfs interface: 1)"),
              ParamSpec::choice("alloc_mutex", "global", kAllocMutexNames.list(),
                                "the lock around alloc_contig_range: one cma_mutex for all areas (before the patch) "
                                "or each area's cma->alloc_mutex (after)"),
              ParamSpec::integer("order_per_bit", 9, 0, 9,
                                 "pages per bitmap bit = 2^order_per_bit (hugetlb_cma: 9, one bit per 2 MiB)"),
              ParamSpec::choice("backing", "real", {"real", "none"},
                                "page contents: real (4 KiB of node memory per page, prefaulted, really copied by "
                                "each migration and checked after the run; virtual time charges the profile's copy "
                                "cost) or none (descriptors only: a copy costs copy_ns)"),
              ParamSpec::integer("copy_ns", 0, 0, 1'000'000,
                                 "an experiment: a busy-wait of copy_ns per folio_copy instead of the copy, with "
                                 "backing='none' only (0 = no copy work)"),
              ParamSpec::integer("migrate_ns", 0, 0, 1'000'000,
                                 "extra busy-wait per migrated page for what the model leaves out (rmap, memcg, "
                                 "page lock, LRU drains); ~2000 brings a page near the seed's 2.7 us"),
              ParamSpec::choice("batch_rule", "v6.7", kBatchRuleNames.list(),
                                "pcp batch/high rules: v6.7 = the seed's kernel (v6.14, unchanged since v6.7's "
                                "high_min/high_max auto-tuning); v6.2 = the rules before it"),
              ParamSpec::choice("check", "off", kCheckModeNames.list(),
                                "where check_new_pages runs: off = the seed's kernel (v6.4+: only with "
                                "check_pages_enabled, off without CONFIG_DEBUG_VM); in_lock = v6.2's "
                                "check_pcp_refill under zone->lock; after_unlock = the pcp-refill patch"),
          },
          [](const Params& p) { return std::make_unique<CmaConcurrent>(p); },
          size_is("pages_per_region", int64_t(pageblock_nr_pages)),
          {{"regions", int64_t(2)}, {"pages_per_region", int64_t(2048)}},
          "v6.14 mm-unstable of 2025-02 (the tree the seed patched; its cma_range_alloc is in v6.15), pcp batch/high "
          "rules of v6.7 (BatchRule::v6_7, unchanged in v6.14), no check_new_pages (CheckMode::off: "
          "check_pages_enabled is off without CONFIG_DEBUG_VM or init_on_free/debug_pagealloc)"};
}

}  // namespace alloclab
