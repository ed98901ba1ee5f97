// alloc_contig_range: allocate a physically contiguous pfn range whose pages are in use, by isolating its
// pageblocks, migrating what is in use elsewhere on the node and taking the freed pages off the free lists — with
// the kernel's phases and lock acquisitions.
//
// Models: alloc_contig_range() of mm/page_alloc.c as of v6.2 (the phases and locks are the same through v6.14,
// whose replace_free_hugepage_folios() step has nothing to do without hugetlb), with __alloc_contig_migrate_range,
// test_pages_isolated() (mm/page_isolation.c), isolate_freepages_range()/isolate_freepages_block(strict)
// (mm/compaction.c), split_map_pages and free_contig_range. Pageblock isolation itself is MemorySystem's
// start_isolate_page_range / undo_isolate_page_range.
//
// Phases and lock acquisitions of one call on [start, end), with B = pageblocks of the pageblock-aligned range
// [pageblock_start(start), pageblock_align(end)) (the formula ContigStats::zone_lock_expected() adds up):
//   1. start_isolate_page_range: zone->lock once per pageblock (set_migratetype_isolate): B.
//   2. drain_all_pages(zone): pcpu_drain_mutex once; each CPU whose pcp holds pages of the zone: pcp->lock and
//      one zone->lock (free_pcppages_bulk): D. (MemorySystem runs it at the end of start_isolate_page_range; the
//      kernel calls it from alloc_contig_range right after — same order, same locks.)
//   3. __alloc_contig_migrate_range: batches of up to 32 (see migrate.hpp). lru_lock once per 32-pfn chunk that
//      holds LRU pages (M/32 for a fully used, 32-aligned range) plus once per migrated page (the new page onto
//      the LRU); per migrated page one mapping->i_pages, one target allocation (pcp->lock; zone->lock once per
//      pcp refill: R) and one zone->lock to free the old page into its isolated pageblock: M.
//   4. test_pages_isolated(outer_start, end): zone->lock once (if every pageblock is isolated).
//   5. isolate_freepages_range(outer_start, end): one zone->lock section per free block of order >= 5 it takes
//      (isolate_freepages_block drops the lock at every 32-pfn boundary) and per 32-pfn run of smaller blocks: T.
//      T = count/1024 when the range is MAX_ORDER-aligned and its pages are free as order-10 blocks (a full range
//      whose freed pages merged, or pageblocks that were free when isolated: isolation splits a free block only
//      where it straddles an edge of the range, as isolate_single_pageblock).
//   6. split into order-0 pages; free_contig_range() of what lies outside [start, end): zone->lock per page: H.
//   7. undo_isolate_page_range: zone->lock once per pageblock: B.
// zone->lock = 2B + D + R + M + 1 + T + H for a success; a failed call stops after its phase and still undoes
// the isolation (-EBUSY from migration still runs the test, as the kernel does).
// Virtual time: the walks over the range read each buddy head they visit; split_map_pages streams the chunks.
// Leaves out: has_unmovable_pages (every allocated page is taken as movable), compaction's skip hints and
// cc->contended, lru_cache_disable()'s lru_add_drain_all, the GFP_NOWARN dump of failing pages, hugetlb folios.
#pragma once

#include <cstdint>
#include <functional>

#include "alloclab/mm/gfp.hpp"
#include "alloclab/mm/migrate.hpp"

