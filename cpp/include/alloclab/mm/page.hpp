// Page: the 64-byte page descriptor (struct page), its flags, and the intrusive lists that thread free pages.
//
// Models: include/linux/mm_types.h, page-flags.h and page_ref.h of v6.2 (x86-64, CONFIG_MEMCG, no
// CONFIG_DEBUG_VM). One Page per 4 KiB frame, one cache line each, in an array per node (the node's mem_map, in
// node-local memory). The fields the allocator reads and writes are the kernel's:
//   flags       PG_* bits below, plus the node and zone of the frame in the top bits (page_to_nid, page_zonenum);
//   lru         buddy_list / pcp_list / lru links. The kernel keeps two pointers (16 bytes); the model keeps two
//               32-bit indices into the zone's mem_map (8 bytes), as design.md asks. Tail pages of a compound page
//               overlay it with compound_head = (head pfn << 1) | 1, the kernel's "pointer | 1";
//   mapping, index, private  (private = buddy order while PageBuddy; index = pcp migratetype while on a pcp list,
//               as set_pcppage_migratetype does);
//   _mapcount / page_type (a union, as in the kernel: -1 = unmapped, PageBuddy is a page type), _refcount,
//   memcg_data (must be 0 in a free page; nothing sets it yet).
// The 8 bytes the shorter links free up hold buddy_list_mt: which free_list a PageBuddy page is on. The kernel's
// circular list_del needs no list head; ours does (see PageList), so a buddy page remembers its list. It is not a
// kernel field and no kernel check reads it.
// In a virtual-clock run the list functions and reference counts below charge what they do (cost_model.hpp): a list
// operation touches the list head and every struct page whose links it writes; a reference count is an atomic RMW
// on the page's line; memmap_access() is the memory side of any other pass over struct pages.
// Leaves out: the folio overlays beyond compound_head and the order byte of the first tail (folio->_flags_1),
// page_pool, zone_device, slab fields (the slab allocator is not modelled), last_cpupid, page_owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "alloclab/topology/cost_model.hpp"

