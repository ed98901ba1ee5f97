// Per-CPU page lists of mm/page_alloc.c: rmqueue_pcplist, rmqueue_bulk (with the seed's check placement),
// rmqueue_buddy, free_unref_page_commit, free_pcppages_bulk, drain_pages_zone, and the v6.2 / v6.7 batch and high
// rules. See pcp.hpp for what is modelled and what is not.
#include "alloclab/mm/pcp.hpp"

#include <algorithm>
#include <bit>

#include "alloclab/mm/gfp.hpp"

namespace alloclab::mm {

PerCpuPages::PerCpuPages(LockDomain& locks, int c) : lock(locks, "pcp->lock"), cpu(c) {}

// ---- sizing ------------------------------------------------------------------------------------------------------

int zone_batchsize(uint64_t managed_pages, BatchRule rule) {
  // About a quarter of a megabyte per batch, but no more than 1/1024 of the zone; then 2^n - 1 (v6.2). 2.6.35
  // zone_batchsize(): `if (batch * PAGE_SIZE > 512 * 1024) batch = (512 * 1024) / PAGE_SIZE;` on present_pages / 1024.
  const uint64_t cap = rule == BatchRule::v2_6_35 ? (512u * 1024) / PAGE_SIZE : (1u << 20) / PAGE_SIZE;
  uint64_t batch = std::min<uint64_t>(managed_pages >> 10, cap);
  batch /= 4;
  if (batch < 1) batch = 1;
  batch = std::bit_floor(batch + batch / 2) - 1;
  return int(batch);
}

int zone_highsize(const Zone& zone, int batch, int cpus_of_node, int high_fraction) {
  const uint64_t total_pages = high_fraction ? zone.managed_pages() / uint64_t(high_fraction) : zone.low_wmark_pages();
  const int nr_split_cpus = std::max(cpus_of_node, 1);
  const int high = int(total_pages / uint64_t(nr_split_cpus));
  return std::max(high, batch << 2);
}

// ---- allocation --------------------------------------------------------------------------------------------------

int nr_pcp_alloc(PerCpuPages& pcp, const Zone& zone, unsigned order) {
  if (zone.batch_rule == BatchRule::v2_6_35) return pcp.batch;  // rmqueue_bulk(zone, 0, pcp->batch, ...): order 0
  if (zone.batch_rule == BatchRule::v6_2) {
    int batch = pcp.batch;
    if (batch > 1) batch = std::max(batch >> order, 2);
    return batch;
  }
  // v6.7
  int high = pcp.high;
  const int base_batch = pcp.batch;
  if (high < base_batch) return 1;
  int batch = order ? base_batch : (base_batch << pcp.alloc_factor);
  // With a larger pcp->high we could have avoided going to the zone.
  if (high < pcp.high_max && !zone.test_flag(ZONE_BELOW_HIGH)) high = pcp.high = std::min(high + batch, pcp.high_max);
  if (!order) {
    const int max_nr_alloc = std::max(high - pcp.nr() - base_batch, base_batch);
    // Double the pages allocated each time there is a subsequent refill without a free in between.
    if (batch <= max_nr_alloc && pcp.alloc_factor < CONFIG_PCP_BATCH_SCALE_MAX) pcp.alloc_factor++;
    batch = std::min(batch, max_nr_alloc);
  }
  if (batch > 1) batch = std::max(batch >> order, 2);
  return batch;
}

int rmqueue_bulk(Zone& zone, unsigned order, int count, PerCpuPages& pcp, PageList& list, int migratetype,
                 unsigned alloc_flags) {
  const CheckMode check = zone.check_mode;
  const uint32_t prev_tail = list.last;  // Halbuer: prev_tail = list->prev
  Page* const base = zone.zone_mem_map;
  int i, allocated = 0;
  LockToken t;
  zone.lock_zone(t);
  const uint64_t t0 = clock_ticks();
  for (i = 0; i < count; ++i) {
    Page* page = __rmqueue(zone, order, migratetype, alloc_flags);
    if (__builtin_expect(page == nullptr, 0)) break;
    if (check == CheckMode::in_lock) {  // v6.2: check_pcp_refill() on every struct page, zone->lock held
      zone.stats.pages_checked_under_lock += uint64_t(1) << order;
      pcp.stats.pages_checked_under_lock += uint64_t(1) << order;
      if (__builtin_expect(check_new_pages(zone, page, order), 0)) continue;
    }
    // Split buddy pages returned by expand() arrive in physical order; the tail keeps the list in pfn order.
    list_add_tail(list, base, zone.page_idx(page));
    allocated++;
    if (is_migrate_cma(int(page->index))) zone.__mod_zone_page_state(NR_FREE_CMA_PAGES, -(long(1) << order));
  }
  // i blocks left the buddy lists even if some leaked to a failed check.
  zone.__mod_zone_page_state(NR_FREE_PAGES, -(long(i) << order));
  ++zone.stats.rmqueue_bulk;
  zone.stats.rmqueue_bulk_blocks += uint64_t(i);
  zone.stats.rmqueue_bulk_ticks += clock_ticks() - t0;
  zone.unlock_zone(t);

  if (check == CheckMode::after_unlock) {
    // The patch: check the appended pages after the critical section, pcp->lock still held.
    allocated = 0;
    uint32_t pos = prev_tail == kNoPage ? list.head() : base[prev_tail].lru.next;
    while (pos != kNoPage) {
      const uint32_t next = base[pos].lru.next;
      pcp.stats.pages_checked_after_unlock += uint64_t(1) << order;
      if (__builtin_expect(check_new_pages(zone, base + pos, order), 0))
        list_del(list, base, pos);
      else
        allocated++;
      pos = next;
    }
  }
  ++pcp.stats.refills;
  pcp.stats.refill_blocks += uint64_t(allocated);
  return allocated;
}

Page* rmqueue_buddy(Zone& zone, unsigned order, unsigned alloc_flags, int migratetype) {
  Page* page;
  do {
    page = nullptr;
    LockToken t;
    zone.lock_zone(t);
    ++zone.stats.rmqueue_buddy;
    if (order > 0 && (alloc_flags & ALLOC_HARDER)) page = __rmqueue_smallest(zone, order, MIGRATE_HIGHATOMIC);
    if (!page) {
      page = __rmqueue(zone, order, migratetype, alloc_flags);
      if (!page) {
        zone.unlock_zone(t);
        return nullptr;
      }
    }
    zone.__mod_zone_freepage_state(-(long(1) << order), int(page->index));
    zone.unlock_zone(t);
    // v6.2 checks buddy-path pages after the unlock; v6.4+ only with check_pages_enabled; 2.6.35 in prep_new_page.
  } while ((zone.check_mode == CheckMode::in_lock || zone.check_mode == CheckMode::after_unlock) &&
           check_new_pages(zone, page, order));
  return page;
}

// ---- free side ---------------------------------------------------------------------------------------------------

void free_pcppages_bulk(Zone& zone, int count, PerCpuPages& pcp, int pindex) {
  int min_pindex = 0, max_pindex = NR_PCP_LISTS - 1;
  // v6.2's bulkfree_pcp_prepare under zone->lock; 2.6.35 checked each page when it was freed (free_pages_check).
  const bool check = zone.check_mode == CheckMode::in_lock || zone.check_mode == CheckMode::after_unlock;
  Page* const base = zone.zone_mem_map;
  count = std::min(pcp.nr(), count);
  pindex = pindex - 1;  // drain the requested pindex first
  uint64_t blocks = 0;
  LockToken t;
  zone.lock_zone(t);
  const bool isolated_pageblocks = zone.has_isolate_pageblock();
  while (count > 0) {
    PageList* list;
    for (;;) {  // round-robin over the lists
      if (++pindex > max_pindex) pindex = min_pindex;
      list = &pcp.lists[pindex];
      if (!list->empty()) break;
      if (pindex == max_pindex) max_pindex--;
      if (pindex == min_pindex) min_pindex++;
      if (min_pindex > max_pindex) break;  // model guard: pcp->count disagreed with the lists
    }
    if (list->empty()) break;
    const unsigned order = pindex_to_order(pindex);
    const int nr_pages = 1 << order;
    do {
      const uint32_t i = list->last;
      Page* page = base + i;
      int mt = int(page->index);
      list_del(*list, base, i);
      count -= nr_pages;
      pcp.add_count(-nr_pages);
      ++blocks;
      if (check) {  // v6.2 bulkfree_pcp_prepare(): the head page, zone->lock held
        ++zone.stats.bulkfree_pages_checked_under_lock;
        if (__builtin_expect(free_page_is_bad(zone, page), 0)) continue;
      }
      if (__builtin_expect(isolated_pageblocks, 0)) mt = zone.get_pageblock_migratetype(page);
      __free_one_page(page, zone.page_to_pfn(page), zone, order, mt, FPI_NONE);
    } while (count > 0 && !list->empty());
  }
  ++zone.stats.free_pcppages_bulk;
  zone.stats.free_pcppages_blocks += blocks;
  zone.unlock_zone(t);
  ++pcp.stats.bulk_frees;
  pcp.stats.bulk_free_blocks += blocks;
}

namespace {

// The kernel's clamp(): min(max(val, lo), hi), defined (as hi) even when lo > hi.
int kclamp(int val, int lo, int hi) { return std::min(std::max(val, lo), hi); }

}  // namespace

// v6.2
int nr_pcp_free_v62(PerCpuPages& pcp, int high, int batch, bool free_high) {
  if (__builtin_expect(free_high, 0)) return pcp.nr();  // free everything when batch freeing high orders
  if (__builtin_expect(high < batch, 0)) return 1;
  const int min_nr_free = batch;
  const int max_nr_free = high - batch;
  // Double the pages freed each time there is a subsequent free without an allocation.
  batch <<= pcp.free_factor;
  if (batch < max_nr_free) pcp.free_factor++;
  return kclamp(batch, min_nr_free, max_nr_free);
}

namespace {

// v6.7
int nr_pcp_free_v67(PerCpuPages& pcp, int batch, int high, bool free_high) {
  if (__builtin_expect(free_high, 0)) return std::min(pcp.nr(), batch << CONFIG_PCP_BATCH_SCALE_MAX);
  if (__builtin_expect(high < batch, 0)) return 1;
  const int min_nr_free = batch;
  const int max_nr_free = high - batch;
  // Free as many pages as were freed in a row, to reduce zone->lock contention.
  return kclamp(pcp.free_count, min_nr_free, max_nr_free);
}

int nr_pcp_high_v67(PerCpuPages& pcp, const Zone& zone, int batch, bool free_high) {
  const int high_min = pcp.high_min, high_max = pcp.high_max;
  const int high = pcp.high = kclamp(pcp.high, high_min, high_max);
  if (__builtin_expect(!high, 0)) return 0;
  if (__builtin_expect(free_high, 0)) {
    pcp.high = std::max(high - (batch << CONFIG_PCP_BATCH_SCALE_MAX), high_min);
    return 0;
  }
  if (zone.test_flag(ZONE_RECLAIM_ACTIVE)) {
    const int free_count = std::max(pcp.free_count, batch);
    pcp.high = std::max(high - free_count, high_min);
    return std::min(batch << 2, pcp.high);
  }
  if (batch <= 0) return high;
  if (zone.test_flag(ZONE_BELOW_HIGH)) {
    const int free_count = std::max(pcp.free_count, batch);
    pcp.high = std::max(high - free_count, high_min);
    return std::max(pcp.nr(), high_min);
  }
  if (pcp.nr() >= high) {
    const int need_high = pcp.free_count + batch;
    // pcp->high should be large enough to hold batch freed pages.
    if (pcp.high < need_high) pcp.high = kclamp(need_high, high_min, high_max);
  }
  return high;
}

}  // namespace

void __free_unref_page_commit_v67(Zone& zone, PerCpuPages& pcp, Page* page, int migratetype, unsigned order) {
  const int pindex = order_to_pindex(migratetype, order);
  ++pcp.stats.frees;
  // On freeing, reduce the number of pages that are batch allocated.
  pcp.alloc_factor >>= 1;
  list_add(pcp.lists[pindex], zone.zone_mem_map, zone.page_idx(page));
  pcp.add_count(1 << order);
  const int batch = pcp.batch;
  bool free_high = false;
  if (order && order <= PAGE_ALLOC_COSTLY_ORDER) {
    free_high = pcp.free_count >= batch && (pcp.flags & PCPF_PREV_FREE_HIGH_ORDER);
    pcp.flags |= PCPF_PREV_FREE_HIGH_ORDER;
  } else if (pcp.flags & PCPF_PREV_FREE_HIGH_ORDER) {
    pcp.flags &= uint8_t(~PCPF_PREV_FREE_HIGH_ORDER);
  }
  if (pcp.free_count < (batch << CONFIG_PCP_BATCH_SCALE_MAX)) pcp.free_count += 1 << order;
  const int high = nr_pcp_high_v67(pcp, zone, batch, free_high);
  if (pcp.nr() >= high) {
    free_pcppages_bulk(zone, nr_pcp_free_v67(pcp, batch, high, free_high), pcp, pindex);
    if (zone.test_flag(ZONE_BELOW_HIGH) && zone_watermark_ok(zone, 0, zone.high_wmark_pages(), 0))
      zone.clear_flag(ZONE_BELOW_HIGH);
  }
}

void free_one_page(Zone& zone, Page* page, uint64_t pfn, unsigned order, int migratetype, fpi_t fpi_flags) {
  LockToken t;
  zone.lock_zone(t);
  ++zone.stats.free_one_page;
  if (__builtin_expect(zone.has_isolate_pageblock() || is_migrate_isolate(migratetype), 0))
    migratetype = zone.get_pfnblock_migratetype(pfn);
  __free_one_page(page, pfn, zone, order, migratetype, fpi_flags);
  zone.unlock_zone(t);
}

void drain_pages_zone(Zone& zone, int cpu) {
  PerCpuPages& pcp = *zone.per_cpu_pageset[cpu];
  if (!pcp.nr()) return;  // the kernel's racy READ_ONCE(pcp->count)
  LockToken t;
  pcp.lock.lock(t);
  ++pcp.stats.drain_locks;
  const int count = pcp.nr();
  if (count) {
    free_pcppages_bulk(zone, count, pcp, 0);
    ++pcp.stats.drains;
  }
  pcp.lock.unlock(t);
}

// ---- the counting model ------------------------------------------------------------------------------------------

namespace {
int kclamp_(int val, int lo, int hi) { return std::min(std::max(val, lo), hi); }
}  // namespace

PcpExpect pcp_expect_alloc_then_free(int batch, int high_min, int high_max, bool v67, unsigned order, uint64_t count) {
  PcpExpect e;
  const int nr = 1 << order;
  int cnt = 0;  // pages on the list
  int64_t blocks = 0;
  int high = high_min, free_factor = 0, free_count = 0, alloc_factor = 0;
  bool prev_free_high_order = false;
  for (uint64_t i = 0; i < count; ++i) {
    if (!v67)
      free_factor >>= 1;
    else
      free_count >>= 1;
    if (blocks == 0) {
      int b;
      if (!v67) {
        b = batch > 1 ? std::max(batch >> order, 2) : batch;
      } else if (high < batch) {
        b = 1;
      } else {
        b = order ? batch : batch << alloc_factor;
        if (high < high_max) high = std::min(high + b, high_max);
        if (!order) {
          const int max_nr_alloc = std::max(high - cnt - batch, batch);
          if (b <= max_nr_alloc && alloc_factor < CONFIG_PCP_BATCH_SCALE_MAX) alloc_factor++;
          b = std::min(b, max_nr_alloc);
        }
        if (b > 1) b = std::max(b >> order, 2);
      }
      ++e.refills;
      blocks += b;
      cnt += b * nr;
      e.max_pcp_pages = std::max<uint64_t>(e.max_pcp_pages, uint64_t(cnt));
    }
    --blocks;
    cnt -= nr;
  }
  auto bulk = [&](int n) {
    int c = std::min(cnt, n);
    while (c > 0 && blocks > 0) {
      --blocks;
      c -= nr;
      cnt -= nr;
    }
    ++e.bulk_frees;
  };
  for (uint64_t i = 0; i < count; ++i) {
    if (!v67) {
      ++blocks;
      cnt += nr;
      e.max_pcp_pages = std::max<uint64_t>(e.max_pcp_pages, uint64_t(cnt));
      const bool free_high = free_factor && order && order <= PAGE_ALLOC_COSTLY_ORDER;
      const int h = (!high_min || free_high) ? 0 : high_min;
      if (cnt >= h) {
        int n;
        if (free_high) {
          n = cnt;
        } else if (h < batch) {
          n = 1;
        } else {
          int b = batch << free_factor;
          if (b < h - batch) free_factor++;
          n = kclamp_(b, batch, h - batch);
        }
        bulk(n);
      }
      continue;
    }
    alloc_factor >>= 1;
    ++blocks;
    cnt += nr;
    e.max_pcp_pages = std::max<uint64_t>(e.max_pcp_pages, uint64_t(cnt));
    bool free_high = false;
    if (order && order <= PAGE_ALLOC_COSTLY_ORDER) {
      free_high = free_count >= batch && prev_free_high_order;
      prev_free_high_order = true;
    } else {
      prev_free_high_order = false;
    }
    if (free_count < (batch << CONFIG_PCP_BATCH_SCALE_MAX)) free_count += nr;
    high = kclamp_(high, high_min, high_max);
    int h = high;
    if (!h) {
      h = 0;
    } else if (free_high) {
      high = std::max(h - (batch << CONFIG_PCP_BATCH_SCALE_MAX), high_min);
      h = 0;
    } else if (cnt >= h) {
      const int need_high = free_count + batch;
      if (high < need_high) high = kclamp_(need_high, high_min, high_max);
    }
    if (cnt >= h) {
      const int n = free_high ? std::min(cnt, batch << CONFIG_PCP_BATCH_SCALE_MAX)
                              : (h < batch ? 1 : kclamp_(free_count, batch, h - batch));
      bulk(n);
    }
  }
  return e;
}

}  // namespace alloclab::mm
