// Zone: free_area[order].free_list[migratetype], pageblock migratetypes, watermarks, zone->lock, and the buddy
// operations that run under it (expand, __rmqueue_smallest, the fallback ladder, __free_one_page).
//
// Models: struct zone (include/linux/mmzone.h) and the buddy core of mm/page_alloc.c as of v6.2, the kernel the
// pcp-refill seed patched (orders are named with the v6.8+ constants: MAX_PAGE_ORDER = 10 is the largest order,
// NR_PAGE_ORDERS = 11 of them; v6.2 called the count MAX_ORDER). x86-64 sizes: 4 KiB pages, pageblock_order 9.
//   * free_area: one list per migratetype and nr_free per order. Free blocks are PageBuddy heads with the order in
//     private; expand() puts the upper halves back on the list head, __free_one_page() merges upward with
//     find_buddy_page_pfn() and queues at the tail when buddy_merge_likely(), as v6.2.
//   * pageblocks (512 pages) carry a migratetype: UNMOVABLE, MOVABLE, RECLAIMABLE, HIGHATOMIC, CMA, ISOLATE. The
//     fallback ladder is v6.2's fallbacks[]:
//         UNMOVABLE   -> RECLAIMABLE, MOVABLE
//         MOVABLE     -> RECLAIMABLE, UNMOVABLE
//         RECLAIMABLE -> UNMOVABLE,   MOVABLE
//     with CMA used by movable requests that may (ALLOC_CMA): first when free CMA is over half the zone's free
//     pages, else after the movable lists; HIGHATOMIC, CMA and ISOLATE are never fallback sources. Stealing follows
//     __rmqueue_fallback/steal_suitable_fallback: largest block first, whole-pageblock claim when
//     can_steal_fallback() allows it and half the block is free or alike (move_freepages_block).
//   * ISOLATE pageblocks (for alloc_contig_range): their free pages sit on the ISOLATE list, do not count in
//     NR_FREE_PAGES, and never merge at pageblock order or above with a non-isolated buddy.
//   * watermarks as __setup_per_zone_wmarks (min from min_free_kbytes, low/high by watermark_scale_factor), checked
//     by __zone_watermark_ok / zone_watermark_fast exactly as v6.2 (lock-free reads of NR_FREE_PAGES and
//     nr_free, as the kernel's racy reads; here relaxed atomics).
//   * vm_stat NR_FREE_PAGES and NR_FREE_CMA_PAGES: updated under zone->lock, read anywhere. The kernel batches
//     updates in per-CPU diffs (vm_stat_diff) that make reads approximate; the model's are exact.
// Thread safety is the kernel's: every function below whose name starts with "__" or that says "zone->lock held"
// must be called with zone->lock held; nothing else protects the free lists.
// Virtual time: every free_list head, nr_free, vm_stat counter, pageblock type and struct page these functions read
// or write is a tracked line (page.hpp charges the list operations), and check_new_pages() streams its range.
// Leaves out: watermark boosting (ZONE_BOOSTED_WATERMARK is never set), highatomic reservation
// (reserve_highatomic_pageblock; the HIGHATOMIC list exists but nothing fills it), page shuffling, guard pages
// (debug_pagealloc), page reporting, compaction capture, lowmem_reserve (one zone per node: always 0), memory
// hotplug, ZONE_DMA/DMA32 (each node has one ZONE_NORMAL; ZONE_MOVABLE is named but not populated).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "alloclab/base/counters.hpp"
#include "alloclab/base/enum_names.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/gfp.hpp"
#include "alloclab/mm/page.hpp"

