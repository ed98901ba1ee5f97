// shmem: the read-fault path of a shared anonymous mapping (the tmpfs inode behind MAP_SHARED|MAP_ANON) and of a
// ramfs file, with the inode's info->lock, the page cache under mapping->tree_lock, the LRU pagevec under lru_lock
// and the fault's read of mmap_sem — the seed "shmem: reduce one time of locking in pagefault" (Shaohua Li, 2010).
//
// Models: four variants of one page fault (handle_mm_fault -> __do_fault -> vm_ops->fault -> PTE install):
//   lock_twice  Linux 2.6.35 mm/shmem.c before the patch: shmem_fault -> shmem_getpage(SGP_CACHE): find_lock_page
//               misses, radix_tree_preload, [info->lock #1: shmem_recalc_inode, shmem_swp_alloc], unlock,
//               shmem_alloc_page (alloc_page_vma: the page allocator, per-CPU lists, zone->lock on refill),
//               SetPageSwapBacked, [info->lock #2: shmem_swp_alloc again, add_to_page_cache_lru with
//               mapping->tree_lock nested and the pagevec's lru_lock every PAGEVEC_SIZE (14) pages, alloced++],
//               unlock, then clear_highpage (a real 4 KiB clear with Backing::real) and SetPageUptodate outside every
//               lock. info->lock: 2 per new page.
//   prealloc    the patch as merged (v2, for 2.6.36 [unsure of the release]): the page is allocated before
//               info->lock when find_lock_page missed and none is preallocated yet; one section does recalc +
//               swp_alloc + swp_alloc + add_to_page_cache_lru + alloced++; an unused preallocated page is freed at
//               done:/failed:.
//               info->lock: 1 per new page.
//   ramfs       2.6.35 filemap_fault on a ramfs file (the seed's 10.5 s): find_get_page, find_lock_page miss,
//               page_cache_read (page_cache_alloc_cold with GFP_HIGHUSER, add_to_page_cache_lru onto the file LRU,
//               simple_readpage = clear_highpage + SetPageUptodate + unlock_page, page_cache_release), then
//               find_lock_page again. No info->lock.
//   modern      a recent kernel (v6.19): shmem_get_folio_gfp -> filemap_get_entry miss ->
//               shmem_alloc_and_add_folio: allocate, __folio_set_locked/swapbacked, shmem_add_to_page_cache under
//               the mapping->i_pages xa_lock (xarray nodes allocated under that lock, GFP_NOWAIT), then
//               shmem_recalc_inode(inode, 1, 0) as one short, separate info->lock section, then folio_add_lru
//               (per-CPU folio_batch of 31 under the lruvec lru_lock); clear_highpage and folio_mark_uptodate outside
//               the locks. info->lock: 1 per new page, never nested with the xa_lock.
// The swap vector of 2.6.35 is real: SHMEM_NR_DIRECT (16) entries in the inode, then i_indirect, a page whose first
// half points to leaf pages of ENTRIES_PER_PAGE (512) swp_entry_t and whose second half points to middle pages of
// 512 leaf pointers. shmem_swp_alloc walks it under info->lock and, when a level is missing, drops info->lock,
// allocates a zeroed index page (shmem_dir_alloc, unmovable, __GFP_ZERO), retakes info->lock and walks again: one
// retake per index page allocated (about once per 512 new indices); a page another task installed first is freed
// at once (counted: index_allocs - index_frees = index pages installed = shmem_index_pages(n) for [0, n)).
// So, exactly, over any run (misses = faults that allocated a page = new pages + EEXIST losers):
//   info->lock acquisitions = 2 x misses + index_allocs (lock_twice), misses + index_allocs (prealloc), 0 (ramfs),
//   new pages (modern); mapping->tree_lock / i_pages = misses; mmap_sem reads = faults; lru_lock = full pagevecs.
// The PTE array of the one mm is real too: a fault installs the page with a compare-and-swap (pte_same) and
// page_add_file_rmap; a task that finds the PTE taken drops its reference (the overlap case). lock_page sleeps as
// the kernel's does in a virtual-clock run: on the page's hashed wait queue (page_waitqueue, 256 of them), until
// unlock_page wakes it one futex wake-up later; on OS threads it spins (with sched_yield when oversubscribed).
// mmap_sem: a Lock of class mmap_sem (an rw_semaphore: the rwsem kind by default), taken for read around every
// fault (do_page_fault's down_read / up_read): one atomic RMW on its count word to enter and one to leave, a line that
// readers on different CPUs bounce; lock_stat prints its read row as "mmap_sem-R". Nothing here takes it for write,
// so no reader ever waits. (Modern kernels take the per-VMA lock instead, lock_vma_under_rcu: also one atomic on one
// shared line per fault, so the same model stands for it.)
// Virtual time: the PTE and the page flags are atomic RMWs on tracked lines (mmap_sem's count word is its lock's), the
// swap-vector walk is a tree_step per level, clear_highpage with real backing is a bulk clear of 4 KiB on the page's
// node (each line read for ownership and written), and the read of the page's first byte is a tracked line. What the
// lock sections touch is tracked, so a hand-off of info->lock or the page-cache lock to another CPU pays, besides the
// lock word's own transfer (the lock kind's hand-off), the transfer of every line the previous holder wrote and the new
// one reads or writes, at the profile's distance between the two CPUs: the inode's first line (info->flags, alloced,
// swapped, next_index: read by shmem_recalc_inode, written by alloced++ and by a growing next_index), the swap-vector
// slots walked and the index-page links installed, the radix-tree node slots walked and written and the node's count
// (page_cache.cpp), mapping->nrpages, the struct page (flags, references, mapping and index) and the LRU counts. The
// lock word sits on a line of its own here; in 2.6.35 spinlock_t lock is the first field of struct shmem_inode_info, on
// the same line as flags/alloced/swapped/next_index, so a hand-off there moves one line: the model's info_lock()
// therefore hands the inode's first line to the new holder with the lock (no second transfer), and the sections pay
// only for the other lines they touch. Leaves out: swap (swapped stays 0; no swap-in/writepage), tmpfs size limits
// (max_blocks 0, as the seed's test), VM_ACCOUNT/shmem_acct_block, memcg charging, mempolicies (pages come from the
// task's node), huge pages, the modern fault-around (filemap_map_pages) and per-VMA lock details, the split PTE lock (a
// CAS on the PTE instead), the TLB, readahead (ramfs has ra_pages 0 anyway), truncation racing with faults (teardown
// runs alone).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/counters.hpp"
#include "alloclab/base/enum_names.hpp"
#include "alloclab/base/line_aligned.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/locks/wait_event.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/page_cache.hpp"