namespace alloclab::mm {

inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr size_t PAGE_SIZE = size_t(1) << PAGE_SHIFT;

// enum pageflags (v6.2 order; bit numbers are the kernel's on x86-64 with CONFIG_MEMORY_FAILURE).
enum pageflags : unsigned {
  PG_locked,
  PG_referenced,
  PG_uptodate,
  PG_dirty,
  PG_lru,
  PG_active,
  PG_workingset,
  PG_waiters,
  PG_error,
  PG_slab,
  PG_owner_priv_1,
  PG_arch_1,
  PG_reserved,
  PG_private,
  PG_private_2,
  PG_writeback,
  PG_head,
  PG_mappedtodisk,
  PG_reclaim,
  PG_swapbacked,
  PG_unevictable,
  PG_mlocked,
  PG_hwpoison,
  NR_PAGEFLAGS
};

// What page_expected_state() requires to be clear in a page being allocated or freed.
inline constexpr uint64_t __PG_HWPOISON = uint64_t(1) << PG_hwpoison;
inline constexpr uint64_t PAGEFLAGS_MASK = (uint64_t(1) << NR_PAGEFLAGS) - 1;
inline constexpr uint64_t PAGE_FLAGS_CHECK_AT_PREP = PAGEFLAGS_MASK & ~__PG_HWPOISON;
inline constexpr uint64_t PAGE_FLAGS_CHECK_AT_FREE =
    (uint64_t(1) << PG_lru) | (uint64_t(1) << PG_locked) | (uint64_t(1) << PG_private) | (uint64_t(1) << PG_private_2) |
    (uint64_t(1) << PG_writeback) | (uint64_t(1) << PG_reserved) | (uint64_t(1) << PG_slab) |
    (uint64_t(1) << PG_active) | (uint64_t(1) << PG_unevictable) | (uint64_t(1) << PG_mlocked);

// Node and zone of the frame, in the top bits of flags (NODES_PGSHIFT, ZONES_PGSHIFT).
inline constexpr unsigned ZONES_WIDTH = 2, NODES_WIDTH = 10;
inline constexpr unsigned ZONES_PGSHIFT = 64 - ZONES_WIDTH;
inline constexpr unsigned NODES_PGSHIFT = ZONES_PGSHIFT - NODES_WIDTH;
inline constexpr int MAX_NUMNODES = 1 << NODES_WIDTH;

// page_type values (v6.2): the type lives in _mapcount; a typed page has the base bits set and its type bit clear.
inline constexpr uint32_t PAGE_TYPE_BASE = 0xf0000000u;
inline constexpr uint32_t PG_buddy = 0x00000080u;

// Index of a page in its zone's mem_map; kNoPage ends a list and poisons the links of a page taken off one. It is
// even so that a page off every list never looks like a tail page (compound_head bit 0 overlays lru.next bit 0, as
// the kernel's aligned pointers guarantee for it); a zone therefore holds at most kNoPage - 1 pages.
inline constexpr uint32_t kNoPage = 0xfffffffeu;

struct alignas(64) Page {
  uint64_t flags;
  union {
    struct {
      uint32_t next, prev;
    } lru;                   // buddy_list, pcp_list, lru
    uint64_t compound_head;  // tail pages: (head pfn << 1) | 1
  };
  uint64_t mapping;   // struct address_space * (opaque); PAGE_MAPPING_MOVABLE in bit 1 as in the kernel
  uint64_t index;     // pgoff; the migratetype while on a pcp list
  uint64_t private_;  // buddy order while PageBuddy (the kernel's `private`)
  union {
    int32_t _mapcount;   // -1: not mapped
    uint32_t page_type;  // PageBuddy etc.
  };
  int32_t _refcount;
  uint64_t memcg_data;
  uint32_t buddy_list_mt;  // model only: the free_list this PageBuddy page is on (see the header comment)
  uint32_t _pad;
};
static_assert(sizeof(Page) == 64, "struct page is one cache line");
static_assert(PAGE_SIZE == kPageBytes, "the cost model's page ops work on mm's pages");

inline constexpr uint64_t PAGE_MAPPING_ANON = 0x1, PAGE_MAPPING_MOVABLE = 0x2, PAGE_MAPPING_FLAGS = 0x3;

// ---- flags ------------------------------------------------------------------------------------------------------
inline bool test_bit(const Page& p, unsigned bit) { return (p.flags >> bit) & 1; }
inline void __set_bit(Page& p, unsigned bit) { p.flags |= uint64_t(1) << bit; }
inline void __clear_bit(Page& p, unsigned bit) { p.flags &= ~(uint64_t(1) << bit); }
inline bool PageHead(const Page& p) { return test_bit(p, PG_head); }
inline bool PageTail(const Page& p) { return p.compound_head & 1; }
inline bool PageCompound(const Page& p) { return PageHead(p) || PageTail(p); }
inline bool PageLRU(const Page& p) { return test_bit(p, PG_lru); }
inline bool PageReserved(const Page& p) { return test_bit(p, PG_reserved); }
inline bool PageHWPoison(const Page& p) { return test_bit(p, PG_hwpoison); }
inline bool __PageMovable(const Page& p) { return (p.mapping & PAGE_MAPPING_FLAGS) == PAGE_MAPPING_MOVABLE; }
inline bool PageMappingFlags(const Page& p) { return (p.mapping & PAGE_MAPPING_FLAGS) != 0; }

inline int page_to_nid(const Page& p) { return int((p.flags >> NODES_PGSHIFT) & ((1u << NODES_WIDTH) - 1)); }
inline int page_zonenum(const Page& p) { return int(p.flags >> ZONES_PGSHIFT); }
inline uint64_t page_links(int nid, int zone) {
  return (uint64_t(nid) << NODES_PGSHIFT) | (uint64_t(zone) << ZONES_PGSHIFT);
}

// ---- page types -------------------------------------------------------------------------------------------------
inline bool PageBuddy(const Page& p) { return (p.page_type & (PAGE_TYPE_BASE | PG_buddy)) == PAGE_TYPE_BASE; }
inline void __SetPageBuddy(Page& p) { p.page_type &= ~PG_buddy; }
inline void __ClearPageBuddy(Page& p) { p.page_type |= PG_buddy; }
inline unsigned buddy_order(const Page& p) { return unsigned(p.private_); }
// page_is_buddy() as find_buddy_page_pfn() and move_freepages() use it: on a page that may be allocated (and
// written by its owner) while zone->lock is held, like the kernel's racy reads; relaxed atomic loads here.
inline bool PageBuddy_racy(const Page& p) {
  const uint32_t t = std::atomic_ref<const uint32_t>(p.page_type).load(std::memory_order_relaxed);
  return (t & (PAGE_TYPE_BASE | PG_buddy)) == PAGE_TYPE_BASE;
}
inline uint64_t flags_racy(const Page& p) {
  return std::atomic_ref<const uint64_t>(p.flags).load(std::memory_order_relaxed);
}
inline int page_to_nid_racy(const Page& p) { return int((flags_racy(p) >> NODES_PGSHIFT) & ((1u << NODES_WIDTH) - 1)); }
inline uint64_t mapping_racy(const Page& p) {
  return std::atomic_ref<const uint64_t>(p.mapping).load(std::memory_order_relaxed);
}
inline void set_buddy_order(Page& p, unsigned order) {
  p.private_ = order;
  __SetPageBuddy(p);
}

// ---- reference counts (page_ref.h): atomic, as the kernel's atomic_t ---------------------------------------------
inline int page_ref_count(const Page& p) {
  vcost::touch(&p, false);
  return std::atomic_ref<const int32_t>(p._refcount).load(std::memory_order_relaxed);
}
inline void set_page_count(Page& p, int v) {
  std::atomic_ref<int32_t>(p._refcount).store(v, std::memory_order_relaxed);
}
inline void set_page_refcounted(Page& p) { set_page_count(p, 1); }
inline void get_page(Page& p) {
  vcost::rmw(&p);
  std::atomic_ref<int32_t>(p._refcount).fetch_add(1, std::memory_order_relaxed);
}
// True when this drop was the last reference (put_page_testzero).
inline bool put_page_testzero(Page& p) {
  vcost::rmw(&p);
  return std::atomic_ref<int32_t>(p._refcount).fetch_sub(1, std::memory_order_acq_rel) == 1;
}
inline int page_mapcount(const Page& p) { return p._mapcount + 1; }

// page_expected_state(page, check_flags) of mm/page_alloc.c: one read of each field the kernel reads.
inline bool page_expected_state(const Page& p, uint64_t check_flags) {
  if (p._mapcount != -1) return false;
  return (p.mapping | uint64_t(uint32_t(p._refcount)) | p.memcg_data | (p.flags & check_flags)) == 0;
}

// ---- the cost of struct page accesses in a virtual-clock run ----------------------------------------------------
// The memory side of a pass `s` over the n struct pages from `first`, each a line_access: Stream::load reads them,
// Stream::update reads then writes each (checks, read-modify-writes), Stream::store writes them without reading
// (initialisation). One page is a tracked line (its coherence state decides the cost; any pattern but load writes
// it); a longer run of the memmap streams from its node's memory at the bandwidth the node can give the pattern (the
// prefetchers turn a memmap walk into a stream): 64 bytes per page loaded, 128 per page written (read, or read for
// ownership, then written back); the line accesses overlap the stream (CostModel::pass: the slower of the two).
inline void memmap_access(const Page* first, uint64_t n, Stream s) {
  CostModel* m = vcost::active();
  if (!m || n == 0) [[likely]]
    return;
  const bool write = s != Stream::load;
  if (n == 1) return m->touch(first, write);
  m->pass(n, n * sizeof(Page) * (write ? 2 : 1), page_to_nid_racy(*first), s);
}

// ---- lists ------------------------------------------------------------------------------------------------------
// A list of pages of one zone, linked through Page::lru by mem_map index. `first` is atomic (relaxed) only because
// the watermark check reads free-list emptiness without zone->lock, as the kernel does; every write happens under
// the lock that owns the list (zone->lock for free_area, pcp->lock for pcp lists).
struct PageList {
  std::atomic<uint32_t> first{kNoPage};
  uint32_t last = kNoPage;

