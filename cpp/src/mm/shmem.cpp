// shmem fault path: 2.6.35 shmem_getpage (with and without the prealloc patch), ramfs filemap_fault and a recent
// shmem_get_folio_gfp, over the page cache and the page allocator (see shmem.hpp).
#include "alloclab/mm/shmem.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/locks/spin_wait.hpp"

namespace alloclab::mm {

namespace {

[[noreturn]] void bad_arg(const std::string& msg) { throw std::invalid_argument(msg); }

constexpr unsigned PAGE_WAIT_TABLE_BITS = 8;  // mm/filemap.c: 256 hashed wait queues for page bits

uint64_t div_round_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

uint64_t shmem_index_pages(uint64_t n) {
  if (n <= SHMEM_NR_DIRECT) return 0;
  const uint64_t leaves = div_round_up(n - SHMEM_NR_DIRECT, ENTRIES_PER_PAGE);
  const uint64_t half = ENTRIES_PER_PAGE / 2;
  uint64_t pages = 1 + std::min(leaves, half);  // i_indirect + single-indirect leaves
  if (leaves > half) pages += div_round_up(leaves - half, ENTRIES_PER_PAGE) + (leaves - half);
  return pages;
}

void ShmemCheck::fail(const std::string& e) {
  ok = false;
  if (errors.size() < 20)
    errors.push_back(e);
  else if (errors.size() == 20)
    errors.push_back("... more errors");
}

std::string ShmemCheck::summary() const {
  if (ok)
    return "ok: " + std::to_string(pages) + " pages in the page cache, " + std::to_string(ptes) + " PTEs, " +
           std::to_string(lru_pages) + " on the LRU, " + std::to_string(index_pages) + " index pages";
  std::string s;
  for (const auto& e : errors) s += (s.empty() ? "" : "; ") + e;
  return s;
}

// ---- construction
// ----------------------------------------------------------------------------------------------------

ShmemFile::ShmemFile(MemorySystem& ms, LockDomain& locks, const ShmemConfig& cfg)
    : ms_(ms),
      cfg_(cfg),
      backing_(ms.config().backing == Backing::real),
      spin_yield_(locks.spin_yield()),
      // shmem: mapping_gfp_mask = GFP_HIGHUSER_MOVABLE; ramfs_get_inode sets GFP_HIGHUSER.
      gfp_(cfg.variant == ShmemVariant::ramfs ? GFP_HIGHUSER : GFP_HIGHUSER_MOVABLE),
      clear_ticks_(ns_to_ticks(cfg.clear_ns)),
      fault_ticks_(ns_to_ticks(cfg.fault_ns)),
      mapping_(locks, cfg.variant == ShmemVariant::modern ? "mapping->i_pages" : "mapping->tree_lock"),
      lru_(ms, locks),
      mmap_sem_(locks, "mmap_sem") {
  if (cfg.nr_pages < 1 || cfg.nr_pages > SHMEM_MAX_INDEX)
    bad_arg("nr_pages: " + std::to_string(cfg.nr_pages) + " is out of range (allowed: 1.." +
            std::to_string(SHMEM_MAX_INDEX) + ", SHMEM_MAX_INDEX)");
  if (cfg.clear_ns > 10'000'000)
    bad_arg("clear_ns: " + std::to_string(cfg.clear_ns) + " is out of range (allowed: 0..10000000)");
  if (cfg.fault_ns > 10'000'000)
    bad_arg("fault_ns: " + std::to_string(cfg.fault_ns) + " is out of range (allowed: 0..10000000)");
  if (cfg.variant != ShmemVariant::ramfs) info_.lock = std::make_unique<Lock>(locks, "info->lock");
  backing_base_.assign(size_t(ms.nr_nodes()), nullptr);
  if (backing_)
    for (int n = 0; n < ms.nr_nodes(); ++n)
      if (ms.node_present_pages(n))
        backing_base_[size_t(n)] = static_cast<char*>(ms.page_address(ms.zone(n).zone_mem_map));
  pte_ = line_vector<std::atomic<uint64_t>>(cfg.nr_pages);
  for (unsigned i = 0; i < (1u << PAGE_WAIT_TABLE_BITS); ++i)
    page_wait_table_.push_back(std::make_unique<WaitEvent>("PG_locked"));
}

ShmemFile::~ShmemFile() = default;

ShmemTask& ShmemFile::add_task(int cpu, int nid) {
  if (cpu < 0 || cpu >= ms_.nr_cpus())
    bad_arg("cpu: " + std::to_string(cpu) + " is out of range (allowed: 0.." + std::to_string(ms_.nr_cpus() - 1) + ")");
  if (nid < 0 || nid >= ms_.nr_nodes())
    bad_arg("nid: " + std::to_string(nid) + " is out of range (allowed: 0.." + std::to_string(ms_.nr_nodes() - 1) +
            ")");
  const bool modern = cfg_.variant == ShmemVariant::modern;
  const lru_list lru = cfg_.variant == ShmemVariant::ramfs ? LRU_INACTIVE_FILE : LRU_INACTIVE_ANON;
  tasks_.push_back(std::make_unique<ShmemTask>(cpu, nid, modern ? FOLIO_BATCH_SIZE : PAGEVEC_SIZE, lru));
  return *tasks_.back();
}

const char* ShmemFile::fault_handler() const {
  return cfg_.variant == ShmemVariant::ramfs ? "filemap_fault" : "shmem_fault";
}

// ---- small pieces
// ----------------------------------------------------------------------------------------------------

void ShmemFile::info_lock(ShmemTask& t, LockToken& tok) {
  info_.lock->lock(tok);  // spin_lock(&info->lock)
  // spinlock_t lock is the first field of struct shmem_inode_info (2.6.35 and v6.x include/linux/shmem_fs.h), on
  // the line of flags, alloced, swapped, next_index (and 2.6.35's first i_direct entries): the lock's hand-off (paid
  // by the lock kind) brought that line along, so the section finds it in its own cache. Only the holder touches
  // these fields.
  vcost::forget(&info_.flags, kCacheLine - sizeof(info_.lock));
  ++t.st.info_lock;
}

void ShmemFile::info_unlock(LockToken& tok) { info_.lock->unlock(tok); }

WaitEvent& ShmemFile::page_waitqueue(const Page& p) {
  const uint64_t hash = (reinterpret_cast<uintptr_t>(&p) >> 6) * 0x9e3779b97f4a7c15ull;  // hash_ptr(page, bits)
  return *page_wait_table_[size_t(hash >> (64 - PAGE_WAIT_TABLE_BITS))];
}

void ShmemFile::lock_page(ShmemTask& t, Page& p) {
  if (trylock_page(p)) return;
  ++t.st.page_lock_waits;  // __lock_page
  const bool on_virtual_cpu = vt::current_cpu() >= 0;
  do {
    if (!on_virtual_cpu) {
      spin_until([&] { return !PageLocked(p); }, spin_yield_, "PG_locked");
      continue;
    }
    // folio_wait_bit_common: sleep on the page's wait queue until unlock_page wakes it. The look at PG_locked costs
    // nothing here: a wait must start at the instant it checks (the retried trylock pays for the line).
    if (!page_waitqueue(p).wait([&] { return !((flags_racy(p) >> PG_locked) & 1); }, {})) throw vt::Stopped();
  } while (!trylock_page(p));
}

void ShmemFile::unlock_page(Page& p) {
  mm::unlock_page(p);  // clear_bit_unlock (an atomic RMW: charged before the wake)
  if (vt::current_cpu() >= 0) page_waitqueue(p).announce([] {});  // wake_up_page: every sleeper looks again
}

Page* ShmemFile::find_lock_page(ShmemTask& t, uint64_t idx) {
  for (;;) {
    Page* page = mapping_.find_get_page(idx);
    if (!page) return nullptr;
    lock_page(t, *page);
    if (page->mapping == mapping_.mapping_value()) return page;
    unlock_page(*page);  // truncated meanwhile (never during a fault run): look again
    page_cache_release(ms_, t.cpu, page);
  }
}

Page* ShmemFile::alloc_page(ShmemTask& t) {
  // shmem_alloc_page -> alloc_page_vma (the default mempolicy: the local node) / page_cache_alloc_cold.
  Page* p = ms_.alloc_pages(t.cpu, t.nid, 0, gfp_);
  if (p) ++t.st.page_allocs;
  return p;
}

int ShmemFile::add_to_page_cache_lru(ShmemTask& t, Page* page, uint64_t idx, bool lru) {
  memmap_access(page, 1, Stream::update);
  __set_bit(*page, PG_locked);  // __set_page_locked: nobody can see the page yet
  RadixTreePreload* preload = nullptr;
  if (cfg_.variant != ShmemVariant::modern) {  // 2.6.35: radix_tree_preload in add_to_page_cache_locked
    t.preload.preload();
    preload = &t.preload;
  }
  const int error = mapping_.add_to_page_cache_locked(page, idx, preload, &t.st.tree_lock);
  if (error) {
    __clear_bit(*page, PG_locked);
    return error;
  }
  if (lru) lru_cache_add(lru_, t.pvec, page, t.cpu);  // lru_cache_add_anon / lru_cache_add_file
  return 0;
}

void ShmemFile::clear_highpage(Page* page) {
  if (!cfg_.clear) return;
  if (backing_) {
    vcost::pages(PageOp::clear, 1, ms_.page_frame(page));
    std::memset(page_address(page), 0, PAGE_SIZE);
  } else {
    spin_for_ticks(clear_ticks_);
  }
}

void* ShmemFile::page_address(const Page* page) const {
  const int nid = page_to_nid_atomic(*page);
  return backing_base_[size_t(nid)] + uint64_t(page - ms_.zone(nid).zone_mem_map) * PAGE_SIZE;
}

void ShmemFile::read_byte(const Page* page) const {
  if (!backing_) return;
  const volatile char* a = static_cast<const volatile char*>(page_address(page));
  vcost::touch(const_cast<const char*>(a), false);
  (void)*a;
}

void ShmemFile::set_next_index(uint64_t index) {  // info->lock held
  vcost::touch(&info_.next_index, false);
  if (info_.next_index > index) return;
  vcost::touch(&info_.next_index, true);
  info_.next_index = index + 1;
}

void ShmemFile::shmem_recalc_inode() {  // 2.6.35; info->lock held
  vcost::touch(&info_.alloced, false);
  const long freed = long(info_.alloced) - long(info_.swapped) - long(mapping_.nrpages());
  if (freed > 0) info_.alloced -= uint64_t(freed);  // shmem_unacct_blocks/shmem_free_blocks: no limits here
}

void ShmemFile::shmem_recalc_inode_modern(ShmemTask& t, long alloced, long swapped) {
  LockToken tok;
  info_lock(t, tok);
  vcost::touch(&info_.alloced, true);
  info_.alloced = uint64_t(long(info_.alloced) + alloced);
  info_.swapped = uint64_t(long(info_.swapped) + swapped);
  long freed = long(info_.alloced) - long(info_.swapped) - long(mapping_.nrpages());  // READ_ONCE(nrpages)
  if (swapped > 0) freed += swapped;
  if (freed > 0) info_.alloced -= uint64_t(freed);
  info_unlock(tok);
}

// ---- the 2.6.35 swap vector
// ------------------------------------------------------------------------------------------

uint64_t* ShmemFile::dir_map(const Page* page) const {
  // shmem_dir_map / shmem_swp_map (kmap_atomic). Descriptor-only pages (Backing::none) keep their 4 KiB of
  // contents in a buffer whose address the model stores in the index page's page->index (unused by shmem).
  if (backing_) return static_cast<uint64_t*>(page_address(page));
  return reinterpret_cast<uint64_t*>(page->index);
}

Page* ShmemFile::shmem_dir_alloc(ShmemTask& t) {
  // alloc_pages((gfp & ~GFP_MOVABLE_MASK) | __GFP_ZERO, 0): swap vectors cannot move.
  Page* page = ms_.alloc_pages(t.cpu, t.nid, 0, (gfp_ & ~(__GFP_MOVABLE | __GFP_RECLAIMABLE)) | __GFP_ZERO);
  ++t.st.index_page_allocs;
  if (!page) return nullptr;
  page->private_ = 0;  // set_page_private(page, 0): swap entries in use in this index page
  if (!backing_) {
    // The 4 KiB of zeroes, as the allocator's __GFP_ZERO clears them with real backing (write-allocate).
    vcost::pages(PageOp::clear, 1, {t.nid});
    auto* dir = new (std::align_val_t(kCacheLine)) uint64_t[ENTRIES_PER_PAGE]();
    vcost::forget(dir, PAGE_SIZE);
    page->index = reinterpret_cast<uint64_t>(dir);
  }
  return page;
}

void ShmemFile::shmem_dir_free(int cpu, Page* page) {
  if (!backing_) ::operator delete[](reinterpret_cast<uint64_t*>(page->index), std::align_val_t(kCacheLine));
  page->index = 0;
  page->private_ = 0;
  ms_.free_pages(cpu, page, 0);
}

uint64_t* ShmemFile::shmem_swp_entry(uint64_t index, Page** page) {
  if (index < SHMEM_NR_DIRECT) {
    vcost::visit(info_.i_direct + index);
    return info_.i_direct + index;
  }
  vcost::visit(&info_.i_indirect);
  if (!info_.i_indirect) {
    if (page && *page) {
      vcost::touch(&info_.i_indirect, true);
      info_.i_indirect = *page;
      *page = nullptr;
      ++info_.index_pages;
    }
    return nullptr;  // need another page
  }
  index -= SHMEM_NR_DIRECT;
  const uint64_t offset = index % ENTRIES_PER_PAGE;
  index /= ENTRIES_PER_PAGE;
  uint64_t* dir = dir_map(info_.i_indirect);
  if (index >= ENTRIES_PER_PAGE / 2) {
    index -= ENTRIES_PER_PAGE / 2;
    uint64_t* mid = dir + ENTRIES_PER_PAGE / 2 + index / ENTRIES_PER_PAGE;
    index %= ENTRIES_PER_PAGE;
    vcost::visit(mid);
    if (!*mid) {
      if (page && *page) {
        vcost::touch(mid, true);
        *mid = reinterpret_cast<uint64_t>(*page);
        *page = nullptr;
        ++info_.index_pages;
      }
      return nullptr;  // need another page
    }
    dir = dir_map(reinterpret_cast<const Page*>(*mid));
  }
  uint64_t* slot = dir + index;
  vcost::visit(slot);
  if (!*slot) {
    if (!page || !*page) return nullptr;  // need a page
    vcost::touch(slot, true);
    *slot = reinterpret_cast<uint64_t>(*page);
    *page = nullptr;
    ++info_.index_pages;
  }
  uint64_t* entry = dir_map(reinterpret_cast<const Page*>(*slot)) + offset;
  vcost::visit(entry);
  return entry;
}

uint64_t* ShmemFile::shmem_swp_alloc(ShmemTask& t, uint64_t index, LockToken& tok, int* error) {
  // SGP_CACHE, sbinfo->max_blocks == 0. info->lock held on entry and on return.
  if (index >= cfg_.nr_pages) {
    *error = -EINVAL;
    return nullptr;
  }
  Page* page = nullptr;
  uint64_t* entry;
  while (!(entry = shmem_swp_entry(index, &page))) {
    info_unlock(tok);
    page = shmem_dir_alloc(t);
    info_lock(t, tok);  // the index-page retake
    if (!page) {
      *error = -ENOMEM;
      return nullptr;
    }
    set_next_index(index);
  }
  if (page) {  // another task gave its page
    ++t.st.index_pages_freed;
    shmem_dir_free(t.cpu, page);
  }
  set_next_index(index);
  return entry;
}

uint64_t ShmemFile::count_index_pages(std::vector<const Page*>* seen) const {
  if (!info_.i_indirect) return 0;
  uint64_t n = 1;
  if (seen) seen->push_back(info_.i_indirect);
  const uint64_t* top = dir_map(info_.i_indirect);
  for (uint64_t i = 0; i < ENTRIES_PER_PAGE; ++i) {
    if (!top[i]) continue;
    const auto* p = reinterpret_cast<const Page*>(top[i]);
    ++n;
    if (seen) seen->push_back(p);
    if (i < ENTRIES_PER_PAGE / 2) continue;
    const uint64_t* mid = dir_map(p);
    for (uint64_t j = 0; j < ENTRIES_PER_PAGE; ++j)
      if (mid[j]) {
        ++n;
        if (seen) seen->push_back(reinterpret_cast<const Page*>(mid[j]));
      }
  }
  return n;
}

void ShmemFile::free_swap_vector(int cpu) {
  if (!info_.i_indirect) return;
  std::vector<const Page*> pages;
  count_index_pages(&pages);
  // Children before parents (their contents are read by count_index_pages above, before anything is freed).
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) shmem_dir_free(cpu, const_cast<Page*>(*it));
  info_.i_indirect = nullptr;
  info_.index_pages = 0;
}

// ---- the fault
// -------------------------------------------------------------------------------------------------------

int ShmemFile::touch(ShmemTask& t, uint64_t idx) {
  ++t.st.touches;
  if (idx >= cfg_.nr_pages) return VM_FAULT_SIGBUS;  // beyond i_size
  vcost::touch(&pte_[idx], false);                   // the MMU's walk ends at the PTE
  if (const uint64_t pte = pte_[idx].load(std::memory_order_acquire)) {
    read_byte(reinterpret_cast<const Page*>(pte));
    return 0;
  }
  return handle_mm_fault(t, idx);
}

int ShmemFile::handle_mm_fault(ShmemTask& t, uint64_t idx) {
  ++t.st.faults;
  LockToken mmap_tok;
  mmap_sem_.lock_read(mmap_tok);  // do_page_fault: down_read(&mm->mmap_sem)
  ++t.st.mmap_sem_reads;
  spin_for_ticks(fault_ticks_);
  Page* page = nullptr;
  int ret;
  switch (cfg_.variant) {
    case ShmemVariant::lock_twice:
    case ShmemVariant::prealloc: ret = shmem_fault(t, idx, &page); break;
    case ShmemVariant::ramfs: ret = filemap_fault(t, idx, &page); break;
    default: ret = shmem_fault_modern(t, idx, &page); break;
  }
  if (ret & VM_FAULT_ERROR) {
    if (ret & VM_FAULT_OOM) ++t.st.oom;
  } else {
    // __do_fault: the page comes back locked with a reference; install the PTE if it is still pte_none (the
    // pte_same check under the PTE lock), page_add_file_rmap; otherwise drop the reference.
    uint64_t none = 0;
    vcost::rmw(&pte_[idx]);
    const bool mapped = pte_[idx].compare_exchange_strong(none, reinterpret_cast<uint64_t>(page),
                                                          std::memory_order_acq_rel, std::memory_order_acquire);
    if (mapped) {
      vcost::rmw(page);  // page_add_file_rmap: atomic_inc_and_test(&page->_mapcount)
      std::atomic_ref<int32_t>(page->_mapcount).fetch_add(1, std::memory_order_relaxed);
    } else {
      ++t.st.pte_races;
    }
    unlock_page(*page);
    if (!mapped) page_cache_release(ms_, t.cpu, page);
    read_byte(page);
  }
  mmap_sem_.unlock_read(mmap_tok);
  return ret;
}

int ShmemFile::shmem_fault(ShmemTask& t, uint64_t idx, Page** pagep) {
  const int error = shmem_getpage(t, idx, pagep);
  if (error) return error == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
  return VM_FAULT_LOCKED;
}

int ShmemFile::shmem_getpage(ShmemTask& t, uint64_t idx, Page** pagep) {
  const bool prealloc = cfg_.variant == ShmemVariant::prealloc;
  Page* filepage = nullptr;
  Page* prealloc_page = nullptr;
  bool first_lookup = true;
  int error = 0;
  LockToken tok;
  for (;;) {  // repeat:
    filepage = find_lock_page(t, idx);
    if (filepage) {
      if (!PageUptodate(*filepage))  // pages are unlocked only once uptodate; nothing here leaves one behind
        throw std::logic_error("shmem_getpage: a locked-then-released page is not uptodate");
      if (first_lookup) ++t.st.cache_hits;
      break;  // goto done
    }
    first_lookup = false;
    t.preload.preload();  // radix_tree_preload(gfp & ~__GFP_HIGHMEM); radix_tree_preload_end()
    if (prealloc && !prealloc_page) {
      prealloc_page = alloc_page(t);  // "don't care if this succeeds"
      if (prealloc_page) __set_bit(*prealloc_page, PG_swapbacked);
    }

    info_lock(t, tok);
    shmem_recalc_inode();
    uint64_t* entry = shmem_swp_alloc(t, idx, tok, &error);
    if (!entry) {
      info_unlock(tok);
      break;  // goto failed
    }
    uint64_t swap = *entry;  // 0: no swap is modelled
    // sbinfo->max_blocks == 0 and VM_ACCOUNT: no block accounting.
    if (!prealloc_page) {
      info_unlock(tok);
      filepage = alloc_page(t);
      if (!filepage) {
        error = -ENOMEM;
        break;
      }
      __set_bit(*filepage, PG_swapbacked);  // SetPageSwapBacked
      info_lock(t, tok);
    } else {
      filepage = prealloc_page;
      prealloc_page = nullptr;
    }
    entry = shmem_swp_alloc(t, idx, tok, &error);
    if (entry) swap = *entry;
    int ret = error || swap;
    if (!ret) ret = add_to_page_cache_lru(t, filepage, idx, true);
    if (ret) {
      info_unlock(tok);
      ++t.st.page_allocs_unused;
      page_cache_release(ms_, t.cpu, filepage);
      filepage = nullptr;
      if (error) break;  // goto failed
      ++t.st.eexist_races;
      continue;  // goto repeat
    }
    vcost::touch(&info_.alloced, true);
    info_.flags |= SHMEM_PAGEIN;
    info_.alloced++;
    info_unlock(tok);
    ++t.st.new_pages;
    clear_highpage(filepage);  // clear_highpage + flush_dcache_page, outside every lock
    SetPageUptodate(*filepage);
    break;
  }
  if (prealloc_page) {  // done: / failed: an unused preallocated page is released
    ++t.st.page_allocs_unused;
    page_cache_release(ms_, t.cpu, prealloc_page);
  }
  if (!filepage) return error ? error : -ENOMEM;
  *pagep = filepage;
  return 0;
}

int ShmemFile::shmem_fault_modern(ShmemTask& t, uint64_t idx, Page** pagep) {
  bool first_lookup = true;
  for (;;) {                                     // repeat:
    if (Page* folio = find_lock_page(t, idx)) {  // filemap_get_entry + folio_lock + the mapping check
      if (!PageUptodate(*folio)) throw std::logic_error("shmem_get_folio_gfp: a found folio is not uptodate");
      if (first_lookup) ++t.st.cache_hits;
      *pagep = folio;
      return VM_FAULT_LOCKED;
    }
    first_lookup = false;
    // shmem_alloc_and_add_folio
    Page* folio = alloc_page(t);  // shmem_alloc_folio(gfp, 0, info, index)
    if (!folio) return VM_FAULT_OOM;
    __set_bit(*folio, PG_swapbacked);  // __folio_set_swapbacked (add_to_page_cache_lru sets PG_locked)
    if (add_to_page_cache_lru(t, folio, idx, false) != 0) {  // shmem_add_to_page_cache: -EEXIST
      ++t.st.eexist_races;
      ++t.st.page_allocs_unused;
      page_cache_release(ms_, t.cpu, folio);  // folio_unlock + folio_put
      continue;                               // goto repeat
    }
    // shmem_inode_acct_blocks: no limit, no quota: nothing.
    shmem_recalc_inode_modern(t, 1, 0);
    lru_cache_add(lru_, t.pvec, folio, t.cpu);  // folio_add_lru
    ++t.st.new_pages;
    clear_highpage(folio);  // outside the locks; then folio_mark_uptodate
    SetPageUptodate(*folio);
    *pagep = folio;
    return VM_FAULT_LOCKED;
  }
}

int ShmemFile::filemap_fault(ShmemTask& t, uint64_t idx, Page** pagep) {
  int ret = 0;
  Page* page = mapping_.find_get_page(idx);
  if (page) {
    lock_page(t, *page);
    ++t.st.cache_hits;
  } else {
    // do_sync_mmap_readahead: ramfs has ra_pages 0, nothing to do.
    ret = VM_FAULT_MAJOR;
    bool read = false;
    while (!(page = find_lock_page(t, idx))) {    // retry_find:
      const int error = page_cache_read(t, idx);  // no_cached_page:
      if (error < 0) return error == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
      read = true;
    }
    if (!read) ++t.st.cache_hits;  // another task inserted it between the two lookups
  }
  if (!PageUptodate(*page)) throw std::logic_error("filemap_fault: a found page is not uptodate");
  *pagep = page;
  return ret | VM_FAULT_LOCKED;
}

int ShmemFile::page_cache_read(ShmemTask& t, uint64_t idx) {
  Page* page = alloc_page(t);  // page_cache_alloc_cold(mapping)
  if (!page) return -ENOMEM;
  int ret = add_to_page_cache_lru(t, page, idx, true);  // GFP_KERNEL
  if (ret == 0) {
    ++t.st.new_pages;
    clear_highpage(page);  // ->readpage = simple_readpage: clear, flush_dcache_page, SetPageUptodate, unlock
    SetPageUptodate(*page);
    unlock_page(*page);
  } else if (ret == -EEXIST) {
    ++t.st.eexist_races;
    ++t.st.page_allocs_unused;
    ret = 0;  // losing the race to add is OK
  }
  page_cache_release(ms_, t.cpu, page);
  return ret;
}

// ---- drains, checks, teardown
// -----------------------------------------------------------------------------------------

void ShmemFile::lru_add_drain(ShmemTask& t) {
  if (t.pvec.nr) pagevec_lru_add(lru_, t.pvec, t.cpu);
}

void ShmemFile::lru_add_drain_all() {
  for (auto& t : tasks_) lru_add_drain(*t);
}

ShmemStats ShmemFile::totals() const {
  ShmemStats s;
  for (const auto& t : tasks_) s += t->stats();
  return s;
}

ShmemCheck ShmemFile::verify() const {
  ShmemCheck c;
  const uint64_t mine = mapping_.mapping_value();
  const bool swapbacked = cfg_.variant != ShmemVariant::ramfs;
  for (const auto& t : tasks_)
    if (t->pvec.nr) c.fail("task on cpu " + std::to_string(t->cpu) + ": pagevec not drained");
  // The pages of the cache, one bit per pfn (a set of pointers would cost more memory than the run declared).
  uint64_t end_pfn = 0;
  for (int n = 0; n < ms_.nr_nodes(); ++n)
    end_pfn = std::max(end_pfn, ms_.node_start_pfn(n) + ms_.node_present_pages(n));
  std::vector<bool> cached(end_pfn, false);
  uint64_t pages = 0;
  mapping_.page_tree.for_each([&](uint64_t idx, void* slot) {
    ms_.interruption_point();
    const auto* p = static_cast<const Page*>(slot);
    const auto at = [idx] { return "page cache index " + std::to_string(idx) + ": "; };
    const uint64_t pfn = ms_.page_to_pfn(p);
    if (pfn >= end_pfn) return c.fail(at() + "not a page of this memory");
    if (cached[pfn]) c.fail(at() + "the same page is also at another index");
    cached[pfn] = true;
    ++pages;
    if (idx >= cfg_.nr_pages) c.fail(at() + "beyond the end of the file");
    if (p->index != idx) c.fail(at() + "page->index is " + std::to_string(p->index));
    if (p->mapping != mine) c.fail(at() + "page->mapping is not this mapping");
    if (PageLocked(*p)) c.fail(at() + "still locked");
    if (!PageUptodate(*p)) c.fail(at() + "not uptodate");
    if (!PageLRUAtomic(*p)) c.fail(at() + "not on an LRU list");
    if (PageSwapBacked(*p) != swapbacked) c.fail(at() + "PG_swapbacked wrong for this file");
    const int mapcount = page_mapcount(*p);
    const bool pte = idx < cfg_.nr_pages && pte_page(idx) == p;
    if (mapcount != (pte ? 1 : 0))
      c.fail(at() + "mapcount " + std::to_string(mapcount) + " but " + (pte ? "one PTE" : "no PTE") + " maps it");
    if (page_ref_count(*p) != 1 + mapcount)
      c.fail(at() + "refcount " + std::to_string(page_ref_count(*p)) + " (expected 1 for the cache + " +
             std::to_string(mapcount) + " for PTEs)");
  });
  c.pages = pages;
  if (c.pages != mapping_.nrpages())
    c.fail("nrpages " + std::to_string(mapping_.nrpages()) + " but the tree holds " + std::to_string(c.pages));
  for (uint64_t i = 0; i < cfg_.nr_pages; ++i) {
    if (i % pageblock_nr_pages == 0) ms_.interruption_point();
    const Page* p = pte_page(i);
    if (!p) continue;
    ++c.ptes;
    if (mapping_.page_tree.lookup(i) != p)
      c.fail("PTE " + std::to_string(i) + " maps a page that is not the page cache's page at that index");
  }
  c.lru_pages = lru_.nr_pages(swapbacked ? LRU_INACTIVE_ANON : LRU_INACTIVE_FILE);
  if (c.lru_pages != c.pages)
    c.fail(std::to_string(c.lru_pages) + " pages on the LRU but " + std::to_string(c.pages) + " in the page cache");
  if (info_.lock) {
    if (info_.alloced != mapping_.nrpages() + info_.swapped)
      c.fail("info->alloced " + std::to_string(info_.alloced) + " != nrpages " + std::to_string(mapping_.nrpages()) +
             " + swapped " + std::to_string(info_.swapped));
  }
  std::vector<const Page*> dirs;
  c.index_pages = count_index_pages(&dirs);
  if (c.index_pages != info_.index_pages)
    c.fail(std::to_string(c.index_pages) + " index pages reachable but " + std::to_string(info_.index_pages) +
           " installed");
  std::unordered_set<const Page*> dirset(dirs.begin(), dirs.end());
  if (dirset.size() != dirs.size()) c.fail("an index page is linked twice in the swap vector");
  for (const Page* d : dirs)
    if (cached[ms_.page_to_pfn(d)]) c.fail("an index page is also in the page cache");
  return c;
}

void ShmemFile::teardown(int cpu) {
  if (torn_down_) return;
  lru_add_drain_all();
  // munmap: zap_pte_range drops each PTE's mapcount and reference.
  for (uint64_t i = 0; i < cfg_.nr_pages; ++i) {
    if (i % pageblock_nr_pages == 0) ms_.interruption_point();
    auto* p = reinterpret_cast<Page*>(pte_[i].exchange(0, std::memory_order_acq_rel));
    if (!p) continue;
    std::atomic_ref<int32_t>(p->_mapcount).fetch_sub(1, std::memory_order_relaxed);  // page_remove_rmap
    page_cache_release(ms_, cpu, p);
  }
  // truncate_inode_pages: off the LRU, out of the tree, the cache's reference dropped (the last: freed).
  std::vector<Page*> pages;
  mapping_.page_tree.for_each([&](uint64_t, void* s) { pages.push_back(static_cast<Page*>(s)); });
  for (Page* p : pages) {
    ms_.interruption_point();
    if (!trylock_page(*p)) throw std::logic_error("teardown: a page cache page is still locked");
    lru_.del_page_from_lru(p);
    mapping_.remove_from_page_cache(p);
    unlock_page(*p);
    page_cache_release(ms_, cpu, p);
  }
  info_.alloced = 0;  // shmem_recalc_inode after truncation
  info_.next_index = 0;
  free_swap_vector(cpu);  // shmem_truncate: the index pages
  torn_down_ = true;
}

}  // namespace alloclab::mm