namespace alloclab::mm {

inline constexpr unsigned MAX_PAGE_ORDER = 10;
inline constexpr unsigned NR_PAGE_ORDERS = MAX_PAGE_ORDER + 1;
inline constexpr uint64_t MAX_ORDER_NR_PAGES = uint64_t(1) << MAX_PAGE_ORDER;
inline constexpr unsigned pageblock_order = 9;
inline constexpr uint64_t pageblock_nr_pages = uint64_t(1) << pageblock_order;
inline constexpr unsigned PAGE_ALLOC_COSTLY_ORDER = 3;

enum migratetype : int {
  MIGRATE_UNMOVABLE,
  MIGRATE_MOVABLE,
  MIGRATE_RECLAIMABLE,
  MIGRATE_PCPTYPES,  // the number of types on the pcp lists
  MIGRATE_HIGHATOMIC = MIGRATE_PCPTYPES,
  MIGRATE_CMA,
  MIGRATE_ISOLATE,
  MIGRATE_TYPES
};
const char* migratetype_name(int mt);
inline bool is_migrate_cma(int mt) { return mt == MIGRATE_CMA; }
inline bool is_migrate_isolate(int mt) { return mt == MIGRATE_ISOLATE; }
inline bool is_migrate_highatomic(int mt) { return mt == MIGRATE_HIGHATOMIC; }
inline bool migratetype_is_mergeable(int mt) { return mt < MIGRATE_PCPTYPES; }

enum zone_type : int { ZONE_NORMAL, ZONE_MOVABLE, MAX_NR_ZONES };
enum zone_stat_item : int { NR_FREE_PAGES, NR_FREE_CMA_PAGES, NR_VM_ZONE_STAT_ITEMS };
enum zone_watermarks : int { WMARK_MIN, WMARK_LOW, WMARK_HIGH, WMARK_PROMO, NR_WMARK };
enum zone_flags : unsigned { ZONE_BOOSTED_WATERMARK, ZONE_RECLAIM_ACTIVE, ZONE_BELOW_HIGH };

// fpi_t (free page internal flags).
using fpi_t = unsigned;
inline constexpr fpi_t FPI_NONE = 0, FPI_TO_TAIL = 1u << 1;

// The pcp policies of one MemorySystem (read-only after construction; see pcp.hpp for what each one is).
enum class BatchRule : uint8_t { v6_2, v6_7, v2_6_35 };
inline constexpr EnumNames<BatchRule, 3> kBatchRuleNames{
    {{{BatchRule::v6_2, "v6.2"}, {BatchRule::v6_7, "v6.7"}, {BatchRule::v2_6_35, "2.6.35"}}}};
enum class CheckMode : uint8_t { in_lock, after_unlock, off, prep_new_page };
inline constexpr EnumNames<CheckMode, 4> kCheckModeNames{{{{CheckMode::in_lock, "in_lock"},
                                                           {CheckMode::after_unlock, "after_unlock"},
                                                           {CheckMode::off, "off"},
                                                           {CheckMode::prep_new_page, "prep_new_page"}}}};
// The v6.x rules alone: what the scenarios of the v6.2 seeds offer (their exact-count formulas know no other).
inline std::vector<std::string> v6_batch_rule_names() {
  return {std::string(kBatchRuleNames(BatchRule::v6_2)), std::string(kBatchRuleNames(BatchRule::v6_7))};
}
inline std::vector<std::string> v6_check_mode_names() {
  return {std::string(kCheckModeNames(CheckMode::in_lock)), std::string(kCheckModeNames(CheckMode::after_unlock)),
          std::string(kCheckModeNames(CheckMode::off))};
}

struct free_area {
  PageList free_list[MIGRATE_TYPES];
  std::atomic<unsigned long> nr_free{0};  // blocks of this order on all lists (written under zone->lock)
};

// Model counters written only with zone->lock held (so no atomics); read them when no worker runs.
#define ALLOCLAB_ZONE_LOCK_STATS(X)                                                                     \
  X(lock_acquisitions, sum, "every zone->lock the allocator took, on any thread")                       \
  X(rmqueue_bulk, sum, "pcp refills")                                                                   \
  X(rmqueue_bulk_blocks, sum, "blocks taken off the free lists by refills (the kernel's i)")            \
  X(pages_checked_under_lock, sum, "struct pages check_pcp_refill read inside rmqueue_bulk's lock")     \
  X(rmqueue_bulk_ticks, sum, "clock ticks spent in rmqueue_bulk's critical section (hold time)")        \
  X(free_pcppages_bulk, sum, "bulk returns from pcp lists (frees, drains)")                             \
  X(free_pcppages_blocks, sum, "blocks the bulk returns gave back")                                     \
  X(bulkfree_pages_checked_under_lock, sum, "head pages bulkfree_pcp_prepare checked (v6.2 free side)") \
  X(rmqueue_buddy, sum, "allocations that bypassed the pcp lists")                                      \
  X(free_one_page, sum, "frees that bypassed them")                                                     \
  X(fallbacks, sum, "__rmqueue_fallback steals")                                                        \
  X(pageblocks_claimed, sum, "pageblocks whose migratetype a steal changed")                            \
  X(isolation_changes, sum, "set/unset_migratetype_isolate")
struct ZoneLockStats {
  ALLOCLAB_COUNTERS(ZoneLockStats, ALLOCLAB_ZONE_LOCK_STATS)
};

class PerCpuPages;

class alignas(64) Zone {
 public:
  Zone(LockDomain& locks, int nid, zone_type idx, uint64_t start_pfn, uint64_t pages, Page* mem_map,
       std::atomic<uint8_t>* pageblock_flags, BatchRule rule, CheckMode check);
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;

