// Per-CPU pages (struct per_cpu_pages): the lists a CPU allocates from and frees to without zone->lock, how they
// are refilled (rmqueue_bulk: one zone->lock per refill) and drained (free_pcppages_bulk), and the two batch rules.
//
// Models: mm/page_alloc.c of v6.2 (the seed's kernel) and, selectably, the pcp batch/high rules of v6.7.
//   * One PerCpuPages per (zone, model CPU), allocated in the CPU's node-local memory, with its pcp->lock taken by
//     trylock on the allocation and free paths (pcp_spin_trylock: a failure sends the caller to the buddy lists
//     under zone->lock, as a concurrent drain does in the kernel) and by lock in drains.
//   * NR_PCP_LISTS = 3 migratetypes x orders 0..3, plus one THP list (order 9, any migratetype) as in v6.2
//     (later kernels split the THP list by migratetype). pcp_allowed_order(): order <= 3 or order == 9.
//   * BatchRule::v6_2: a refill pulls batch = max(pcp->batch >> order, 2) blocks (batch 63 on a zone of 1 GiB or
//     more: 63 order-0 pages, 2 order-9 pages); frees go to the list and, at pcp->high, free_pcppages_bulk()
//     returns nr_pcp_free() pages (batch << free_factor, clamped to [batch, high - batch]; everything when freeing
//     orders 1..3 after other frees), round-robin over the lists.
//   * BatchRule::v6_7: nr_pcp_alloc(): order-0 refills pull base_batch << alloc_factor (alloc_factor grows by one
//     per refill without a free in between, up to CONFIG_PCP_BATCH_SCALE_MAX = 5, is halved by each free, and is
//     capped by high - count - base_batch); pcp->high grows by each refill toward high_max and is clamped between
//     high_min and high_max on frees; nr_pcp_free() frees free_count pages clamped to [batch, high - batch].
//     pcp->high starts at high_min [unsure: v6.7 starts it at 0 and lets the first free clamp it].
//   * BatchRule::v2_6_35: the per-CPU pagesets of 2.6.35 mm/page_alloc.c. Only order 0 is cached (buffered_rmqueue:
//     `if (likely(order == 0))`, the rest under zone->lock); zone_batchsize() caps the batch at 512 KiB instead of
//     1 MiB (present_pages / 1024, at most 512 KiB / PAGE_SIZE = 128, / 4, rounddown_pow_of_two(b + b / 2) - 1:
//     31 on a zone of 512 MiB or more); setup_pageset(): pcp->high = 6 x batch (186), no high_min/max, no
//     free_factor; a refill is rmqueue_bulk(zone, 0, pcp->batch, ...) under zone->lock; free_hot_cold_page adds
//     the page and, when pcp->count >= pcp->high, free_pcppages_bulk(zone, pcp->batch, pcp) returns one batch.
//     2.6.35 has no pcp->lock (the lists are guarded by local_irq_save); the model keeps its pcp->lock as the stand-in
//     (taken only by the list's own CPU during a run: uncontended, one atomic on a CPU-local line) and lock_stat
//     shows it. free_pcppages_bulk drains from the freed page's list first (2.6.35 starts its round-robin at list 1
//     and takes batch_free pages per list: the same pages in a run that frees one migratetype).
//   * CheckMode: where check_pcp_refill() (check_new_pages() on each of the 1 << order struct pages of every block
//     a refill pulls) runs: in_lock = v6.2, inside rmqueue_bulk's zone->lock; after_unlock = Halbuer's patch,
//     after the unlock with pcp->lock still held, dropping bad pages from the list; off = v6.4+ without
//     check_pages_enabled (no refill check, no bulkfree check, no check of buddy-path allocations);
//     prep_new_page = 2.6.35: no check inside rmqueue_bulk or free_pcppages_bulk; buffered_rmqueue ->
//     prep_new_page -> check_new_page on each struct page of every block it hands out, after local_irq_restore
//     (outside zone->lock and the pcp section; a bad block is leaked and the allocation retried: `goto again`),
//     and free_pages_check on every page freed, before the pcp list (free_hot_cold_page) or zone->lock
//     (__free_pages_ok).
// Virtual time: the pcp lists charge as page.hpp's lists, and pcp->count is a tracked line (a drain on another CPU
// reads it racily and pays its transfer).
// Leaves out: the vmstat worker (decay_pcp_high, drain of remote pcps, refresh of zone counters),
// PCPF_FREE_HIGH_BATCH (v6.8), CPU hotplug, the boot pagesets, zone_statistics (NUMA hit/miss events).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "alloclab/base/counters.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/page.hpp"
#include "alloclab/mm/zone.hpp"