namespace alloclab::mm {

// What one or more alloc_contig_range calls did. Every count is incremented where its lock is taken.
#define ALLOCLAB_CONTIG_STATS(X)                                                                          \
  X(calls, sum, "alloc_contig_range calls")                                                               \
  X(ok, sum, "calls that returned 0")                                                                     \
  X(ebusy, sum, "calls that returned -EBUSY")                                                             \
  X(enomem, sum, "calls that returned -ENOMEM")                                                           \
  X(eintr, sum, "calls that returned -EINTR (the run was stopped)")                                       \
  X(isolations, sum, "ranges isolated (one drain_all_pages, one pcpu_drain_mutex each)")                  \
  X(pageblocks_isolated, sum, "B: pageblocks isolated, zone->lock each")                                  \
  X(pcps_to_drain, sum, "D: pcps of the zone holding pages when isolation began (zone->lock each)")       \
  X(target_refills, sum, "R: rmqueue_bulk calls of the caller's pcp while migrating (zone->lock each)")   \
  X(test_locks, sum, "zone->lock in test_pages_isolated (0 or 1 per call)")                               \
  X(take_sections, sum, "T: zone->lock sections of isolate_freepages_range")                              \
  X(pages_taken, sum, "free pages isolate_freepages_range took")                                          \
  X(headtail_frees, sum, "pages outside [start, end) given back, of which")                               \
  X(headtail_to_pcp, sum, "  went onto the caller's pcp (their pageblock no longer isolated: pcp->lock)") \
  X(headtail_pcp_bulk, sum, "  free_pcppages_bulk calls those triggered (zone->lock each)")               \
  X(headtail_trylock_fail, sum, "  went to the buddy lists after a failed pcp trylock (zone->lock each)") \
  X(pageblocks_undone, sum, "B: pageblocks un-isolated, zone->lock each")                                 \
  X(isolate_ticks, sum, "clock ticks isolating (with the drain)")                                         \
  X(migrate_ticks, sum, "clock ticks migrating")                                                          \
  X(test_ticks, sum, "clock ticks in test_pages_isolated")                                                \
  X(take_ticks, sum, "clock ticks in isolate_freepages_range")                                            \
  X(undo_ticks, sum, "clock ticks un-isolating")
struct ContigStats {
  ALLOCLAB_COUNTERS(ContigStats, ALLOCLAB_CONTIG_STATS)
  MigrateStats migrate;
  void add_extra(const ContigStats& o) { migrate += o.migrate; }
  // The documented formulas, from the counts above (exact when no pcp trylock failed and no migration failure
  // gave a target back to a pcp at its high mark).
  uint64_t zone_lock_expected() const {
    return pageblocks_isolated + pcps_to_drain + target_refills + migrate.pages_migrated + migrate.pages_already_freed +
           test_locks + take_sections + headtail_zone_locks() + headtail_trylock_fail + pageblocks_undone;
  }
  // H: zone->lock taken for the head/tail frees, leaving out failed trylocks (callers count those with every other
  // pcp trylock failure). Into an isolated pageblock (the usual case: the range's own blocks) each page takes
  // zone->lock; a pageblock whose isolation was already undone (another caller's range, when two ranges are buddies
  // and neither is serialised by a mutex) sends them to the pcp instead.
  uint64_t headtail_zone_locks() const {
    return headtail_frees - headtail_to_pcp - headtail_trylock_fail + headtail_pcp_bulk;
  }
  uint64_t lru_lock_expected() const { return migrate.lru_isolate_sections + migrate.lru_adds + migrate.putbacks; }
  uint64_t pcp_lock_expected() const {
    return migrate.targets_allocated + migrate.eagain + pcps_to_drain + headtail_to_pcp;
  }
};

// alloc_contig_range(start, end, migratetype, gfp_mask) run on model CPU `cpu`. Returns 0 (every page of
// [start, end) is then an allocated order-0 page with one reference), -EBUSY (something could not be migrated or
// isolated), -ENOMEM (no target page on the node) or -EINTR (fatal_signal_pending said so); on failure nothing is
// left isolated. Throws std::invalid_argument for a range that is empty or not inside one zone, or a migratetype
// other than MIGRATE_MOVABLE or MIGRATE_CMA.
int alloc_contig_range(MigrateContext& mc, int cpu, uint64_t start, uint64_t end, int migratetype, gfp_t gfp_mask,
                       ContigStats* stats = nullptr, const std::function<bool()>& fatal_signal_pending = {});

// free_contig_range: drops one reference of each page of [pfn, pfn + nr_pages) on model CPU `cpu` (freeing it when
// it was the last). Returns how many pages did not have exactly one reference (the kernel WARNs about them).
uint64_t free_contig_range(MemorySystem& ms, int cpu, uint64_t pfn, uint64_t nr_pages);

// test_pages_isolated(start_pfn, end_pfn): 0 when every pageblock touching the range is MIGRATE_ISOLATE and every
// page of it is free (stepping by buddy order under one zone->lock), else -EBUSY. Unlike
// MemorySystem::test_pages_isolated the range need not be pageblock-aligned. `locks_taken` (optional) gets +1 when
// zone->lock was taken.
int test_pages_isolated(MemorySystem& ms, uint64_t start_pfn, uint64_t end_pfn, uint64_t* locks_taken = nullptr);

}  // namespace alloclab::mm
