// The buddy core of mm/page_alloc.c (v6.2): free lists, expand, __rmqueue and its fallback ladder, __free_one_page,
// move_freepages_block, watermarks and the struct page checks. See zone.hpp for what is modelled and what is not.
#include "alloclab/mm/zone.hpp"

#include <algorithm>

#include "alloclab/mm/gfp.hpp"

namespace alloclab::mm {

const char* migratetype_name(int mt) {
  // The names /proc/pagetypeinfo prints.
  static const char* const names[MIGRATE_TYPES] = {"Unmovable",  "Movable", "Reclaimable",
                                                   "HighAtomic", "CMA",     "Isolate"};
  return mt >= 0 && mt < MIGRATE_TYPES ? names[mt] : "?";
}

Zone::Zone(LockDomain& locks, int nid, zone_type zidx, uint64_t start_pfn, uint64_t pages, Page* mem_map,
           std::atomic<uint8_t>* pb_flags, BatchRule rule, CheckMode check)
    : node(nid),
      idx(zidx),
      zone_start_pfn(start_pfn),
      spanned_pages(pages),
      zone_mem_map(mem_map),
      pageblock_flags(pb_flags),
      batch_rule(rule),
      check_mode(check),
      lock(locks, "zone->lock") {}

// ---- free lists ----------------------------------------------------------------------------------------------------

namespace {
inline void nr_free_add(free_area& area, long d) {
  vcost::touch(&area.nr_free, true);
  area.nr_free.store(area.nr_free.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}
}  // namespace

void add_to_free_list(Page* page, Zone& zone, unsigned order, int migratetype) {
  free_area& area = zone.free_area[order];
  page->buddy_list_mt = uint32_t(migratetype);
  list_add(area.free_list[migratetype], zone.zone_mem_map, zone.page_idx(page));
  nr_free_add(area, 1);
}

void add_to_free_list_tail(Page* page, Zone& zone, unsigned order, int migratetype) {
  free_area& area = zone.free_area[order];
  page->buddy_list_mt = uint32_t(migratetype);
  list_add_tail(area.free_list[migratetype], zone.zone_mem_map, zone.page_idx(page));
  nr_free_add(area, 1);
}

// list_move_tail, as v6.2.
void move_to_free_list(Page* page, Zone& zone, unsigned order, int migratetype) {
  free_area& area = zone.free_area[order];
  const uint32_t i = zone.page_idx(page);
  list_del(area.free_list[page->buddy_list_mt], zone.zone_mem_map, i);
  page->buddy_list_mt = uint32_t(migratetype);
  list_add_tail(area.free_list[migratetype], zone.zone_mem_map, i);
}

void del_page_from_free_list(Page* page, Zone& zone, unsigned order) {
  free_area& area = zone.free_area[order];
  list_del(area.free_list[page->buddy_list_mt], zone.zone_mem_map, zone.page_idx(page));
  __ClearPageBuddy(*page);
  page->private_ = 0;
  nr_free_add(area, -1);
}

// ---- buddy core ----------------------------------------------------------------------------------------------------

Page* find_buddy_page_pfn(Zone& zone, Page* page, uint64_t pfn, unsigned order, uint64_t* buddy_pfn) {
  const uint64_t bpfn = pfn ^ (uint64_t(1) << order);  // __find_buddy_pfn
  if (buddy_pfn) *buddy_pfn = bpfn;
  // The kernel relies on the memmap of a MAX_ORDER-aligned block existing; a zone here may end half-way through
  // one, and nothing exists past it.
  if (!zone.zone_spans_pfn(bpfn)) return nullptr;
  Page* buddy = page + (int64_t(bpfn) - int64_t(pfn));
  memmap_access(buddy, 1, Stream::load);
  // page_is_buddy (same zone by construction). PageBuddy is only set under zone->lock, which we hold: once it is
  // seen, private is stable.
  if (PageBuddy_racy(*buddy) && buddy_order(*buddy) == order) return buddy;
  return nullptr;
}

void expand(Zone& zone, Page* page, unsigned low, unsigned high, int migratetype) {
  uint64_t size = uint64_t(1) << high;
  while (high > low) {
    high--;
    size >>= 1;
    add_to_free_list(&page[size], zone, high, migratetype);
    set_buddy_order(page[size], high);
  }
}

Page* __rmqueue_smallest(Zone& zone, unsigned order, int migratetype) {
  for (unsigned current_order = order; current_order < NR_PAGE_ORDERS; ++current_order) {
    if (free_area_empty(zone.free_area[current_order], migratetype)) continue;
    const uint32_t i = zone.free_area[current_order].free_list[migratetype].head();
    Page* page = zone.idx_page(i);
    del_page_from_free_list(page, zone, current_order);
    expand(zone, page, order, current_order, migratetype);
    page->index = uint64_t(migratetype);  // set_pcppage_migratetype
    return page;
  }
  return nullptr;
}

Page* __rmqueue_cma_fallback(Zone& zone, unsigned order) { return __rmqueue_smallest(zone, order, MIGRATE_CMA); }

namespace {

// fallbacks[] of v6.2: which lists a request may steal from, in order.
constexpr int kFallbacks[MIGRATE_PCPTYPES][2] = {
    {MIGRATE_RECLAIMABLE, MIGRATE_MOVABLE},    // UNMOVABLE
    {MIGRATE_RECLAIMABLE, MIGRATE_UNMOVABLE},  // MOVABLE
    {MIGRATE_UNMOVABLE, MIGRATE_MOVABLE},      // RECLAIMABLE
};

bool can_steal_fallback(unsigned order, int start_mt) {
  if (order >= pageblock_order) return true;
  return order >= pageblock_order / 2 || start_mt == MIGRATE_RECLAIMABLE || start_mt == MIGRATE_UNMOVABLE;
}

int find_suitable_fallback(const free_area& area, unsigned order, int migratetype, bool only_stealable,
                           bool* can_steal) {
  if (free_area_nr_free(area) == 0) return -1;
  *can_steal = false;
  for (int fallback_mt : kFallbacks[migratetype]) {
    if (free_area_empty(area, fallback_mt)) continue;
    if (can_steal_fallback(order, migratetype)) *can_steal = true;
    if (!only_stealable || *can_steal) return fallback_mt;
  }
  return -1;
}

void change_pageblock_range(Zone& zone, Page* page, unsigned start_order, int migratetype) {
  uint64_t nr = uint64_t(1) << (start_order - pageblock_order);
  while (nr--) {
    zone.set_pageblock_migratetype(page, migratetype);
    ++zone.stats.pageblocks_claimed;
    page += pageblock_nr_pages;
  }
}

void steal_suitable_fallback(Zone& zone, Page* page, int start_type, bool whole_block) {
  const unsigned current_order = buddy_order(*page);
  const int old_block_type = zone.get_pageblock_migratetype(page);
  if (is_migrate_highatomic(old_block_type)) {
    move_to_free_list(page, zone, current_order, start_type);
    return;
  }
  if (current_order >= pageblock_order) {  // take ownership of whole pageblocks
    change_pageblock_range(zone, page, current_order, start_type);
    move_to_free_list(page, zone, current_order, start_type);
    return;
  }
  // (boost_watermark is not modelled)
  if (!whole_block) {
    move_to_free_list(page, zone, current_order, start_type);
    return;
  }
  int movable_pages = 0;
  const int free_pages = move_freepages_block(zone, page, start_type, &movable_pages);
  if (!free_pages) {  // the block crosses the zone boundary
    move_to_free_list(page, zone, current_order, start_type);
    return;
  }
  int alike_pages;
  if (start_type == MIGRATE_MOVABLE)
    alike_pages = movable_pages;
  else if (old_block_type == MIGRATE_MOVABLE)
    alike_pages = int(pageblock_nr_pages) - (free_pages + movable_pages);
  else
    alike_pages = 0;
  if (free_pages + alike_pages >= int(1u << (pageblock_order - 1))) {
    zone.set_pageblock_migratetype(page, start_type);
    ++zone.stats.pageblocks_claimed;
  }
}

}  // namespace

bool __rmqueue_fallback(Zone& zone, unsigned order, int start_migratetype, unsigned alloc_flags) {
  if (start_migratetype >= MIGRATE_PCPTYPES) return false;
  const unsigned min_order = (alloc_flags & ALLOC_NOFRAGMENT) ? pageblock_order : order;
  bool can_steal = false;
  int fallback_mt = -1;
  int current_order = int(MAX_PAGE_ORDER);
  for (; current_order >= int(min_order); --current_order) {
    fallback_mt = find_suitable_fallback(zone.free_area[current_order], unsigned(current_order), start_migratetype,
                                         false, &can_steal);
    if (fallback_mt == -1) continue;
    // Cannot steal the whole block for a movable request: split the smallest block instead of the largest.
    if (!can_steal && start_migratetype == MIGRATE_MOVABLE && unsigned(current_order) > order) {
      for (current_order = int(order); current_order < int(NR_PAGE_ORDERS); ++current_order) {
        fallback_mt = find_suitable_fallback(zone.free_area[current_order], unsigned(current_order), start_migratetype,
                                             false, &can_steal);
        if (fallback_mt != -1) break;
      }
      if (current_order == int(NR_PAGE_ORDERS)) return false;
    }
    Page* page = zone.idx_page(zone.free_area[current_order].free_list[fallback_mt].head());
    steal_suitable_fallback(zone, page, start_migratetype, can_steal);
    ++zone.stats.fallbacks;
    return true;
  }
  return false;
}

Page* __rmqueue(Zone& zone, unsigned order, int migratetype, unsigned alloc_flags) {
  // Balance movable allocations between regular and CMA areas: CMA first when over half the free pages are CMA.
  if ((alloc_flags & ALLOC_CMA) && zone.zone_page_state(NR_FREE_CMA_PAGES) > zone.zone_page_state(NR_FREE_PAGES) / 2) {
    if (Page* page = __rmqueue_cma_fallback(zone, order)) return page;
  }
  for (;;) {
    Page* page = __rmqueue_smallest(zone, order, migratetype);
    if (page) return page;
    if (alloc_flags & ALLOC_CMA) {
      page = __rmqueue_cma_fallback(zone, order);
      if (page) return page;
    }
    if (!__rmqueue_fallback(zone, order, migratetype, alloc_flags)) return nullptr;
  }
}

namespace {
bool buddy_merge_likely(Zone& zone, uint64_t pfn, uint64_t buddy_pfn, Page* page, unsigned order) {
  if (order >= NR_PAGE_ORDERS - 2) return false;
  const uint64_t higher_page_pfn = buddy_pfn & pfn;
  Page* higher_page = page + (int64_t(higher_page_pfn) - int64_t(pfn));
  return find_buddy_page_pfn(zone, higher_page, higher_page_pfn, order + 1, nullptr) != nullptr;
}
}  // namespace

void __free_one_page(Page* page, uint64_t pfn, Zone& zone, unsigned order, int migratetype, fpi_t fpi_flags) {
  uint64_t buddy_pfn = 0;
  if (!is_migrate_isolate(migratetype)) zone.__mod_zone_freepage_state(long(1) << order, migratetype);
  while (order < MAX_PAGE_ORDER) {
    Page* buddy = find_buddy_page_pfn(zone, page, pfn, order, &buddy_pfn);
    if (!buddy) break;
    if (order >= pageblock_order) {
      // No merging between an isolated (or CMA/highatomic) pageblock and a normal one.
      const int buddy_mt = zone.get_pageblock_migratetype(buddy);
      if (migratetype != buddy_mt && (!migratetype_is_mergeable(migratetype) || !migratetype_is_mergeable(buddy_mt)))
        break;
    }
    del_page_from_free_list(buddy, zone, order);
    const uint64_t combined_pfn = buddy_pfn & pfn;
    page = page + (int64_t(combined_pfn) - int64_t(pfn));
    pfn = combined_pfn;
    order++;
  }
  set_buddy_order(*page, order);
  const bool to_tail = (fpi_flags & FPI_TO_TAIL) || buddy_merge_likely(zone, pfn, buddy_pfn, page, order);
  if (to_tail)
    add_to_free_list_tail(page, zone, order, migratetype);
  else
    add_to_free_list(page, zone, order, migratetype);
}

int move_freepages_block(Zone& zone, Page* page, int migratetype, int* num_movable) {
  if (num_movable) *num_movable = 0;
  const uint64_t pfn = zone.page_to_pfn(page);
  uint64_t start_pfn = pfn & ~(pageblock_nr_pages - 1);
  const uint64_t end_pfn = start_pfn + pageblock_nr_pages - 1;
  if (!zone.zone_spans_pfn(start_pfn)) start_pfn = pfn;
  if (!zone.zone_spans_pfn(end_pfn)) return 0;
  int pages_moved = 0;
  uint64_t visited = 0;
  for (uint64_t p = start_pfn; p <= end_pfn; ++visited) {
    Page* pg = zone.pfn_to_page(p);
    if (!PageBuddy_racy(*pg)) {
      // An allocated page, perhaps being written by its owner: racy reads, as the kernel's.
      if (num_movable &&
          (((flags_racy(*pg) >> PG_lru) & 1) || (mapping_racy(*pg) & PAGE_MAPPING_FLAGS) == PAGE_MAPPING_MOVABLE))
        (*num_movable)++;
      p++;
      continue;
    }
    const unsigned order = buddy_order(*pg);
    move_to_free_list(pg, zone, order, migratetype);
    p += uint64_t(1) << order;
    pages_moved += 1 << order;
  }
  memmap_access(zone.pfn_to_page(start_pfn), visited, Stream::load);  // the struct pages the walk read
  return pages_moved;
}

bool split_free_page_outside(Zone& zone, uint64_t pfn, uint64_t lo, uint64_t hi) {
  for (unsigned order = pageblock_order + 1; order < NR_PAGE_ORDERS; ++order) {
    const uint64_t head_pfn = pfn & ~((uint64_t(1) << order) - 1);
    if (!zone.zone_spans_pfn(head_pfn)) return false;
    Page* head = zone.pfn_to_page(head_pfn);
    memmap_access(head, 1, Stream::load);
    if (!PageBuddy_racy(*head) || buddy_order(*head) != order) continue;
    if (head_pfn >= lo && head_pfn + (uint64_t(1) << order) <= hi) return false;
    const int list_mt = int(head->buddy_list_mt);
    del_page_from_free_list(head, zone, order);
    for (uint64_t b = 0; b < (uint64_t(1) << (order - pageblock_order)); ++b) {
      Page* part = head + b * pageblock_nr_pages;
      set_buddy_order(*part, pageblock_order);
      add_to_free_list(part, zone, pageblock_order, list_mt);
    }
    return true;
  }
  return false;
}

int __isolate_free_page(Zone& zone, Page* page, unsigned order) {
  const int mt = zone.get_pageblock_migratetype(page);
  if (!is_migrate_isolate(mt)) {
    // Obey watermarks as if the page was being allocated (a raised order-0 mark stands for the high-order check).
    const unsigned long watermark = zone.min_wmark_pages() + (1ul << order);
    if (!zone_watermark_ok(zone, 0, watermark, ALLOC_CMA)) return 0;
    zone.__mod_zone_freepage_state(-(long(1) << order), mt);
  }
  del_page_from_free_list(page, zone, order);
  if (order >= pageblock_order - 1) {
    Page* endpage = page + (uint64_t(1) << order) - 1;
    for (; page < endpage; page += pageblock_nr_pages)
      if (migratetype_is_mergeable(zone.get_pageblock_migratetype(page)))
        zone.set_pageblock_migratetype(page, MIGRATE_MOVABLE);
  }
  return 1 << order;
}

// ---- watermarks
// ------------------------------------------------------------------------------------------------------

namespace {
long __zone_watermark_unusable_free(const Zone& z, unsigned order, unsigned alloc_flags) {
  const bool alloc_harder = alloc_flags & (ALLOC_HARDER | ALLOC_OOM);
  long unusable_free = (long(1) << order) - 1;
  if (!alloc_harder) unusable_free += z.nr_reserved_highatomic;
  if (!(alloc_flags & ALLOC_CMA)) unusable_free += z.zone_page_state(NR_FREE_CMA_PAGES);
  return unusable_free;
}
}  // namespace

bool __zone_watermark_ok(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags, long free_pages) {
  long min = long(mark);
  const bool alloc_harder = alloc_flags & (ALLOC_HARDER | ALLOC_OOM);
  free_pages -= __zone_watermark_unusable_free(z, order, alloc_flags);
  if (alloc_flags & ALLOC_HIGH) min -= min / 2;
  if (alloc_harder) {
    if (alloc_flags & ALLOC_OOM)
      min -= min / 2;
    else
      min -= min / 4;
  }
  if (free_pages <= min + z.lowmem_reserve) return false;
  if (!order) return true;
  // For a high-order request, check at least one suitable block is free.
  for (unsigned o = order; o < NR_PAGE_ORDERS; o++) {
    const free_area& area = z.free_area[o];
    if (!free_area_nr_free(area)) continue;
    for (int mt = 0; mt < MIGRATE_PCPTYPES; mt++)
      if (!free_area_empty(area, mt)) return true;
    if ((alloc_flags & ALLOC_CMA) && !free_area_empty(area, MIGRATE_CMA)) return true;
    if (alloc_harder && !free_area_empty(area, MIGRATE_HIGHATOMIC)) return true;
  }
  return false;
}

bool zone_watermark_ok(const Zone& z, unsigned order, unsigned long mark, unsigned alloc_flags) {
  return __zone_watermark_ok(z, order, mark, alloc_flags, z.zone_page_state(NR_FREE_PAGES));
}

// ---- struct page checks
// ------------------------------------------------------------------------------------------------

namespace {
void bad_page(Zone& zone, Page* page) {
  // The kernel prints the page, taints, resets _mapcount and leaks the block.
  page->_mapcount = -1;
  zone.nr_bad_pages.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

bool check_new_pages(Zone& zone, Page* page, unsigned order) {
  const uint64_t n = uint64_t(1) << order;
  for (uint64_t i = 0; i < n; i++) {
    if (__builtin_expect(!page_expected_state(page[i], PAGE_FLAGS_CHECK_AT_PREP | __PG_HWPOISON), 0)) {
      memmap_access(page, i + 1, Stream::load);
      bad_page(zone, page + i);
      return true;
    }
  }
  memmap_access(page, n, Stream::load);
  return false;
}

bool free_page_is_bad(Zone& zone, Page* page) {  // the caller has the page's line (free_pages_prepare, list_del)
  if (__builtin_expect(page_expected_state(*page, PAGE_FLAGS_CHECK_AT_FREE), 1)) return false;
  bad_page(zone, page);
  return true;
}

}  // namespace alloclab::mm