namespace alloclab::mm {

enum class ShmemVariant : uint8_t { lock_twice, prealloc, ramfs, modern };
inline constexpr EnumNames<ShmemVariant, 4> kShmemVariantNames{{{{ShmemVariant::lock_twice, "lock_twice"},
                                                                 {ShmemVariant::prealloc, "prealloc"},
                                                                 {ShmemVariant::ramfs, "ramfs"},
                                                                 {ShmemVariant::modern, "modern"}}}};
inline std::string_view to_string(ShmemVariant v) { return kShmemVariantNames(v); }

// 2.6.35 mm/shmem.c and include/linux/shmem_fs.h (64-bit).
inline constexpr uint64_t SHMEM_NR_DIRECT = 16;
inline constexpr uint64_t ENTRIES_PER_PAGE = PAGE_SIZE / sizeof(unsigned long);  // 512
inline constexpr uint64_t ENTRIES_PER_PAGEPAGE = ENTRIES_PER_PAGE * ENTRIES_PER_PAGE;
inline constexpr uint64_t SHMEM_MAX_INDEX = SHMEM_NR_DIRECT + (ENTRIES_PER_PAGEPAGE / 2) * (ENTRIES_PER_PAGE + 1);
inline constexpr unsigned long SHMEM_PAGEIN = 0x1;  // VM_READ in info->flags

// Index pages the 2.6.35 swap vector holds once indices [0, n) are allocated: i_indirect, one leaf per 512 indices
// of the single-indirect half, and in the double-indirect half one middle page per 512 leaves plus the leaves.
uint64_t shmem_index_pages(uint64_t n);

// VM_FAULT_* (2.6.35 include/linux/mm.h).
inline constexpr int VM_FAULT_OOM = 0x0001, VM_FAULT_SIGBUS = 0x0002, VM_FAULT_MAJOR = 0x0004, VM_FAULT_LOCKED = 0x0200;
inline constexpr int VM_FAULT_ERROR = VM_FAULT_OOM | VM_FAULT_SIGBUS;

struct ShmemConfig {
  ShmemVariant variant = ShmemVariant::lock_twice;
  uint64_t nr_pages = 0;  // the mapping's size in pages (i_size >> PAGE_SHIFT), 1..SHMEM_MAX_INDEX
  bool clear = true;      // clear_highpage each new page (false: skipped — the "without zeroing" benchmark)
  uint64_t clear_ns = 0;  // Backing::none: a busy-wait standing for the 4 KiB clear (0: nothing)
  uint64_t fault_ns = 0;  // trap, page-table walk and PTE-install cost: a busy-wait outside every lock (0: none)
};

// One task's counters (plain: only the task writes them).
#define ALLOCLAB_SHMEM_STATS(X)                                                                      \
  X(touches, sum, "reads of a page of the mapping (the test program's `t = *(addr + index)`)")       \
  X(faults, sum, "touches that found no PTE: handle_mm_fault -> ->fault")                            \
  X(new_pages, sum, "pages this task inserted into the page cache")                                  \
  X(cache_hits, sum, "faults that found the page in the page cache before allocating one")           \
  X(eexist_races, sum, "add_to_page_cache lost the race (-EEXIST): page freed, looked up again")     \
  X(pte_races, sum, "another task installed the PTE meanwhile (pte_same failed): reference dropped") \
  X(page_lock_waits, sum, "lock_page found the page locked (its first faulter still filling it)")    \
  X(oom, sum, "VM_FAULT_OOM: the page allocator returned nothing")                                   \
  X(page_allocs, sum, "data pages allocated")                                                        \
  X(page_allocs_unused, sum, "of them freed without being used (EEXIST losers, unused prealloc)")    \
  X(index_page_allocs, sum, "shmem_dir_alloc calls, each between an info->lock release and retake")  \
  X(index_pages_freed, sum, "index pages freed at once: another task had installed that level")      \
  X(info_lock, sum, "info->lock acquisitions")                                                       \
  X(tree_lock, sum, "mapping->tree_lock (xa_lock) acquisitions")                                     \
  X(lru_lock, sum, "lru_lock acquisitions (one per full pagevec)")                                   \
  X(mmap_sem_reads, sum, "mmap_sem read acquisitions (one per fault)")
struct ShmemStats {
  ALLOCLAB_COUNTERS(ShmemStats, ALLOCLAB_SHMEM_STATS)
};

// The per-CPU pieces of the fault path for one task (a pinned worker is its CPU): its pagevec and radix-tree
// preload, the model CPU and node it allocates on, and its counters.
class ShmemTask {
 public:
  ShmemTask(int cpu_, int nid_, unsigned pagevec_size, lru_list lru) : cpu(cpu_), nid(nid_), pvec(pagevec_size, lru) {}
  ShmemTask(const ShmemTask&) = delete;
  ShmemTask& operator=(const ShmemTask&) = delete;
  const int cpu, nid;
  ShmemStats st;
  Pagevec pvec;
  RadixTreePreload preload;
  ShmemStats stats() const {  // st with the pagevec's lru_lock count
    ShmemStats s = st;
    s.lru_lock = pvec.lru_lock_taken;
    return s;
  }
};

// What verify() found.
struct ShmemCheck {
  bool ok = true;
  std::vector<std::string> errors;  // at most 20, then a count
  uint64_t pages = 0;               // pages in the page cache
  uint64_t ptes = 0;                // PTEs installed
  uint64_t index_pages = 0;         // swap-vector index pages reachable from the inode
  uint64_t lru_pages = 0;           // pages on the LRU lists
  void fail(const std::string& e);
  std::string summary() const;
};

// One shared mapping of one file (shmem_zero_setup's tmpfs inode, or a ramfs file) in one mm, and the tasks that
// fault it. Faults may run concurrently on any tasks; everything else (add_task, drains, verify, teardown) runs
// when no fault does.
class ShmemFile {
 public:
  // Throws std::invalid_argument naming nr_pages / clear_ns for values out of range.
  ShmemFile(MemorySystem& ms, LockDomain& locks, const ShmemConfig& cfg);
  // Frees the file's own state only: the pages it holds stay allocated in the MemorySystem unless teardown() ran (a
  // run stopped during its teardown is destroyed with its MemorySystem, at once).
  ~ShmemFile();
  ShmemFile(const ShmemFile&) = delete;
  ShmemFile& operator=(const ShmemFile&) = delete;

