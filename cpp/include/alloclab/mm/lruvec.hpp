// lruvec: the per-node LRU list of page-cache pages that migration isolates pages from and puts new pages on, with
// its lru_lock.
//
// Models: struct lruvec (include/linux/mmzone.h) and the LRU helpers of mm/swap.c and mm/vmscan.c of v6.2 without
// memcg: one lruvec per node (pgdat->__lruvec), which is where the seed's /dev/shm pages live. The lock is the
// lock class "lru_lock" (lruvec->lru_lock). folio_add_lru() adds under lru_lock at once, which is what the kernel
// does while lru_cache_disable() is in force (alloc_contig_range holds it across the whole migration).
// Virtual time: the LRU list charges as page.hpp's lists; TestClearPageLRU is an atomic RMW on the struct page.
// Leaves out: the active/inactive and anon/file split (one list), aging and reclaim, the per-CPU folio_batch of
// 15 that batches LRU additions outside lru_cache_disable() (the scenario's fill and a failed migration's putback
// take lru_lock once per page instead), memcg lruvecs, lru_gen (MGLRU), mlock/unevictable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/page.hpp"
#include "alloclab/mm/zone.hpp"

namespace alloclab::mm {

class MemorySystem;

class alignas(64) lruvec {
 public:
  lruvec(LockDomain& locks, Zone& zone);
  lruvec(const lruvec&) = delete;
  lruvec& operator=(const lruvec&) = delete;

  Zone& zone;     // the node's only zone: list links are indices into its mem_map
  Lock lru_lock;  // lruvec->lru_lock
  // Protected by lru_lock.
  PageList list;
  uint64_t nr_pages = 0;
};

// pgdat->__lruvec of every node of a MemorySystem (nullptr for memoryless nodes).
class NodeLruvecs {
 public:
  NodeLruvecs(MemorySystem& ms, LockDomain& locks);
  lruvec& node_lruvec(int nid) const { return *v_.at(size_t(nid)); }
  lruvec& folio_lruvec(const Page* page) const { return *v_[size_t(page_to_nid(*page))]; }
  // Pages on all lists (call when no other thread uses them).
  uint64_t nr_pages() const;

 private:
  std::vector<std::unique_ptr<lruvec>> v_;
};

// ---- lru_lock held ----------------------------------------------------------------------------------------------
// lruvec_add_folio: PG_lru set, page at the head of the list.
void lruvec_add_folio(lruvec& lru, Page* page);
// lruvec_del_folio: off the list (the caller cleared PG_lru with TestClearPageLRU first, as the kernel does).
void lruvec_del_folio(lruvec& lru, Page* page);

// ---- taking lru_lock --------------------------------------------------------------------------------------------
// folio_add_lru with the LRU cache disabled: one lru_lock acquisition.
void folio_add_lru(lruvec& lru, Page* page);
// folio_isolate_lru: takes the page off the LRU if PG_lru was set (one lru_lock acquisition then); true if it did.
bool folio_isolate_lru(lruvec& lru, Page* page);

inline bool TestClearPageLRU(Page& p) {
  vcost::rmw(&p);  // test_and_clear_bit
  const bool was = PageLRU(p);
  __clear_bit(p, PG_lru);
  return was;
}

}  // namespace alloclab::mm
