// Page migration for alloc_contig_range: isolate in-use pages of a pfn range from the LRU in batches of 32 and move
// each one to a new page on the same node, with the kernel's locks.
//
// Models: mm/compaction.c (isolate_migratepages_range / isolate_migratepages_block) and mm/migrate.c
// (migrate_pages, unmap_and_move, folio_migrate_mapping, folio_migrate_copy, putback_movable_pages) of v6.2, for
// unmapped shmem page-cache pages (the seed's /dev/shm file):
//   * isolation scans the range pfn by pfn, skips free buddies, takes a reference and clears PG_lru on each LRU
//     page, and holds the node's lru_lock from the first LRU page it meets until the next 32-pfn boundary
//     (COMPACT_CLUSTER_MAX), where it drops it; it stops after 32 isolated pages: one lru_lock per 32 pages of a
//     fully used range;
//   * migrate_pages() makes up to 10 passes (NR_MAX_MIGRATE_PAGES_RETRY) over the batch. Per page: a target from
//     alloc_migration_target() (the normal allocator: pcp, zone->lock refills), folio_migrate_mapping() (under the
//     owner's mapping->i_pages: freeze the reference count at 2 — page cache + isolation — or fail with -EAGAIN,
//     move ->mapping/->index/dirty/swapbacked, replace the xarray slot), folio_migrate_copy() (a real 4 KiB
//     memcpy with backing="real", else a stated busy-wait of copy_ns, 0 = no copy work), the new page onto the LRU
//     (lru_lock: the LRU cache is disabled during alloc_contig_range), then the old page's last reference is dropped
//     and it is freed — into its MIGRATE_ISOLATE pageblock, so through free_one_page() under zone->lock. A missing
//     target ends migrate_pages() at once with -ENOMEM; -EAGAIN pages stay on the list (the caller retries them).
// The batch is a std::vector<Page*> (the kernel links it through page->lru, which here holds the LRU links).
// Targets come from the range's node only (__GFP_THISNODE): the kernel prefers that node and would spill to others
// only when it is full; the model keeps each node's migration on its node.
// Virtual time: the isolation walk reads each struct page, the refcount freeze/unfreeze are atomic RMWs, the page
// cache slot is one xarray step, and folio_copy with real backing is a copy_page (vcost::pages: the profile's
// page_ns.copy, or page_ns.copy_ascending where the page follows the one copied before, or its bandwidth for 4 KiB
// read + 4 KiB written, whichever takes longer).
// Leaves out: the page lock (PG_locked, folio_trylock), rmap (try_to_migrate / remove_migration_ptes: the pages are
// not mapped), anon pages, non-LRU movable pages, THP and hugetlb folios, memcg (mem_cgroup_migrate), writeback
// waits, reclaim_clean_pages_from_list (shmem pages are not clean file pages), NR_ISOLATED_* counters,
// lru_add_drain_all() (no per-CPU LRU batches exist to drain), per-page stat updates, cond_resched().
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "alloclab/base/counters.hpp"
#include "alloclab/mm/gfp.hpp"
#include "alloclab/mm/page.hpp"
#include "alloclab/mm/zone.hpp"

namespace alloclab::mm {

class MemorySystem;
class NodeLruvecs;

inline constexpr unsigned COMPACT_CLUSTER_MAX = 32;  // SWAP_CLUSTER_MAX
inline constexpr int NR_MAX_MIGRATE_PAGES_RETRY = 10;
inline constexpr int MIGRATEPAGE_SUCCESS = 0;

// What migration works with beyond the page allocator: the LRUs, and the cost of what it does not really do.
struct MigrateContext {
  MigrateContext(MemorySystem& ms, NodeLruvecs& lru, uint64_t copy_ns = 0, uint64_t extra_ns = 0);
  MemorySystem& ms;
  NodeLruvecs& lru;
  uint64_t copy_ticks;   // folio_copy with backing="none": a stated cost (with "real" the 4 KiB are copied)
  uint64_t extra_ticks;  // per migrated page: the work the model leaves out (rmap, memcg, page lock, ...)
};

// Counts of one worker's migration work. All exact: each is incremented where the lock is taken.
#define ALLOCLAB_MIGRATE_STATS(X)                                                                          \
  X(isolate_calls, sum, "isolate_migratepages_range calls (batches of up to 32)")                          \
  X(pages_isolated, sum, "pages taken off the LRU")                                                        \
  X(lru_isolate_sections, sum, "lru_lock acquisitions by isolation")                                       \
  X(migrate_pages_calls, sum, "migrate_pages calls")                                                       \
  X(targets_allocated, sum, "alloc_migration_target successes")                                            \
  X(target_failures, sum, "alloc_migration_target returned NULL (-ENOMEM)")                                \
  X(mapping_locks, sum, "mapping->i_pages acquisitions (folio_migrate_mapping)")                           \
  X(eagain, sum, "folio_migrate_mapping found an unexpected reference (-EAGAIN)")                          \
  X(pages_migrated, sum, "successes: one lru_lock (new page) and one old-page free each")                  \
  X(pages_already_freed, sum, "page_count == 1 on entry: the file dropped it meanwhile; freed, no target") \
  X(lru_adds, sum, "lru_lock acquisitions putting new pages on the LRU")                                   \
  X(putbacks, sum, "pages put back on the LRU after a failure (one lru_lock each)")
struct MigrateStats {
  ALLOCLAB_COUNTERS(MigrateStats, ALLOCLAB_MIGRATE_STATS)
};

// The part of struct compact_control alloc_contig_range uses.
struct compact_control {
  Zone* zone = nullptr;
  int cpu = 0;                                 // the caller's model CPU: its pcp serves the targets
  std::vector<Page*> migratepages;             // cc->migratepages
  uint64_t migrate_pfn = 0;                    // where isolation resumes
  std::function<bool()> fatal_signal_pending;  // empty: never
  MigrateStats* stats = nullptr;               // required
};

struct migration_target_control {
  int nid;
  gfp_t gfp_mask;
};

// isolate_migratepages_range: isolates up to COMPACT_CLUSTER_MAX LRU pages of [start_pfn, end_pfn) onto
// cc.migratepages and sets cc.migrate_pfn to where it stopped. Returns 0, or -EINTR when fatal_signal_pending.
int isolate_migratepages_range(MigrateContext& mc, compact_control& cc, uint64_t start_pfn, uint64_t end_pfn);
// migrate_pages(from, alloc_migration_target, MIGRATE_SYNC, MR_CONTIG_RANGE): migrates what it can; pages that
// could not be migrated stay in `from`. Returns 0, the number of pages not migrated, or -ENOMEM.
int migrate_pages(MigrateContext& mc, compact_control& cc, std::vector<Page*>& from,
                  const migration_target_control& mtc);
// putback_movable_pages: every page of `list` back on its LRU, the isolation reference dropped.
void putback_movable_pages(MigrateContext& mc, compact_control& cc, std::vector<Page*>& list);

}  // namespace alloclab::mm