  // A task running as model CPU `cpu`, allocating on node `nid`. Lives as long as the file.
  ShmemTask& add_task(int cpu, int nid);
  ShmemTask& task(size_t i) { return *tasks_.at(i); }
  size_t nr_tasks() const { return tasks_.size(); }

  // A read of page `idx` of the mapping: just the read when its PTE is present, else the variant's fault.
  // Returns 0 without a fault, else the fault's VM_FAULT_* bits (VM_FAULT_SIGBUS past the end).
  int touch(ShmemTask& t, uint64_t idx);

  // lru_add_drain: a task's pagevec onto the LRU (the kernel leaves it until someone drains).
  void lru_add_drain(ShmemTask& t);
  void lru_add_drain_all();
  // The invariants of the page cache, PTEs, LRU, inode accounting and swap vector. Call with no fault running and
  // every pagevec drained. Polls the MemorySystem's interruption_point(), as teardown() and prefault_backing() do.
  ShmemCheck verify() const;
  // munmap + final iput: zap every PTE, truncate_inode_pages (off the LRU, out of the tree, last reference freed),
  // shmem_truncate's index pages: every page goes back to the allocator (on model CPU `cpu`).
  void teardown(int cpu);
  bool torn_down() const { return torn_down_; }

  ShmemStats totals() const;  // over the tasks
  const ShmemConfig& config() const { return cfg_; }
  const char* fault_handler() const;  // "shmem_fault" | "filemap_fault"
  const PageCache& mapping() const { return mapping_; }
  const LruCache& lru() const { return lru_; }
  unsigned long nrpages() const { return mapping_.nrpages(); }
  uint64_t alloced() const { return info_.alloced; }
  uint64_t next_index() const { return info_.next_index; }
  uint64_t index_pages() const { return info_.index_pages; }  // installed in the swap vector
  Page* pte_page(uint64_t idx) const { return reinterpret_cast<Page*>(pte_[idx].load(std::memory_order_acquire)); }
  Lock& mmap_sem() { return mmap_sem_; }  // mm->mmap_sem (for tests: no fault may run while they take it)

