// The page cache of a shmem file (see address_space.hpp). Models mm/shmem.c and mm/filemap.c of v6.2.
#include "alloclab/mm/address_space.hpp"

#include <stdexcept>

#include "alloclab/mm/lruvec.hpp"
#include "alloclab/mm/memory_system.hpp"

namespace alloclab::mm {

AddressSpace::AddressSpace(LockDomain& locks, std::string name, uint64_t max_pages)
    : i_pages(locks, "mapping->i_pages"), name_(std::move(name)), slots_(max_pages, nullptr) {}

void AddressSpace::shmem_add_to_page_cache(Page* page, uint64_t pgoff, NodeLruvecs& lru) {
  if (pgoff >= slots_.size())
    throw std::invalid_argument("pgoff: " + std::to_string(pgoff) + " is beyond " + name_ + " (allowed: 0.." +
                                std::to_string(slots_.size() - 1) + ")");
  if (page->mapping || PageLRU(*page) || page_ref_count(*page) != 1)
    throw std::invalid_argument("page: not a freshly allocated page (mapping, PG_lru or refcount set)");
  // __folio_set_locked, __folio_set_swapbacked, then the page-cache insertion under xa_lock.
  __set_bit(*page, PG_swapbacked);
  page->mapping = reinterpret_cast<uint64_t>(this);
  page->index = pgoff;
  {
    LockToken t;
    i_pages.lock(t);
    if (slots_[pgoff]) {
      i_pages.unlock(t);
      page->mapping = 0;
      __clear_bit(*page, PG_swapbacked);
      throw std::invalid_argument("pgoff: " + std::to_string(pgoff) + " of " + name_ + " is already cached");
    }
    slots_[pgoff] = page;
    ++nrpages_;
    i_pages.unlock(t);
  }
  // dd wrote it: uptodate and dirty (shmem pages stay dirty: there is no writeback without swap).
  __set_bit(*page, PG_uptodate);
  __set_bit(*page, PG_dirty);
  folio_add_lru(lru.folio_lruvec(page), page);
}

void AddressSpace::truncate(MemorySystem& ms, NodeLruvecs& lru, int cpu) {
  for (uint64_t pgoff = 0; pgoff < slots_.size(); ++pgoff) {
    if (pgoff % pageblock_nr_pages == 0) ms.interruption_point();
    Page* page;
    {
      LockToken t;
      i_pages.lock(t);
      page = slots_[pgoff];
      if (page) {
        slots_[pgoff] = nullptr;
        --nrpages_;
      }
      i_pages.unlock(t);
    }
    if (!page) continue;
    folio_isolate_lru(lru.folio_lruvec(page), page);  // (truncation takes the page off the LRU before freeing)
    page->mapping = 0;
    page->flags &= ~((uint64_t(1) << PG_uptodate) | (uint64_t(1) << PG_dirty) | (uint64_t(1) << PG_swapbacked));
    ms.free_pages(cpu, page, 0);  // the page cache's reference was the last one
  }
}

std::vector<std::string> AddressSpace::check(const InterruptionPoint& interruption_point) const {
  std::vector<std::string> errors;
  uint64_t n = 0;
  for (uint64_t pgoff = 0; pgoff < slots_.size(); ++pgoff) {
    if (pgoff % pageblock_nr_pages == 0 && interruption_point) interruption_point();
    const Page* p = slots_[pgoff];
    if (!p) continue;
    ++n;
    if (page_mapping(p) != this || p->index != pgoff) {
      if (errors.size() < 10)
        errors.push_back(name_ + ": slot " + std::to_string(pgoff) + " holds a page whose mapping/index disagree");
    } else if (page_ref_count(*p) != 1 || !PageLRU(*p)) {
      if (errors.size() < 10)
        errors.push_back(name_ + ": page at pgoff " + std::to_string(pgoff) + " has refcount " +
                         std::to_string(page_ref_count(*p)) + (PageLRU(*p) ? "" : " and is off the LRU"));
    }
  }
  if (n != nrpages_)
    errors.push_back(name_ + ": nrpages is " + std::to_string(nrpages_) + " but " + std::to_string(n) +
                     " slots are occupied");
  return errors;
}

}  // namespace alloclab::mm