  // ---- identity and geometry (read-only after construction) ----
  const int node;
  const zone_type idx;
  const uint64_t zone_start_pfn;
  const uint64_t spanned_pages;                 // == present_pages == managed_pages: no holes, nothing reserved
  Page* const zone_mem_map;                     // the zone's first page
  std::atomic<uint8_t>* const pageblock_flags;  // one migratetype per pageblock
  const BatchRule batch_rule;
  const CheckMode check_mode;

  uint64_t managed_pages() const { return spanned_pages; }
  bool populated() const { return spanned_pages != 0; }
  bool zone_spans_pfn(uint64_t pfn) const { return pfn >= zone_start_pfn && pfn < zone_start_pfn + spanned_pages; }
  Page* pfn_to_page(uint64_t pfn) const { return zone_mem_map + (pfn - zone_start_pfn); }
  uint64_t page_to_pfn(const Page* p) const { return zone_start_pfn + uint64_t(p - zone_mem_map); }
  uint32_t page_idx(const Page* p) const { return uint32_t(p - zone_mem_map); }
  Page* idx_page(uint32_t i) const { return zone_mem_map + i; }

  // Pageblock migratetype (get_pfnblock_migratetype / set_pageblock_migratetype). Reads are lock-free, as the
  // kernel's; writes happen under zone->lock.
  int get_pfnblock_migratetype(uint64_t pfn) const {
    const std::atomic<uint8_t>& f = pageblock_flags[(pfn - zone_start_pfn) >> pageblock_order];
    vcost::touch(&f, false);
    return f.load(std::memory_order_relaxed);
  }
  int get_pageblock_migratetype(const Page* p) const { return get_pfnblock_migratetype(page_to_pfn(p)); }
  void set_pageblock_migratetype(const Page* p, int mt) {
    std::atomic<uint8_t>& f = pageblock_flags[uint64_t(p - zone_mem_map) >> pageblock_order];
    vcost::touch(&f, true);
    f.store(uint8_t(mt), std::memory_order_relaxed);
  }
  uint64_t nr_pageblocks() const { return (spanned_pages + pageblock_nr_pages - 1) >> pageblock_order; }

  // ---- watermarks (set once by the MemorySystem) ----
  unsigned long _watermark[NR_WMARK] = {};
  long lowmem_reserve = 0;          // one zone per node: nothing to reserve for lower zones
  long nr_reserved_highatomic = 0;  // highatomic reservation is not modelled
  unsigned long wmark_pages(int i) const { return _watermark[i]; }
  unsigned long min_wmark_pages() const { return _watermark[WMARK_MIN]; }
  unsigned long low_wmark_pages() const { return _watermark[WMARK_LOW]; }
  unsigned long high_wmark_pages() const { return _watermark[WMARK_HIGH]; }

  // ---- per-CPU pagesets: per_cpu_pageset[cpu] for every model CPU (set by the MemorySystem) ----
  PerCpuPages** per_cpu_pageset = nullptr;
  int pageset_batch = 0, pageset_high = 0, pageset_high_min = 0, pageset_high_max = 0;

  // ---- zone->lock and what it protects ----
  alignas(64) Lock lock;  // the zone->lock
  struct free_area free_area[NR_PAGE_ORDERS];
  ZoneLockStats stats;

  // ---- counters read without the lock ----
  alignas(64) std::atomic<long> vm_stat[NR_VM_ZONE_STAT_ITEMS] = {};
  std::atomic<unsigned long> flags{0};
  std::atomic<long> nr_isolate_pageblock{0};
  std::atomic<uint64_t> nr_bad_pages{0};  // pages bad_page() took out of circulation