 private:
  struct ShmemInodeInfo {        // struct shmem_inode_info; fields under info->lock
    std::unique_ptr<Lock> lock;  // info->lock (absent for ramfs)
    unsigned long flags = 0;
    uint64_t alloced = 0, swapped = 0, next_index = 0;
    uint64_t i_direct[SHMEM_NR_DIRECT] = {};  // swp_entry_t
    Page* i_indirect = nullptr;
    uint64_t index_pages = 0;  // model: index pages installed
  };

  int handle_mm_fault(ShmemTask& t, uint64_t idx);
  int shmem_fault(ShmemTask& t, uint64_t idx, Page** pagep);
  int shmem_getpage(ShmemTask& t, uint64_t idx, Page** pagep);  // 2.6.35, with or without the prealloc patch
  int shmem_fault_modern(ShmemTask& t, uint64_t idx, Page** pagep);
  int filemap_fault(ShmemTask& t, uint64_t idx, Page** pagep);
  int page_cache_read(ShmemTask& t, uint64_t idx);
  Page* find_lock_page(ShmemTask& t, uint64_t idx);
  // lock_page / unlock_page: PG_locked, and in a virtual-clock run the page's wait queue (see the file comment).
  void lock_page(ShmemTask& t, Page& p);
  void unlock_page(Page& p);
  WaitEvent& page_waitqueue(const Page& p);
  Page* alloc_page(ShmemTask& t);
  // add_to_page_cache_lru (lru = false: add_to_page_cache only, the modern shmem_add_to_page_cache).
  int add_to_page_cache_lru(ShmemTask& t, Page* page, uint64_t idx, bool lru);
  // page_address (kmap) without a plain read of page->flags, which other CPUs may be updating (trylock_page).
  void* page_address(const Page* page) const;
  void clear_highpage(Page* page);
  void read_byte(const Page* page) const;
  void info_lock(ShmemTask& t, LockToken& tok);
  void info_unlock(LockToken& tok);
  void shmem_recalc_inode();
  // shmem_swp_alloc's `if (info->next_index <= index) info->next_index = index + 1;` (a read, a write when it grows).
  void set_next_index(uint64_t index);
  void shmem_recalc_inode_modern(ShmemTask& t, long alloced, long swapped);
  uint64_t* shmem_swp_entry(uint64_t index, Page** page);
  uint64_t* shmem_swp_alloc(ShmemTask& t, uint64_t index, LockToken& tok, int* error);
  Page* shmem_dir_alloc(ShmemTask& t);
  void shmem_dir_free(int cpu, Page* page);
  uint64_t* dir_map(const Page* page) const;
  uint64_t count_index_pages(std::vector<const Page*>* seen) const;
  void free_swap_vector(int cpu);

  MemorySystem& ms_;
  const ShmemConfig cfg_;
  const bool backing_, spin_yield_;
  const gfp_t gfp_;
  const uint64_t clear_ticks_, fault_ticks_;
  alignas(64) ShmemInodeInfo info_;
  alignas(64) PageCache mapping_;
  LruCache lru_;
  Lock mmap_sem_;                                            // mm->mmap_sem
  line_vector<std::atomic<uint64_t>> pte_;                   // Page* of each index's PTE, 0 = pte_none
  std::vector<std::unique_ptr<WaitEvent>> page_wait_table_;  // folio_wait_table: PG_locked sleepers by page hash
  std::vector<char*> backing_base_;                          // each node's 4 KiB frames (Backing::real), by node
  std::vector<std::unique_ptr<ShmemTask>> tasks_;
  bool torn_down_ = false;
};

}  // namespace alloclab::mm
