// Page migration for alloc_contig_range (see migrate.hpp): isolate_migratepages_block of mm/compaction.c and
// migrate_pages / unmap_and_move / folio_migrate_mapping of mm/migrate.c, v6.2, for unmapped shmem pages.
#include "alloclab/mm/migrate.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "alloclab/base/clock.hpp"
#include "alloclab/mm/address_space.hpp"
#include "alloclab/mm/lruvec.hpp"
#include "alloclab/mm/memory_system.hpp"

namespace alloclab::mm {

MigrateContext::MigrateContext(MemorySystem& m, NodeLruvecs& l, uint64_t copy_ns, uint64_t extra_ns)
    : ms(m), lru(l), copy_ticks(ns_to_ticks(copy_ns)), extra_ticks(ns_to_ticks(extra_ns)) {}

namespace {

constexpr uint64_t kMigrateFlags = (uint64_t(1) << PG_uptodate) | (uint64_t(1) << PG_referenced) |
                                   (uint64_t(1) << PG_active) | (uint64_t(1) << PG_workingset);

// folio_ref_freeze / folio_ref_unfreeze.
bool folio_ref_freeze(Page& p, int expected) {
  vcost::rmw(&p);
  int32_t e = expected;
  return std::atomic_ref<int32_t>(p._refcount).compare_exchange_strong(e, 0, std::memory_order_acquire);
}
void folio_ref_unfreeze(Page& p, int count) {
  vcost::rmw(&p);
  std::atomic_ref<int32_t>(p._refcount).store(count, std::memory_order_release);
}

// isolate_migratepages_block(cc, low_pfn, end_pfn, ISOLATE_UNEVICTABLE).
int isolate_migratepages_block(MigrateContext& mc, compact_control& cc, uint64_t low_pfn, uint64_t end_pfn) {
  Zone& zone = *cc.zone;
  MigrateStats& st = *cc.stats;
  lruvec* locked = nullptr;
  LockToken t;
  int ret = 0;
  for (; low_pfn < end_pfn; low_pfn++) {
    // Periodically drop the lock (if held) regardless of its contention, to give chance to IRQs.
    if (!(low_pfn % COMPACT_CLUSTER_MAX)) {
      if (locked) {
        locked->lru_lock.unlock(t);
        locked = nullptr;
      }
      if (cc.fatal_signal_pending && cc.fatal_signal_pending()) {
        ret = -EINTR;
        break;
      }
    }
    Page* page = zone.pfn_to_page(low_pfn);
    memmap_access(page, 1, Stream::load);
    // Skip free pages: the racy buddy_order_unsafe() read the kernel does (the range is isolated: only this caller
    // frees into it).
    if (PageBuddy(*page)) {
      const unsigned order = buddy_order(*page);
      if (order > 0 && order <= MAX_PAGE_ORDER) low_pfn += (uint64_t(1) << order) - 1;
      continue;
    }
    if (!PageLRU(*page)) continue;  // not on an LRU: not movable here (non-LRU movable pages are not modelled)
    if (page_ref_count(*page) == 0) continue;  // get_page_unless_zero
    get_page(*page);
    if (!TestClearPageLRU(*page)) {  // someone else isolated it
      put_page_testzero(*page);
      continue;
    }
    lruvec& lru = mc.lru.folio_lruvec(page);
    if (&lru != locked) {  // folio_lruvec_relock_irqsave
      if (locked) locked->lru_lock.unlock(t);
      lru.lru_lock.lock(t);
      locked = &lru;
      ++st.lru_isolate_sections;
    }
    lruvec_del_folio(lru, page);
    cc.migratepages.push_back(page);
    ++st.pages_isolated;
    if (cc.migratepages.size() >= COMPACT_CLUSTER_MAX) {
      ++low_pfn;
      break;
    }
  }
  if (low_pfn > end_pfn) low_pfn = end_pfn;
  if (locked) locked->lru_lock.unlock(t);
  cc.migrate_pfn = low_pfn;
  return ret;
}

// folio_migrate_mapping(mapping, newfolio, folio, 0): the page-cache slot moves to the new page under xa_lock.
int folio_migrate_mapping(compact_control& cc, AddressSpace* mapping, Page* newpage, Page* page) {
  if (!mapping) {  // no page cache: only the isolation reference may be left
    if (page_ref_count(*page) != 1) return -EAGAIN;
    memmap_access(newpage, 1, Stream::update);
    newpage->index = page->index;
    newpage->mapping = page->mapping;
    return MIGRATEPAGE_SUCCESS;
  }
  const int expected_count = 2;  // folio_expected_refs(): the page cache's + the isolation's
  LockToken t;
  mapping->i_pages.lock(t);
  ++cc.stats->mapping_locks;
  if (mapping->xa_load(page->index) != page || !folio_ref_freeze(*page, expected_count)) {
    mapping->i_pages.unlock(t);
    ++cc.stats->eagain;
    return -EAGAIN;
  }
  // Now we know that no one else is looking at the folio: no turning back from here.
  memmap_access(newpage, 1, Stream::update);
  newpage->index = page->index;
  newpage->mapping = page->mapping;
  get_page(*newpage);  // the cache reference
  if (test_bit(*page, PG_swapbacked)) __set_bit(*newpage, PG_swapbacked);
  if (test_bit(*page, PG_dirty)) {  // move dirty while the refs are frozen and the new page is not yet exposed
    __clear_bit(*page, PG_dirty);
    __set_bit(*newpage, PG_dirty);
  }
  mapping->xa_store(page->index, newpage);
  folio_ref_unfreeze(*page, expected_count - 1);  // drop the cache reference of the old page
  mapping->i_pages.unlock(t);
  return MIGRATEPAGE_SUCCESS;
}

// folio_migrate_copy: folio_copy + folio_migrate_flags.
void folio_migrate_copy(MigrateContext& mc, Page* newpage, Page* page) {
  if (mc.ms.config().backing == Backing::real) {
    // folio_copy -> copy_highpage: a 4 KiB memcpy, charged in virtual time at the profile's copy cost.
    vcost::pages(PageOp::copy, 1, mc.ms.page_frame(newpage), mc.ms.page_frame(page));
    std::memcpy(mc.ms.page_address(newpage), mc.ms.page_address(page), PAGE_SIZE);
  } else {
    spin_for_ticks(mc.copy_ticks);
  }
  newpage->flags |= page->flags & kMigrateFlags;
  page->flags &= ~(kMigrateFlags & ~(uint64_t(1) << PG_uptodate));
}

// unmap_and_move(alloc_migration_target, NULL, private, page, force, MIGRATE_SYNC, MR_CONTIG_RANGE).
int unmap_and_move(MigrateContext& mc, compact_control& cc, Page* page, const migration_target_control& mtc) {
  MigrateStats& st = *cc.stats;
  if (page_ref_count(*page) == 1) {
    // The page was freed from under us (truncated): we are done, the isolation reference is the last one.
    __clear_bit(*page, PG_active);
    mc.ms.free_pages(cc.cpu, page, 0);
    ++st.pages_already_freed;
    return MIGRATEPAGE_SUCCESS;
  }
  // alloc_migration_target(): an order-0 page on the range's node through the normal allocator.
  Page* newpage = mc.ms.alloc_pages(cc.cpu, mtc.nid, 0, mtc.gfp_mask);
  if (!newpage) {
    ++st.target_failures;
    return -ENOMEM;
  }
  ++st.targets_allocated;
  // __unmap_and_move -> move_to_new_folio -> mapping->a_ops->migrate_folio (shmem: migrate_folio).
  AddressSpace* mapping = AddressSpace::page_mapping(page);
  const int rc = folio_migrate_mapping(cc, mapping, newpage, page);
  if (rc != MIGRATEPAGE_SUCCESS) {
    mc.ms.free_pages(cc.cpu, newpage, 0);  // put_page(newpage): back to the allocator
    return rc;
  }
  folio_migrate_copy(mc, newpage, page);
  spin_for_ticks(mc.extra_ticks);
  page->mapping = 0;  // move_to_new_folio: !folio_mapping_flags(src) -> src->mapping = NULL
  // Push the new page to the LRU at once (lru_cache_add with the LRU cache disabled), then drop our reference to
  // it: the page cache's remains.
  folio_add_lru(mc.lru.folio_lruvec(newpage), newpage);
  ++st.lru_adds;
  put_page_testzero(*newpage);
  // The old page: release the isolation reference, the last one. It lies in a MIGRATE_ISOLATE pageblock, so
  // free_unref_page() sends it to free_one_page(): one zone->lock.
  mc.ms.free_pages(cc.cpu, page, 0);
  ++st.pages_migrated;
  return MIGRATEPAGE_SUCCESS;
}

}  // namespace

int isolate_migratepages_range(MigrateContext& mc, compact_control& cc, uint64_t start_pfn, uint64_t end_pfn) {
  ++cc.stats->isolate_calls;
  int ret = 0;
  uint64_t pfn = start_pfn;
  uint64_t block_end_pfn = (pfn & ~(pageblock_nr_pages - 1)) + pageblock_nr_pages;
  cc.migrate_pfn = pfn;
  for (; pfn < end_pfn; pfn = block_end_pfn, block_end_pfn += pageblock_nr_pages) {
    const uint64_t bend = std::min(block_end_pfn, end_pfn);
    ret = isolate_migratepages_block(mc, cc, pfn, bend);
    if (ret) break;
    if (cc.migratepages.size() >= COMPACT_CLUSTER_MAX) break;
  }
  return ret;
}

int migrate_pages(MigrateContext& mc, compact_control& cc, std::vector<Page*>& from,
                  const migration_target_control& mtc) {
  ++cc.stats->migrate_pages_calls;
  int retry = 1, nr_failed = 0;
  std::vector<Page*> ret_pages;  // permanent failures (none arise in this model; kept for the protocol's shape)
  for (int pass = 0; pass < NR_MAX_MIGRATE_PAGES_RETRY && retry; ++pass) {
    retry = 0;
    size_t keep = 0;
    for (size_t i = 0; i < from.size(); ++i) {
      Page* page = from[i];
      const int rc = unmap_and_move(mc, cc, page, mtc);
      if (rc == -ENOMEM) {
        // When memory is low, don't bother to try to migrate other pages, just exit.
        for (size_t j = i; j < from.size(); ++j) from[keep++] = from[j];
        from.resize(keep);
        from.insert(from.end(), ret_pages.begin(), ret_pages.end());
        return -ENOMEM;
      }
      if (rc == -EAGAIN) {
        ++retry;
        from[keep++] = page;
      } else if (rc != MIGRATEPAGE_SUCCESS) {
        ++nr_failed;
        ret_pages.push_back(page);
      }
    }
    from.resize(keep);
  }
  nr_failed += retry;
  from.insert(from.end(), ret_pages.begin(), ret_pages.end());
  return nr_failed;
}

void putback_movable_pages(MigrateContext& mc, compact_control& cc, std::vector<Page*>& list) {
  for (Page* page : list) {
    folio_add_lru(mc.lru.folio_lruvec(page), page);  // putback_lru_page
    ++cc.stats->putbacks;
    mc.ms.free_pages(cc.cpu, page, 0);  // drop the isolation reference (never the last one here)
  }
  list.clear();
}

}  // namespace alloclab::mm
