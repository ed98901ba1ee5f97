// The page cache of one file (struct address_space: a radix tree of pages under mapping->tree_lock) and the LRU
// addition of new pages through a per-CPU pagevec under lru_lock: what shmem's fault path (shmem.hpp) builds on.
//
// Models: Linux 2.6.35 — lib/radix-tree.c (RADIX_TREE_MAP_SHIFT 6: 64 slots per node, radix_tree_extend growing
// the height, radix_tree_node_alloc taking nodes from the per-CPU radix_tree_preloads filled by radix_tree_preload
// outside any lock, lockless lookup under RCU), mm/filemap.c (find_get_page with page_cache_get_speculative,
// find_lock_page, add_to_page_cache_locked / add_to_page_cache_lru, __remove_from_page_cache) and mm/swap.c
// (__lru_cache_add into a per-CPU pagevec of PAGEVEC_SIZE 14, ____pagevec_lru_add taking zone->lru_lock once per
// full pagevec, release_pages). The "modern" shmem variant reuses the same tree as the xarray of a recent kernel
// (v6.19: XA_CHUNK_SHIFT is also 6) with its two differences: nodes are allocated *under* the xa_lock
// (xas_create's kmem_cache_alloc(GFP_NOWAIT); no preload), and folio_add_lru batches PAGEVEC_SIZE 31 folios
// (folio_batch; it was 15 up to about v6.12 [unsure of the release]) under the lruvec's lru_lock.
// Page flags that other CPUs may change while a page is in the cache (PG_locked, PG_uptodate, PG_lru) are updated
// with atomic RMWs as the kernel's set_bit/clear_bit; the page allocator's own non-atomic flag writes only touch
// pages nobody else can see.
// Virtual time: each radix-tree level walked is a tree_step on its slot's line, a slot written and the node's count
// (on its first line, as radix_tree_node's height and count) are tracked writes, page flag and reference updates are
// atomic RMWs on the struct page, nrpages and the LRU counts are tracked lines; the slab's node allocation is free.
// Leaves out: radix-tree tags (dirty/writeback), shrinking the tree and RCU-deferred node freeing (nodes are freed
// when the tree is destroyed, after every reader has gone), the height-0 root item (index 0 alone lives in a node
// too), the slab allocator (nodes come from operator new, the model's kmem_cache_alloc), memcg charging, zone
// vm_stat counters (NR_FILE_PAGES, NR_SHMEM), the active lists, reclaim and mark_page_accessed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/page.hpp"

