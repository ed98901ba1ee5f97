// The per-node LRU of page-cache pages (see lruvec.hpp). Models mm/swap.c and mm/vmscan.c of v6.2 without memcg.
#include "alloclab/mm/lruvec.hpp"

#include "alloclab/mm/memory_system.hpp"

namespace alloclab::mm {

lruvec::lruvec(LockDomain& locks, Zone& z) : zone(z), lru_lock(locks, "lru_lock") {}

NodeLruvecs::NodeLruvecs(MemorySystem& ms, LockDomain& locks) {
  v_.resize(size_t(ms.nr_nodes()));
  for (int n = 0; n < ms.nr_nodes(); ++n)
    if (ms.node_present_pages(n)) v_[size_t(n)] = std::make_unique<lruvec>(locks, ms.zone(n));
}

uint64_t NodeLruvecs::nr_pages() const {
  uint64_t n = 0;
  for (const auto& l : v_)
    if (l) n += l->nr_pages;
  return n;
}

void lruvec_add_folio(lruvec& lru, Page* page) {
  __set_bit(*page, PG_lru);
  list_add(lru.list, lru.zone.zone_mem_map, lru.zone.page_idx(page));
  ++lru.nr_pages;
}

void lruvec_del_folio(lruvec& lru, Page* page) {
  list_del(lru.list, lru.zone.zone_mem_map, lru.zone.page_idx(page));
  --lru.nr_pages;
}

void folio_add_lru(lruvec& lru, Page* page) {
  LockToken t;
  lru.lru_lock.lock(t);
  lruvec_add_folio(lru, page);
  lru.lru_lock.unlock(t);
}

bool folio_isolate_lru(lruvec& lru, Page* page) {
  if (!TestClearPageLRU(*page)) return false;
  LockToken t;
  lru.lru_lock.lock(t);
  lruvec_del_folio(lru, page);
  lru.lru_lock.unlock(t);
  return true;
}

}  // namespace alloclab::mm