namespace alloclab::mm {

inline constexpr int NR_PCP_THP = 1;
inline constexpr int NR_LOWORDER_PCP_LISTS = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER + 1);
inline constexpr int NR_PCP_LISTS = NR_LOWORDER_PCP_LISTS + NR_PCP_THP;
inline constexpr int CONFIG_PCP_BATCH_SCALE_MAX = 5;
inline constexpr uint8_t PCPF_PREV_FREE_HIGH_ORDER = 1u << 0;

inline bool pcp_allowed_order(unsigned order) { return order <= PAGE_ALLOC_COSTLY_ORDER || order == pageblock_order; }
// The orders the zone's rule caches on its pcp lists: order 0 only under 2.6.35 (buffered_rmqueue, free_hot_cold_page).
inline bool zone_pcp_allowed_order(const Zone& zone, unsigned order) {
  return zone.batch_rule == BatchRule::v2_6_35 ? order == 0 : pcp_allowed_order(order);
}
inline int order_to_pindex(int migratetype, unsigned order) {
  if (order > PAGE_ALLOC_COSTLY_ORDER) return NR_LOWORDER_PCP_LISTS;  // the THP list
  return int(MIGRATE_PCPTYPES * order) + migratetype;
}
inline unsigned pindex_to_order(int pindex) {
  return pindex == NR_LOWORDER_PCP_LISTS ? pageblock_order : unsigned(pindex / MIGRATE_PCPTYPES);
}

// Model counters written only with this pcp->lock held; read them when no worker runs.
#define ALLOCLAB_PCP_STATS(X)                                                                           \
  X(refills, sum, "rmqueue_bulk calls (each one zone->lock)")                                           \
  X(refill_blocks, sum, "blocks the refills put on the lists")                                          \
  X(pages_checked_under_lock, sum, "struct pages check_pcp_refill read inside zone->lock (v6.2)")       \
  X(pages_checked_after_unlock, sum, "struct pages check_pcp_refill read after zone->lock (the patch)") \
  X(bulk_frees, sum, "free_pcppages_bulk calls from this pcp (frees and drains)")                       \
  X(bulk_free_blocks, sum, "blocks the bulk frees returned")                                            \
  X(allocs, sum, "blocks handed out from the lists")                                                    \
  X(frees, sum, "blocks freed to the lists")                                                            \
  X(drain_locks, sum, "drain_pages_zone calls that took pcp->lock (the racy count said it had pages)")  \
  X(drains, sum, "drains that found pages under pcp->lock (one free_pcppages_bulk, one zone->lock)")
struct PcpStats {
  ALLOCLAB_COUNTERS(PcpStats, ALLOCLAB_PCP_STATS)
};

class alignas(64) PerCpuPages {
 public:
  PerCpuPages(LockDomain& locks, int cpu);
  PerCpuPages(const PerCpuPages&) = delete;
  PerCpuPages& operator=(const PerCpuPages&) = delete;