  bool empty() const { return first.load(std::memory_order_relaxed) == kNoPage; }
  uint32_t head() const { return first.load(std::memory_order_relaxed); }
};

// The cost of one list operation in a virtual-clock run: a list_op on the head's line that writes the links of `p`
// and of its neighbours (nullptr: none).
inline void list_op_cost(const PageList& l, const Page* p, const Page* prev, const Page* next) {
  if (CostModel* m = vcost::active()) [[unlikely]] {
    m->charge(Op::list_op, 1);
    m->touch(&l, true);
    m->touch(p, true);
    if (prev) m->touch(prev, true);
    if (next) m->touch(next, true);
  }
}

inline void list_add(PageList& l, Page* base, uint32_t i) {
  Page& p = base[i];
  const uint32_t f = l.head();
  list_op_cost(l, &p, nullptr, f == kNoPage ? nullptr : &base[f]);
  p.lru.prev = kNoPage;
  p.lru.next = f;
  if (f == kNoPage)
    l.last = i;
  else
    base[f].lru.prev = i;
  l.first.store(i, std::memory_order_relaxed);
}

inline void list_add_tail(PageList& l, Page* base, uint32_t i) {
  Page& p = base[i];
  list_op_cost(l, &p, l.last == kNoPage ? nullptr : &base[l.last], nullptr);
  p.lru.next = kNoPage;
  p.lru.prev = l.last;
  if (l.last == kNoPage)
    l.first.store(i, std::memory_order_relaxed);
  else
    base[l.last].lru.next = i;
  l.last = i;
}

inline void list_del(PageList& l, Page* base, uint32_t i) {
  Page& p = base[i];
  list_op_cost(l, &p, p.lru.prev == kNoPage ? nullptr : &base[p.lru.prev],
               p.lru.next == kNoPage ? nullptr : &base[p.lru.next]);
  if (p.lru.prev == kNoPage)
    l.first.store(p.lru.next, std::memory_order_relaxed);
  else
    base[p.lru.prev].lru.next = p.lru.next;
  if (p.lru.next == kNoPage)
    l.last = p.lru.prev;
  else
    base[p.lru.next].lru.prev = p.lru.prev;
  p.lru.next = p.lru.prev = kNoPage;
}

}  // namespace alloclab::mm
