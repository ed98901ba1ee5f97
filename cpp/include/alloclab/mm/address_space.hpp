// AddressSpace: the page cache of one shmem (tmpfs, /dev/shm) file — struct address_space's i_pages with its
// xa_lock (lock class "mapping->i_pages") and nrpages — and the page-cache operations the CMA path needs.
//
// Models: include/linux/fs.h and mm/shmem.c / mm/filemap.c of v6.2 for a file that dd wrote and nobody maps:
//   * shmem_add_to_page_cache(): one xa_lock per page; the page cache takes over the allocation's reference, the
//     page gets ->mapping, ->index (pgoff), PG_uptodate, PG_dirty and PG_swapbacked, and goes on its node's LRU;
//   * the slot replacement of folio_migrate_mapping() (mm/migrate.c) is in migrate.cpp: it takes this lock;
//   * shmem_truncate_range() (truncate_inode_pages): every page out of the cache and off the LRU, then freed.
// ->mapping holds the AddressSpace pointer (no PAGE_MAPPING_* bits: a file page, as the kernel's).
// The xarray is a flat array of slots indexed by pgoff: a lookup or a store is one memory access, not the walk of
// a radix tree of 64-slot nodes, so the hold time of xa_lock is shorter than the kernel's (in virtual time: one
// tree_step on the slot's line).
// (shmem_fault's model, page_cache.hpp, has its own page cache: the 2.6.35 radix tree under mapping->tree_lock,
// whose node allocation is what that seed is about. This one is the v6.x xarray as migration sees it.)
// Leaves out: swap, writeback, shmem_inode_info->lock accounting and memcg charging, large folios, the RCU
// lookup path, xarray marks (dirty/writeback tags), mmap (so migration never needs an rmap walk).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloclab/base/line_aligned.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/interruption_point.hpp"
#include "alloclab/mm/page.hpp"

namespace alloclab::mm {

class MemorySystem;
class NodeLruvecs;

class alignas(64) AddressSpace {
 public:
  // A file of up to `max_pages` pages (pgoffs 0 .. max_pages-1).
  AddressSpace(LockDomain& locks, std::string name, uint64_t max_pages);
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  const std::string& name() const { return name_; }
  uint64_t max_pages() const { return slots_.size(); }
  uint64_t nrpages() const { return nrpages_; }  // read under i_pages, or when no other thread runs

  // The mapping of a page-cache page, or nullptr.
  static AddressSpace* page_mapping(const Page* page) {
    return (page->mapping & PAGE_MAPPING_FLAGS) ? nullptr : reinterpret_cast<AddressSpace*>(page->mapping);
  }

  // shmem_add_to_page_cache + folio_add_lru: `page` is freshly allocated (refcount 1, off every list); the cache
  // keeps that reference. Throws std::invalid_argument for an occupied or out-of-range pgoff.
  void shmem_add_to_page_cache(Page* page, uint64_t pgoff, NodeLruvecs& lru);
  // shmem_truncate_range(0, EOF): every page out of the cache (xa_lock) and off the LRU (lru_lock), its mapping
  // cleared, its last reference dropped (freed on model CPU `cpu`). Call when nobody migrates this file's pages.
  // Polls ms.interruption_point().
  void truncate(MemorySystem& ms, NodeLruvecs& lru, int cpu);

  // ---- xa_lock(&mapping->i_pages) held ----
  Lock i_pages;  // the xarray's spinlock
  Page* xa_load(uint64_t pgoff) const {
    vcost::visit(&slots_[pgoff]);
    return slots_[pgoff];
  }
  void xa_store(uint64_t pgoff, Page* page) {
    vcost::charge(Op::tree_step);
    vcost::touch(&slots_[pgoff], true);
    slots_[pgoff] = page;
  }

  // Introspection (no other thread running): problems found, empty when the cache is consistent (every slot's
  // page points back at this file and its pgoff, nrpages matches). Polls `interruption_point` as it goes.
  std::vector<std::string> check(const InterruptionPoint& interruption_point = {}) const;

 private:
  std::string name_;
  line_vector<Page*> slots_;  // protected by i_pages
  uint64_t nrpages_ = 0;      // protected by i_pages
};

}  // namespace alloclab::mm