  Lock lock;  // pcp->lock
  // Pages (not blocks) on the lists. Written under lock; read without it only by drain_all_pages to skip empty
  // pcps (the kernel's racy read), hence a relaxed atomic updated with load + store.
  std::atomic<int> count{0};
  int high = 0, high_min = 0, high_max = 0, batch = 0;
  int free_factor = 0;   // v6.2
  int free_count = 0;    // v6.7
  int alloc_factor = 0;  // v6.7
  uint8_t flags = 0;
  const int cpu;
  PageList lists[NR_PCP_LISTS];
  PcpStats stats;

  int nr() const {
    vcost::touch(&count, false);
    return count.load(std::memory_order_relaxed);
  }
  void add_count(int delta) {
    vcost::touch(&count, true);
    count.store(count.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
};

// ---- allocation side (mm/page_alloc.c) --------------------------------------------------------------------------
// Blocks a refill pulls under the zone's batch rule (the v6.2 inline computation or v6.7's nr_pcp_alloc()).
// pcp->lock held (v6.7 updates alloc_factor and high).
int nr_pcp_alloc(PerCpuPages& pcp, const Zone& zone, unsigned order);
// Takes zone->lock once and moves up to `count` blocks of `order` to the tail of `list`, with the zone's
// CheckMode; returns the blocks added. pcp->lock held.
int rmqueue_bulk(Zone& zone, unsigned order, int count, PerCpuPages& pcp, PageList& list, int migratetype,
                 unsigned alloc_flags);
// pcp->lock held: pops the first block of the list, refilling it first when empty.
inline Page* __rmqueue_pcplist(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags, PerCpuPages& pcp,
                               PageList& list);
// Trylocks pcp->lock of `cpu`; nullptr when the trylock fails or the zone has nothing to give.
inline Page* rmqueue_pcplist(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags, int cpu,
                             bool* trylock_failed);
// One block straight from the buddy lists under zone->lock (orders the pcp does not cache, or pcp trylock failed).
Page* rmqueue_buddy(Zone& zone, unsigned order, unsigned alloc_flags, int migratetype);

// ---- free side ---------------------------------------------------------------------------------------------------
// Takes zone->lock once and returns `count` pages from pcp's lists to the buddy, round-robin from pindex.
// pcp->lock held.
void free_pcppages_bulk(Zone& zone, int count, PerCpuPages& pcp, int pindex);
// Adds a block to the pcp list and frees a batch when the list passes high. pcp->lock held.
inline void free_unref_page_commit(Zone& zone, PerCpuPages& pcp, Page* page, int migratetype, unsigned order);
void __free_unref_page_commit_v67(Zone& zone, PerCpuPages& pcp, Page* page, int migratetype, unsigned order);
// v6.2 nr_pcp_free(): pages one bulk return frees (updates free_factor). pcp->lock held.
int nr_pcp_free_v62(PerCpuPages& pcp, int high, int batch, bool free_high);
// free_one_page(): one block to the buddy lists under zone->lock.
void free_one_page(Zone& zone, Page* page, uint64_t pfn, unsigned order, int migratetype, fpi_t fpi_flags);
// Returns every page of cpu's pcp for `zone` to the buddy (takes pcp->lock, then zone->lock if it has pages).
void drain_pages_zone(Zone& zone, int cpu);

// ---- sizing (mm/page_alloc.c: zone_batchsize, zone_highsize)
// ---------------------------------------------------------
// pcp->batch for a zone of `managed_pages` under `rule` (2.6.35 caps the batch at 512 KiB, v6.x at 1 MiB).
int zone_batchsize(uint64_t managed_pages, BatchRule rule = BatchRule::v6_2);
// high for `cpus_of_node` CPUs local to the zone; `high_fraction` 0 = from the low watermark.
int zone_highsize(const Zone& zone, int batch, int cpus_of_node, int high_fraction);

// ---- the counting model (for exact-count promises)
// -------------------------------------------------------------------- The batch rules above evaluated on counts alone,
// for one pcp that starts empty, allocates `count` blocks of a pcp order without a free in between, then frees them
// all, with trylocks that never fail, no drains, no zone flags (the zone never goes below its high watermark) and no
// failed checks. refills = rmqueue_bulk calls (one zone->lock each), bulk_frees = free_pcppages_bulk calls (one
// zone->lock each).
struct PcpExpect {
  uint64_t refills = 0, bulk_frees = 0;
  uint64_t max_pcp_pages = 0;  // the most pages the pcp held
};
PcpExpect pcp_expect_alloc_then_free(int batch, int high_min, int high_max, bool v67, unsigned order, uint64_t count);

// ---- the hot paths, inline (the kernel's are static functions of one file) ------------------------------------------

inline Page* __rmqueue_pcplist(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags, PerCpuPages& pcp,
                               PageList& list) {
  if (list.empty()) {
    const int batch = nr_pcp_alloc(pcp, zone, order);
    const int alloced = rmqueue_bulk(zone, order, batch, pcp, list, migratetype, alloc_flags);
    pcp.add_count(alloced << order);
    if (__builtin_expect(list.empty(), 0)) return nullptr;
  }
  // (check_new_pcp() is a no-op without CONFIG_DEBUG_VM or debug_pagealloc)
  const uint32_t i = list.head();
  list_del(list, zone.zone_mem_map, i);
  pcp.add_count(-(1 << order));
  ++pcp.stats.allocs;
  return zone.idx_page(i);
}

inline Page* rmqueue_pcplist(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags, int cpu,
                             bool* trylock_failed) {
  PerCpuPages& pcp = *zone.per_cpu_pageset[cpu];
  LockToken t;
  if (__builtin_expect(!pcp.lock.trylock(t), 0)) {  // pcp_spin_trylock: a drain (or, in the kernel, an IRQ) holds it
    *trylock_failed = true;
    return nullptr;
  }
  // On allocation, reduce the number of pages that are batch freed.
  if (zone.batch_rule == BatchRule::v6_2)
    pcp.free_factor >>= 1;
  else
    pcp.free_count >>= 1;
  Page* page =
      __rmqueue_pcplist(zone, order, migratetype, alloc_flags, pcp, pcp.lists[order_to_pindex(migratetype, order)]);
  pcp.lock.unlock(t);
  return page;
}

inline void free_unref_page_commit(Zone& zone, PerCpuPages& pcp, Page* page, int migratetype, unsigned order) {
  const int pindex = order_to_pindex(migratetype, order);
  if (zone.batch_rule == BatchRule::v2_6_35) {
    // 2.6.35 free_hot_cold_page (a hot page: list_add): one batch back to the buddy at pcp->high.
    ++pcp.stats.frees;
    list_add(pcp.lists[pindex], zone.zone_mem_map, zone.page_idx(page));
    pcp.add_count(1);
    if (pcp.nr() >= pcp.high) free_pcppages_bulk(zone, pcp.batch, pcp, pindex);
    return;
  }
  if (zone.batch_rule != BatchRule::v6_2) return __free_unref_page_commit_v67(zone, pcp, page, migratetype, order);
  ++pcp.stats.frees;
  list_add(pcp.lists[pindex], zone.zone_mem_map, zone.page_idx(page));
  pcp.add_count(1 << order);
  // High orders other than THP on the pcp fragment memory: free them all when freeing without allocating.
  const bool free_high = pcp.free_factor && order && order <= PAGE_ALLOC_COSTLY_ORDER;
  // nr_pcp_high() of v6.2
  int high = pcp.high;
  if (__builtin_expect(!high || free_high, 0))
    high = 0;
  else if (__builtin_expect(zone.test_flag(ZONE_RECLAIM_ACTIVE), 0))
    high = std::min(pcp.batch << 2, high);
  if (pcp.nr() >= high) free_pcppages_bulk(zone, nr_pcp_free_v62(pcp, high, pcp.batch, free_high), pcp, pindex);
}

}  // namespace alloclab::mm
