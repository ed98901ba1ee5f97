// alloc_contig_range and its helpers (see page_alloc_contig.hpp): mm/page_alloc.c, mm/page_isolation.c and
// mm/compaction.c of v6.2.
#include "alloclab/mm/page_alloc_contig.hpp"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/mm/memory_system.hpp"

namespace alloclab::mm {

namespace {

[[noreturn]] void bad_arg(const std::string& msg) { throw std::invalid_argument(msg); }

// __alloc_contig_migrate_range(cc, start, end).
int __alloc_contig_migrate_range(MigrateContext& mc, compact_control& cc, uint64_t start, uint64_t end) {
  const migration_target_control mtc{cc.zone->node, GFP_USER | __GFP_MOVABLE | __GFP_RETRY_MAYFAIL | __GFP_THISNODE};
  uint64_t pfn = start;
  unsigned tries = 0;
  int ret = 0;
  // lru_cache_disable(): nothing to drain in the model (no per-CPU LRU batches); folio_add_lru takes lru_lock.
  while (pfn < end || !cc.migratepages.empty()) {
    if (cc.fatal_signal_pending && cc.fatal_signal_pending()) {
      ret = -EINTR;
      break;
    }
    if (cc.migratepages.empty()) {
      ret = isolate_migratepages_range(mc, cc, pfn, end);
      if (ret && ret != -EAGAIN) break;
      pfn = cc.migrate_pfn;
      tries = 0;
    } else if (++tries == 5) {
      ret = -EBUSY;
      break;
    }
    // (reclaim_clean_pages_from_list: shmem pages are not clean file pages; nothing to reclaim)
    ret = migrate_pages(mc, cc, cc.migratepages, mtc);
    // On -ENOMEM, migrate_pages() bails out right away. It is pointless to retry again over this error.
    if (ret == -ENOMEM) break;
  }
  // lru_cache_enable()
  if (ret < 0) {
    putback_movable_pages(mc, cc, cc.migratepages);
    return ret;
  }
  return 0;
}

// isolate_freepages_block(cc, &start, end, freelist, 0, strict=true): the number of pages isolated, 0 when a page
// of [blockpfn, end_pfn) is not free.
uint64_t isolate_freepages_block(Zone& zone, uint64_t blockpfn, uint64_t end_pfn,
                                 std::vector<std::pair<Page*, unsigned>>& freelist, ContigStats& st) {
  uint64_t total_isolated = 0;
  bool locked = false;
  LockToken t;
  for (; blockpfn < end_pfn; blockpfn++) {
    // Periodically drop the lock (if held) regardless of its contention, to give chance to IRQs.
    if (!(blockpfn % COMPACT_CLUSTER_MAX) && locked) {
      zone.unlock_zone(t);
      locked = false;
    }
    Page* page = zone.pfn_to_page(blockpfn);
    memmap_access(page, 1, Stream::load);
    if (!PageBuddy(*page)) break;  // strict: isolate_fail
    if (!locked) {
      zone.lock_zone(t);
      locked = true;
      ++st.take_sections;
      if (!PageBuddy(*page)) break;  // recheck under the lock
    }
    // Found a free page, will break it into order-0 pages.
    const unsigned order = buddy_order(*page);
    const int isolated = __isolate_free_page(zone, page, order);
    if (!isolated) break;
    page->private_ = order;  // set_page_private(page, order)
    total_isolated += uint64_t(isolated);
    freelist.emplace_back(page, order);
    blockpfn += uint64_t(isolated) - 1;  // advance to the end of the split page
  }
  if (locked) zone.unlock_zone(t);
  if (blockpfn > end_pfn) blockpfn = end_pfn;
  // Strict isolation: every page requested must have been isolated.
  if (blockpfn < end_pfn) total_isolated = 0;
  return total_isolated;
}

// isolate_freepages_range(cc, start_pfn, end_pfn): the pfn after the last page taken, or 0 on failure (nothing
// taken then). The chunks are split into order-0 pages with one reference each (split_map_pages).
uint64_t isolate_freepages_range(MemorySystem& ms, Zone& zone, uint64_t start_pfn, uint64_t end_pfn, ContigStats& st) {
  std::vector<std::pair<Page*, unsigned>> freelist;
  uint64_t isolated = 0;
  uint64_t pfn = start_pfn;
  uint64_t block_end_pfn = (pfn & ~(pageblock_nr_pages - 1)) + pageblock_nr_pages;
  for (; pfn < end_pfn; pfn += isolated, block_end_pfn += pageblock_nr_pages) {
    block_end_pfn = std::min(block_end_pfn, end_pfn);
    // pfn could pass block_end_pfn if the isolated free page is more than pageblock order.
    if (pfn >= block_end_pfn) block_end_pfn = std::min((pfn & ~(pageblock_nr_pages - 1)) + pageblock_nr_pages, end_pfn);
    isolated = isolate_freepages_block(zone, pfn, block_end_pfn, freelist, st);
    if (!isolated) break;
  }
  if (pfn < end_pfn) {
    // Loop terminated early, cleanup: the chunks go back to the (isolated) free lists.
    for (auto [page, order] : freelist) {
      LockToken t;
      zone.lock_zone(t);
      __free_one_page(page, zone.page_to_pfn(page), zone, order, zone.get_pageblock_migratetype(page), FPI_NONE);
      zone.unlock_zone(t);
    }
    return 0;
  }
  // split_map_pages: post_alloc_hook + split_page for every chunk.
  for (auto [page, order] : freelist) {
    const uint64_t n = uint64_t(1) << order;
    memmap_access(page, n, Stream::store);
    for (uint64_t i = 0; i < n; ++i) {
      page[i].private_ = 0;
      set_page_refcounted(page[i]);
    }
    st.pages_taken += n;
  }
  (void)ms;
  return pfn;
}

}  // namespace

int test_pages_isolated(MemorySystem& ms, uint64_t start_pfn, uint64_t end_pfn, uint64_t* locks_taken) {
  Page* first = ms.pfn_to_page(start_pfn);
  if (!first || start_pfn >= end_pfn) return -EBUSY;
  Zone& zone = ms.page_zone(first);
  // Note: pageblock_nr_pages != MAX_ORDER. Then, chunks of free pages are not aligned to pageblock_nr_pages.
  // Then we just check migratetype first.
  for (uint64_t pfn = start_pfn; pfn < end_pfn; pfn += pageblock_nr_pages)
    if (!zone.zone_spans_pfn(pfn) || !is_migrate_isolate(zone.get_pfnblock_migratetype(pfn))) return -EBUSY;
  if (!is_migrate_isolate(zone.get_pfnblock_migratetype(end_pfn - 1))) return -EBUSY;
  // Check all pages are free or marked as ISOLATED.
  LockToken t;
  zone.lock_zone(t);
  if (locks_taken) ++*locks_taken;
  uint64_t pfn = start_pfn;
  while (pfn < end_pfn) {  // __test_page_isolated_in_pageblock
    const Page* page = zone.pfn_to_page(pfn);
    memmap_access(page, 1, Stream::load);
    if (!PageBuddy(*page)) break;
    pfn += uint64_t(1) << buddy_order(*page);
  }
  zone.unlock_zone(t);
  return pfn < end_pfn ? -EBUSY : 0;
}

uint64_t free_contig_range(MemorySystem& ms, int cpu, uint64_t pfn, uint64_t nr_pages) {
  uint64_t count = 0;
  for (; nr_pages--; pfn++) {
    if (pfn % pageblock_nr_pages == 0) ms.interruption_point();  // (cma_release in a teardown)
    Page* page = ms.pfn_to_page(pfn);
    if (!page) bad_arg("pfn: " + std::to_string(pfn) + " is outside every node");
    count += page_ref_count(*page) != 1;
    ms.free_pages(cpu, page, 0);  // __free_page
  }
  return count;
}

int alloc_contig_range(MigrateContext& mc, int cpu, uint64_t start, uint64_t end, int migratetype, gfp_t gfp_mask,
                       ContigStats* stats, const std::function<bool()>& fatal_signal_pending) {
  MemorySystem& ms = mc.ms;
  if (migratetype != MIGRATE_MOVABLE && migratetype != MIGRATE_CMA)
    bad_arg("migratetype: " + std::string(migratetype_name(migratetype)) + " (allowed: Movable or CMA)");
  Page* first = start < end ? ms.pfn_to_page(start) : nullptr;
  Page* last = first ? ms.pfn_to_page(end - 1) : nullptr;
  if (!first || !last || &ms.page_zone(first) != &ms.page_zone(last))
    bad_arg("pfn range: [" + std::to_string(start) + ", " + std::to_string(end) +
            ") must be non-empty and inside one zone");
  Zone& zone = ms.page_zone(first);
  const uint64_t iso_start = start & ~(pageblock_nr_pages - 1);
  const uint64_t iso_end = (end + pageblock_nr_pages - 1) & ~(pageblock_nr_pages - 1);
  if (!zone.zone_spans_pfn(iso_start) || !zone.zone_spans_pfn(iso_end - 1))
    bad_arg("pfn range: [" + std::to_string(start) + ", " + std::to_string(end) +
            ") is not inside whole pageblocks of one zone");
  (void)gfp_mask;  // cc.gfp_mask: the model's reclaim-free allocator has nothing to take from it

  ContigStats local;
  ContigStats& st = stats ? *stats : local;
  ++st.calls;
  compact_control cc;
  cc.zone = &zone;
  cc.cpu = cpu;
  cc.fatal_signal_pending = fatal_signal_pending;
  cc.stats = &st.migrate;
  const uint64_t nr_blocks = (iso_end - iso_start) / pageblock_nr_pages;
  PerCpuPages& pcp = ms.pcp(cpu, zone.node);
  int ret;
  uint64_t outer_start, outer_end;
  uint64_t t0 = clock_ticks(), t1;

  // 2.+3. Isolate the pageblocks (zone->lock each), then drain the pcps (pcpu_drain_mutex).
  uint64_t to_drain = 0;  // (a racy read of other CPUs' pcp->count, as drain_all_pages does)
  for (int c = 0; c < ms.nr_cpus(); ++c)
    if (zone.per_cpu_pageset[c] && zone.per_cpu_pageset[c]->nr() > 0) ++to_drain;
  ret = ms.start_isolate_page_range(iso_start, iso_end, migratetype);
  t1 = clock_ticks();
  st.isolate_ticks += t1 - t0;
  if (ret) {
    ++st.ebusy;
    return ret;  // nothing isolated, nothing drained
  }
  ++st.isolations;
  st.pageblocks_isolated += nr_blocks;
  st.pcps_to_drain += to_drain;

  // 4. Migrate every page in use.
  {
    const uint64_t refills0 = pcp.stats.refills;  // only this caller allocates on its pcp
    ret = __alloc_contig_migrate_range(mc, cc, start, end);
    st.target_refills += pcp.stats.refills - refills0;
    t0 = clock_ticks();
    st.migrate_ticks += t0 - t1;
  }
  if (ret && ret != -EBUSY) goto done;
  ret = 0;

  // 6. Pages from [start, end) are within pageblock_nr_pages aligned blocks that are marked MIGRATE_ISOLATE, and
  // (if migration worked) all free. The first and last may be part of a larger buddy: find where it starts.
  {
    unsigned order = 0;
    outer_start = start;
    for (;;) {
      const Page* head = ms.pfn_to_page(outer_start);
      memmap_access(head, 1, Stream::load);
      if (PageBuddy(*head)) break;
      if (++order > MAX_PAGE_ORDER || !zone.zone_spans_pfn(outer_start & (~uint64_t(0) << order))) {
        outer_start = start;
        break;
      }
      outer_start &= ~uint64_t(0) << order;
    }
    if (outer_start != start) {
      order = buddy_order(*ms.pfn_to_page(outer_start));
      // outer_start page could be a small order buddy page that does not include the start page.
      if (outer_start + (uint64_t(1) << order) <= start) outer_start = start;
    }
    ret = test_pages_isolated(ms, outer_start, end, &st.test_locks);
    t1 = clock_ticks();
    st.test_ticks += t1 - t0;
    if (ret) {
      ret = -EBUSY;
      goto done;
    }
  }

  // 7.+8. Grab the isolated pages from the free lists, split them, give back what lies outside [start, end).
  outer_end = isolate_freepages_range(ms, zone, outer_start, end, st);
  if (!outer_end) {
    ret = -EBUSY;
    st.take_ticks += clock_ticks() - t1;
    goto done;
  }
  {
    // The caller's own CPU events: written only by this thread, so the deltas are its frees' paths.
    const CpuEvents& ev = ms.events(cpu);
    const uint64_t pcp0 = ev.free_to_pcp.load(), bulk0 = ev.free_pcp_bulk.load(), fail0 = ev.pcp_trylock_fail.load();
    if (start != outer_start) {
      free_contig_range(ms, cpu, outer_start, start - outer_start);
      st.headtail_frees += start - outer_start;
    }
    if (end != outer_end) {
      free_contig_range(ms, cpu, end, outer_end - end);
      st.headtail_frees += outer_end - end;
    }
    st.headtail_to_pcp += ev.free_to_pcp.load() - pcp0;
    st.headtail_pcp_bulk += ev.free_pcp_bulk.load() - bulk0;
    st.headtail_trylock_fail += ev.pcp_trylock_fail.load() - fail0;
  }
  st.take_ticks += clock_ticks() - t1;

done:
  // 9. Undo the isolation (zone->lock per pageblock).
  t0 = clock_ticks();
  ms.undo_isolate_page_range(iso_start, iso_end, migratetype);
  st.pageblocks_undone += nr_blocks;
  st.undo_ticks += clock_ticks() - t0;
  switch (ret) {
    case 0: ++st.ok; break;
    case -EBUSY: ++st.ebusy; break;
    case -ENOMEM: ++st.enomem; break;
    case -EINTR: ++st.eintr; break;
    default: break;
  }
  return ret;
}

}  // namespace alloclab::mm