  long zone_page_state(zone_stat_item i) const {
    vcost::touch(&vm_stat[i], false);
    return vm_stat[i].load(std::memory_order_relaxed);
  }
  // __mod_zone_page_state: the caller holds zone->lock, so load + store (no locked RMW) is enough.
  void __mod_zone_page_state(zone_stat_item i, long delta) {
    vcost::touch(&vm_stat[i], true);
    vm_stat[i].store(vm_stat[i].load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  void __mod_zone_freepage_state(long nr_pages, int migratetype) {
    __mod_zone_page_state(NR_FREE_PAGES, nr_pages);
    if (is_migrate_cma(migratetype)) __mod_zone_page_state(NR_FREE_CMA_PAGES, nr_pages);
  }
  bool test_flag(zone_flags f) const { return flags.load(std::memory_order_relaxed) & (1ul << f); }
  void set_flag(zone_flags f) { flags.fetch_or(1ul << f, std::memory_order_relaxed); }
  void clear_flag(zone_flags f) { flags.fetch_and(~(1ul << f), std::memory_order_relaxed); }
  bool has_isolate_pageblock() const {
    vcost::touch(&nr_isolate_pageblock, false);
    return nr_isolate_pageblock.load(std::memory_order_relaxed) > 0;
  }

  // zone->lock with the model's own acquisition count (lock_stat counts only the run's workers).
  void lock_zone(LockToken& t) {
    lock.lock(t);
    ++stats.lock_acquisitions;
  }
  void unlock_zone(LockToken& t) { lock.unlock(t); }
};

// ---- free lists (zone->lock held) -----------------------------------------------------------------------------
void add_to_free_list(Page* page, Zone& zone, unsigned order, int migratetype);
void add_to_free_list_tail(Page* page, Zone& zone, unsigned order, int migratetype);
void move_to_free_list(Page* page, Zone& zone, unsigned order, int migratetype);
void del_page_from_free_list(Page* page, Zone& zone, unsigned order);
inline bool free_area_empty(const free_area& area, int migratetype) {
  vcost::touch(&area.free_list[migratetype], false);
  return area.free_list[migratetype].empty();
}
// nr_free of one order, as the fallback and watermark checks read it (racy reads, as the kernel's).
inline unsigned long free_area_nr_free(const free_area& area) {
  vcost::touch(&area.nr_free, false);
  return area.nr_free.load(std::memory_order_relaxed);
}

// ---- buddy core (zone->lock held) -----------------------------------------------------------------------------
// page_is_buddy + find_buddy_page_pfn: the free buddy of `page` at `order`, or nullptr.
Page* find_buddy_page_pfn(Zone& zone, Page* page, uint64_t pfn, unsigned order, uint64_t* buddy_pfn);
void expand(Zone& zone, Page* page, unsigned low, unsigned high, int migratetype);
Page* __rmqueue_smallest(Zone& zone, unsigned order, int migratetype);
Page* __rmqueue_cma_fallback(Zone& zone, unsigned order);
bool __rmqueue_fallback(Zone& zone, unsigned order, int start_migratetype, unsigned alloc_flags);
Page* __rmqueue(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags);
// Frees a block into the buddy lists, merging upward. Accounts NR_FREE_PAGES unless `migratetype` is ISOLATE.
void __free_one_page(Page* page, uint64_t pfn, Zone& zone, unsigned order, int migratetype, fpi_t fpi_flags);
// Moves every free block headed inside page's pageblock to `migratetype`'s list; returns the pages moved (0 when
// the pageblock is not wholly inside the zone). *num_movable counts allocated PageLRU/__PageMovable pages.
int move_freepages_block(Zone& zone, Page* page, int migratetype, int* num_movable);
// split_free_page at pageblock granularity: when the free block holding `pfn` is larger than a pageblock and
// reaches outside [lo, hi), it is replaced on its list by its pageblock-order parts, so that the pageblocks inside
// the range can change type alone (isolate_single_pageblock at the edges of an isolated range; the model's
// cma_activate_area at the edges of an area). Returns true when it split.
bool split_free_page_outside(Zone& zone, uint64_t pfn, uint64_t lo, uint64_t hi);
// Takes one free block off its list for a caller that will own it (compaction, alloc_contig_range): checks the min
// watermark unless the block is isolated, accounts the pages as allocated. Returns 1 << order, or 0 on failure.
int __isolate_free_page(Zone& zone, Page* page, unsigned order);

// ---- watermarks (no lock: racy reads, as the kernel) ------------------------------------------------------------
bool __zone_watermark_ok(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags, long free_pages);
bool zone_watermark_ok(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags);
inline bool zone_watermark_fast(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags, uint32_t gfp);

inline bool zone_watermark_fast(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags, uint32_t) {
  const long free_pages = z.zone_page_state(NR_FREE_PAGES);
  if (!order) {  // fast check for order-0 only: __zone_watermark_unusable_free(z, 0, alloc_flags)
    long reserved = 0;
    if (!(alloc_flags & (ALLOC_HARDER | ALLOC_OOM))) reserved += z.nr_reserved_highatomic;
    if (!(alloc_flags & 0x80 /* ALLOC_CMA */)) reserved += z.zone_page_state(NR_FREE_CMA_PAGES);
    const long usable_free = free_pages - std::min(free_pages, reserved);
    if (usable_free > long(mark) + z.lowmem_reserve) return true;
  }
  // (the GFP_ATOMIC retry at WMARK_MIN only matters with watermark boosting, which is not modelled)
  return __zone_watermark_ok(z, order, mark, alloc_flags, free_pages);
}

// ---- page checks (check_new_page / free_page_is_bad) ---------------------------------------------------------------
// Reads each of the 1 << order descriptors as check_new_pages() does; on a bad one, bad_page() counts it in
// zone.nr_bad_pages and the caller leaks the block (the kernel's behaviour). Returns true when bad.
bool check_new_pages(Zone& zone, Page* page, unsigned order);
bool free_page_is_bad(Zone& zone, Page* page);

}  // namespace alloclab::mm