namespace alloclab::mm {

// ---- page flags and references, the atomic forms --------------------------------------------------------------
inline uint64_t page_flags_load(const Page& p) {
  vcost::touch(&p, false);
  return std::atomic_ref<const uint64_t>(p.flags).load(std::memory_order_acquire);
}
// page_to_nid with an atomic load: another CPU may be setting a flag bit of the same word (trylock_page).
inline int page_to_nid_atomic(const Page& p) {
  return int((page_flags_load(p) >> NODES_PGSHIFT) & ((1u << NODES_WIDTH) - 1));
}
inline bool PageLocked(const Page& p) { return (page_flags_load(p) >> PG_locked) & 1; }
inline bool PageUptodate(const Page& p) { return (page_flags_load(p) >> PG_uptodate) & 1; }
inline bool PageSwapBacked(const Page& p) { return (page_flags_load(p) >> PG_swapbacked) & 1; }
inline bool PageLRUAtomic(const Page& p) { return (page_flags_load(p) >> PG_lru) & 1; }
inline void set_page_flag(Page& p, unsigned bit) {
  vcost::rmw(&p);
  std::atomic_ref<uint64_t>(p.flags).fetch_or(uint64_t(1) << bit, std::memory_order_release);
}
inline void clear_page_flag(Page& p, unsigned bit) {
  vcost::rmw(&p);
  std::atomic_ref<uint64_t>(p.flags).fetch_and(~(uint64_t(1) << bit), std::memory_order_release);
}
// trylock_page: test_and_set_bit_lock(PG_locked).
inline bool trylock_page(Page& p) {
  vcost::rmw(&p);
  const uint64_t bit = uint64_t(1) << PG_locked;
  return !(std::atomic_ref<uint64_t>(p.flags).fetch_or(bit, std::memory_order_acquire) & bit);
}
inline void unlock_page(Page& p) { clear_page_flag(p, PG_locked); }
// SetPageUptodate: smp_wmb() then set_bit, so a reader that sees the bit sees the cleared contents.
inline void SetPageUptodate(Page& p) { set_page_flag(p, PG_uptodate); }
// get_page_unless_zero (page_cache_get_speculative): a reference only while the page is not being freed.
inline bool get_page_unless_zero(Page& p) {
  vcost::rmw(&p);
  std::atomic_ref<int32_t> r(p._refcount);
  int32_t c = r.load(std::memory_order_relaxed);
  while (c > 0)
    if (r.compare_exchange_weak(c, c + 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
  return false;
}
// page_cache_release (put_page): drops a reference; the last one gives the page back to the allocator on `cpu`.
inline void page_cache_release(MemorySystem& ms, int cpu, Page* page) {
  std::atomic_ref<int32_t> r(page->_refcount);
  vcost::touch(page, false);
  int32_t c = r.load(std::memory_order_relaxed);
  if (c > 1) vcost::rmw(page);
  while (c > 1)
    if (r.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return;
  ms.free_pages(cpu, page, 0);  // the last reference: __free_pages drops it and frees
}

// ---- radix tree (lib/radix-tree.c) -----------------------------------------------------------------------------
inline constexpr unsigned RADIX_TREE_MAP_SHIFT = 6;
inline constexpr unsigned RADIX_TREE_MAP_SIZE = 1u << RADIX_TREE_MAP_SHIFT;
inline constexpr unsigned RADIX_TREE_MAX_PATH = (64 + RADIX_TREE_MAP_SHIFT - 1) / RADIX_TREE_MAP_SHIFT;  // 11
inline constexpr unsigned RADIX_TREE_PRELOAD_SIZE = RADIX_TREE_MAX_PATH;

struct alignas(64) RadixTreeNode {  // line-aligned: see base/line_aligned.hpp
  unsigned height = 0;              // 1: the slots hold items
  unsigned count = 0;               // used slots (tree lock held)
  std::atomic<void*> slots[RADIX_TREE_MAP_SIZE] = {};
};

// radix_tree_preloads: the per-CPU reserve radix_tree_preload() fills while the caller may still sleep. One per
// task here: a pinned worker is its CPU (preemption is what the kernel disables to keep it).
// It owns the nodes it holds (freed with it); pop() hands one over to the tree.
class RadixTreePreload {
 public:
  // radix_tree_preload(): tops the reserve up to RADIX_TREE_PRELOAD_SIZE nodes (kmem_cache_alloc each).
  void preload();
  RadixTreeNode* pop();  // nullptr when empty
  unsigned nr() const { return nr_; }
  uint64_t nodes_allocated() const { return allocated_; }  // kmem_cache_alloc calls made by preload()

 private:
  unsigned nr_ = 0;
  std::unique_ptr<RadixTreeNode> nodes_[RADIX_TREE_PRELOAD_SIZE];
  uint64_t allocated_ = 0;
};

class RadixTree {
 public:
  RadixTree() = default;
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // radix_tree_lookup under rcu_read_lock: lockless, safe against a concurrent insert.
  void* lookup(uint64_t index) const;
  // radix_tree_insert (tree lock held): 0, or -EEXIST when the slot is taken. Nodes come from `preload` (2.6.35:
  // the per-CPU reserve, then kmem_cache_alloc if it is empty) or, with nullptr, from kmem_cache_alloc under the
  // lock (the xarray's xas_create).
  int insert(uint64_t index, void* item, RadixTreePreload* preload);
  // radix_tree_delete (tree lock held): the item, or nullptr. Empty nodes stay until the tree is destroyed.
  void* remove(uint64_t index);
  // Every (index, item) in index order. No concurrent writer.
  template <class F>
  void for_each(F&& f) const {
    if (RadixTreeNode* r = rnode_.load(std::memory_order_acquire)) walk(r, 0, f);
  }
  unsigned height() const;
  uint64_t nr_nodes() const { return nodes_; }                        // nodes in the tree
  uint64_t nodes_allocated_locked() const { return locked_allocs_; }  // of them, allocated with the lock held

 private:
  template <class F>
  static void walk(const RadixTreeNode* n, uint64_t base, F& f) {
    const unsigned shift = (n->height - 1) * RADIX_TREE_MAP_SHIFT;
    for (unsigned i = 0; i < RADIX_TREE_MAP_SIZE; ++i) {
      void* s = n->slots[i].load(std::memory_order_acquire);
      if (!s) continue;
      const uint64_t idx = base + (uint64_t(i) << shift);
      if (n->height == 1)
        f(idx, s);
      else
        walk(static_cast<const RadixTreeNode*>(s), idx, f);
    }
  }
  RadixTreeNode* node_alloc(RadixTreePreload* preload);
  static void free_node(RadixTreeNode* n);

  std::atomic<RadixTreeNode*> rnode_{nullptr};
  uint64_t nodes_ = 0, locked_allocs_ = 0;
};

// ---- struct address_space ----------------------------------------------------------------------------------------
// The page cache of one file. `lock_class` is "mapping->tree_lock" (2.6.35) or "mapping->i_pages" (the xa_lock).
class PageCache {
 public:
  PageCache(LockDomain& locks, std::string_view lock_class);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  // page->mapping of the pages this cache holds (the address of the address_space, as in the kernel).
  uint64_t mapping_value() const { return reinterpret_cast<uint64_t>(this); }

  // find_get_page: RCU lookup plus a speculative reference, re-checked against the slot. nullptr on a miss.
  Page* find_get_page(uint64_t index) const;
  // add_to_page_cache_locked: the caller holds the page locked and unseen; takes a page reference for the cache,
  // sets mapping/index, inserts under the tree lock and counts nrpages. 0 or -EEXIST (the reference and mapping
  // are undone). `preload` as RadixTree::insert. Counts one tree-lock acquisition into *tree_lock_count.
  int add_to_page_cache_locked(Page* page, uint64_t index, RadixTreePreload* preload, uint64_t* tree_lock_count);
  // __remove_from_page_cache under the tree lock (truncate): clears mapping, nrpages--. The cache's reference is
  // the caller's to drop.
  void remove_from_page_cache(Page* page);

  unsigned long nrpages() const {
    vcost::touch(&nrpages_, false);
    return nrpages_.load(std::memory_order_relaxed);
  }
  Lock tree_lock;  // mapping->tree_lock (2.6.35) / mapping->i_pages xa_lock
  RadixTree page_tree;

 private:
  std::atomic<unsigned long> nrpages_{0};  // written under tree_lock, read racily (shmem_recalc_inode)
};

// ---- LRU (mm/swap.c, mm/vmscan.c) -------------------------------------------------------------------------------
enum lru_list : int {
  LRU_INACTIVE_ANON,
  LRU_ACTIVE_ANON,
  LRU_INACTIVE_FILE,
  LRU_ACTIVE_FILE,
  LRU_UNEVICTABLE,
  NR_LRU_LISTS
};
inline constexpr unsigned PAGEVEC_SIZE = 14;      // 2.6.35 include/linux/pagevec.h
inline constexpr unsigned FOLIO_BATCH_SIZE = 31;  // a recent kernel's PAGEVEC_SIZE (struct folio_batch)

// The LRU lists and lru_lock of every node (2.6.35: zone->lru_lock, one zone per node here; today the lruvec of a
// node without memcg).
class LruCache {
 public:
  LruCache(MemorySystem& ms, LockDomain& locks);
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  struct alignas(64) Lruvec {
    explicit Lruvec(LockDomain& locks) : lru_lock(locks, "lru_lock") {}
    Lock lru_lock;
    PageList lists[NR_LRU_LISTS];
    uint64_t nr[NR_LRU_LISTS] = {};
  };
  Lruvec& lruvec(int nid) { return *lruvecs_[size_t(nid)]; }
  const Lruvec& lruvec(int nid) const { return *lruvecs_[size_t(nid)]; }
  MemorySystem& ms() { return ms_; }
  // del_page_from_lru_list + ClearPageLRU under the page's lru_lock (truncate, when the page is freed).
  void del_page_from_lru(Page* page);
  uint64_t nr_pages(int lru) const;  // over all nodes

 private:
  MemorySystem& ms_;
  std::vector<std::unique_ptr<Lruvec>> lruvecs_;
};

// struct pagevec (2.6.35) / the per-CPU folio_batch of lru_add (today): pages waiting to go on an LRU list.
struct Pagevec {
  explicit Pagevec(unsigned size_, lru_list lru_) : size(size_), lru(lru_) {}
  const unsigned size;  // PAGEVEC_SIZE or FOLIO_BATCH_SIZE
  const lru_list lru;
  unsigned nr = 0;
  Page* pages[FOLIO_BATCH_SIZE] = {};
  uint64_t lru_lock_taken = 0;  // lru_lock acquisitions made by drains of this pagevec
};

// __lru_cache_add: takes a reference for the pagevec and queues the page; a full pagevec goes to the LRU at once.
void lru_cache_add(LruCache& lru, Pagevec& pvec, Page* page, int cpu);
// ____pagevec_lru_add (lru_add_drain of one pagevec): SetPageLRU and list add under each page's node lru_lock
// (taken once per run of pages from one node), then release_pages() drops the pagevec's references.
void pagevec_lru_add(LruCache& lru, Pagevec& pvec, int cpu);

}  // namespace alloclab::mm
