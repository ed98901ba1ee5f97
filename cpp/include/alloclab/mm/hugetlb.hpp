// hugetlb: the hstate pool and its boot-time allocation (hugetlb_pages_alloc_boot, gather_bootmem_prealloc).
//
// Models: mm/hugetlb.c of v6.9, i.e. Gang Li's series "hugetlb: parallelize hugetlb page init on boot" (v6,
// 2024-02) as merged, with switches for what came before it:
//   * struct hstate: order, max_huge_pages, next_nid_to_alloc, nr_huge_pages(_node), free_huge_pages(_node),
//     hugepage_freelists[nid] (folios linked through the head's lru, as mem_map indices of the node's zone).
//     Everything but next_nid_to_alloc is protected by hugetlb_lock, one Lock of class "hugetlb_lock" per Hugetlb.
//   * 2 MiB (order 9) path, run per padata chunk: hugetlb_pages_alloc_boot_node(start, end) loops
//     alloc_pool_huge_folio() with a worker-local node cursor starting at first_online_node (patch 3), or with the
//     shared h->next_nid_to_alloc (before it; a racy read-modify-write, as the kernel's plain int);
//     alloc_pool_huge_folio() walks for_each_node_mask_to_alloc over node_states[N_MEMORY] and calls
//     alloc_buddy_hugetlb_folio(): MemorySystem::alloc_pages(cpu, nid, 9, htlb_alloc_mask | __GFP_THISNODE |
//     __GFP_COMP | __GFP_NOWARN | __GFP_RETRY_MAYFAIL unless the node is in node_alloc_noretry), whose
//     prep_new_page() runs prep_compound_page() (PG_head, 511 tail descriptors written with compound_head and
//     TAIL_MAPPING, the order in the first tail); then page_ref_freeze(head, 1) and init_new_hugetlb_folio()
//     (the v6.9 PG_hugetlb page type). prep_and_add_allocated_folios() runs HVO if enabled, then accounts and
//     enqueues every folio of the list under hugetlb_lock taken once (HugetlbLockMode::per_worker, v5/v6 as
//     merged; "per worker" because hugetlb's min_chunk gives one chunk per worker) or once per folio (per_folio,
//     the v4 posting).
//   * Gigantic path (patch 8), 1 GiB folios: order 18, PUD_ORDER on x86-64. The folios come serially from memblock
//     before the page allocator exists (hugetlb_gigantic_pages_alloc_boot -> alloc_bootmem_huge_page ->
//     __alloc_bootmem_huge_page: memblock_alloc_try_nid_raw(1 GiB, align 1 GiB, nid), round-robin on
//     h->next_nid_to_alloc, onto per-node huge_boot_pages[nid] lists). The model's memblock stand-in runs before any
//     worker (untimed, uncounted): it takes from the node's buddy lists the MAX_PAGE_ORDER blocks of one
//     1 GiB-aligned range, 256 of them (memblock_alloc_huge_range; raw, no __GFP_COMP, as memblock gives raw
//     memory), falling back to any node as memblock does. gather_bootmem_prealloc_node(nid) then initialises each
//     folio's struct pages itself: hugetlb_folio_init_vmemmap (head + HUGETLB_VMEMMAP_RESERVE_PAGES = 64 struct
//     pages), init_new_hugetlb_folio, and prep_and_add_bootmem_folios(): without HVO all 262,080 remaining tails
//     are initialised (__init_single_page + prep_compound_tail + page_ref_freeze: 262,143 tail struct pages per
//     folio, the work prep_compound_gigantic_folio does for a runtime gigantic folio), then hugetlb_lock per folio
//     (per_folio, patch 8: "Subdivide locks") or once for the list with the tail initialisation inside it
//     (per_worker, v6.7). The mem_map is the kernel's, full size: 64-byte struct pages, 16 MiB of host memory per
//     1 GiB folio (1/64 of the model memory), nothing sparse or scaled; the scenario sizes each node in whole GiB so
//     that every node starts 1 GiB-aligned. No alloc_contig_range is used (the runtime path, not modelled).
//   * Freeing (teardown, not timed): update_and_free_hugetlb_folio(): clear PG_hugetlb and the HPG flags, unfreeze
//     the refcount and __free_pages() (2 MiB) or destroy_compound_gigantic_folio() + free as its 256 order-10
//     blocks (the kernel's free_contig_range frees it page by page; the end state is the same).
//   * HVO (hugetlb_vmemmap_optimize_folios) is optional and modelled as a calibrated cost per folio (hvo_ns) that
//     sets HPG_vmemmap_optimized; for gigantic folios it also skips the tails past the first 64, as the kernel.
// Only the calling thread's CPU matters to the page allocator (its pcp lists): every entry point takes the
// model CPU it runs as (the kernel's smp_processor_id()).
// Virtual time: the node cursor, the hstate counters and the free lists are tracked lines; a folio's head is an
// atomic freeze on its struct page; a run of tails initialised by hugetlb_folio_init_tail_vmemmap costs page_init
// and atomic_rmw per tail and streams the tails' struct pages (bulk).
// Leaves out: surplus/overcommit pages, reservations, subpools and cgroups (hugetlb_set_folio_subpool /
// set_hugetlb_cgroup write nothing), hugetlb_cma, demotion, runtime resizing (set_max_huge_pages), the vmemmap
// pages HVO frees back to the buddy allocator and its batched TLB flush, adjust_managed_page_count, the
// HTLB_BUDDY_PGALLOC vm events, node_alloc_noretry's effect on reclaim (no reclaim is modelled: only the
// bookkeeping is kept), and the 2025 retry-while-progress loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "alloclab/base/counters.hpp"
#include "alloclab/base/enum_names.hpp"
#include "alloclab/base/line_aligned.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/memory_system.hpp"

namespace alloclab::mm {

inline constexpr unsigned HUGETLB_PAGE_ORDER = pageblock_order;  // HPAGE_PMD_ORDER: 2 MiB on x86-64
inline constexpr unsigned HUGETLB_GIGANTIC_ORDER = 18;           // PUD_ORDER on x86-64: 1 GiB
inline constexpr unsigned long HUGETLB_VMEMMAP_RESERVE_PAGES = PAGE_SIZE / sizeof(Page);  // 64 struct pages
inline constexpr uint64_t TAIL_MAPPING = 0x400;      // the kernel's poison in tail pages' ->mapping
inline constexpr uint32_t PG_hugetlb = 0x00000800u;  // v6.9 page type (set = bit clear, as PG_buddy)

// enum hugetlb_page_flags: kept in the head page's private (folio->private), as the kernel.
enum hugetlb_page_flags : unsigned {
  HPG_restore_reserve,
  HPG_migratable,
  HPG_temporary,
  HPG_freed,
  HPG_vmemmap_optimized,
  HPG_raw_hwp_unreliable,
  __NR_HPAGEFLAGS
};

inline bool folio_test_hugetlb(const Page& head) {
  return (head.page_type & (PAGE_TYPE_BASE | PG_hugetlb)) == PAGE_TYPE_BASE;
}
// The owner writes page_type with a relaxed atomic store: the buddy allocator reads it racily on pages it does not
// own (find_buddy_page_pfn probing the other half of an order-10 block), as the kernel does.
inline void __folio_set_hugetlb(Page& head) {
  std::atomic_ref<uint32_t>(head.page_type).store(head.page_type & ~PG_hugetlb, std::memory_order_relaxed);
}
inline void __folio_clear_hugetlb(Page& head) {
  std::atomic_ref<uint32_t>(head.page_type).store(head.page_type | PG_hugetlb, std::memory_order_relaxed);
}
inline bool folio_test_hpg(const Page& head, hugetlb_page_flags f) { return (head.private_ >> f) & 1; }
inline void folio_set_hpg(Page& head, hugetlb_page_flags f) { head.private_ |= uint64_t(1) << f; }
inline void folio_clear_hpg(Page& head, hugetlb_page_flags f) { head.private_ &= ~(uint64_t(1) << f); }
// folio_order(): the order prep_compound_page stored in the first tail (the mm model keeps it in page[1].index).
inline unsigned folio_order(const Page* head) { return PageHead(*head) ? unsigned(head[1].index) : 0; }
// The value a tail's compound_head holds: the head's pfn, tagged with bit 0.
inline uint64_t compound_head_value(uint64_t head_pfn) { return (head_pfn << 1) | 1; }

using nodemask_t = std::vector<bool>;  // one bit per model node

// How prep_and_add_*_folios take hugetlb_lock.
enum class HugetlbLockMode : uint8_t {
  per_worker,  // once per list, i.e. per thread_fn call (2 MiB: v5/v6 as merged; gigantic: v6.7, before patch 8)
  per_folio,   // once per folio (2 MiB: the v4 posting; gigantic: patch 8 as merged)
};
// Which node cursor alloc_pool_huge_folio advances.
enum class NextNid : uint8_t {
  local,   // hugetlb_pages_alloc_boot_node's own next_node, from first_online_node (patch 3)
  shared,  // h->next_nid_to_alloc, shared by every thread (before patch 3; a racy update)
};
inline constexpr EnumNames<HugetlbLockMode, 2> kHugetlbLockModeNames{
    {{{HugetlbLockMode::per_worker, "per_worker"}, {HugetlbLockMode::per_folio, "per_folio"}}}};
inline constexpr EnumNames<NextNid, 2> kNextNidNames{{{{NextNid::local, "local"}, {NextNid::shared, "shared"}}}};
inline std::string_view to_string(HugetlbLockMode m) { return kHugetlbLockModeNames(m); }
inline std::string_view to_string(NextNid n) { return kNextNidNames(n); }

struct hstate {
  hstate(unsigned order, bool gigantic, int nr_nodes);
  const unsigned order;
  const bool gigantic;  // takes the boot-time gigantic path (memblock + gather_bootmem_prealloc)
  unsigned long max_huge_pages = 0;
  std::atomic<int> next_nid_to_alloc{0};  // read and written without a lock (relaxed load + store)
  // ---- hugetlb_lock held ----
  unsigned long nr_huge_pages = 0, free_huge_pages = 0;
  line_vector<unsigned long> nr_huge_pages_node, free_huge_pages_node;
  line_vector<PageList> hugepage_freelists;  // per node
  unsigned long pages_per_huge_page() const { return 1ul << order; }
};

struct HugetlbConfig {
  HugetlbLockMode lock_mode = HugetlbLockMode::per_worker;
  NextNid next_nid = NextNid::local;
  uint64_t hvo_ns = 0;  // 0: HVO off; else the cost of hugetlb_vmemmap_optimize_folio() per folio
};

// What one thread did (written only by that thread).
#define ALLOCLAB_HUGETLB_THREAD_STATS(X)                                                \
  X(folios, sum, "folios it allocated (2 MiB) or gathered (gigantic)")                  \
  X(alloc_failed, sum, "alloc_pool_huge_folio() calls that returned NULL")              \
  X(node_attempts, sum, "alloc_buddy_hugetlb_folio() calls")                            \
  X(tails_written, sum, "tail struct pages hugetlb itself initialised (gigantic path)") \
  X(lists_added, sum, "prep_and_add_*_folios() calls")
struct HugetlbThreadStats {
  ALLOCLAB_COUNTERS(HugetlbThreadStats, ALLOCLAB_HUGETLB_THREAD_STATS)
};

// What check_pool() found.
struct HugetlbCheck {
  bool ok = true;
  std::vector<std::string> errors;  // at most 20
  unsigned long folios = 0;         // folios on the free lists
  std::vector<unsigned long> per_node;
  uint64_t tails_checked = 0;
  std::string summary() const;
};

class Hugetlb {
 public:
  // The 2 MiB hstate and the model's gigantic hstate, for every node of `ms`.
  Hugetlb(MemorySystem& ms, LockDomain& locks, HugetlbConfig cfg);
  Hugetlb(const Hugetlb&) = delete;
  Hugetlb& operator=(const Hugetlb&) = delete;

  hstate& default_hstate() { return h2m_; }
  hstate& gigantic_hstate() { return h1g_; }
  const HugetlbConfig& config() const { return cfg_; }
  Lock& hugetlb_lock() { return hugetlb_lock_; }
  MemorySystem& memory() { return ms_; }
  // node_states[N_MEMORY]: nodes with present pages.
  const nodemask_t& n_memory() const { return n_memory_; }
  int nr_node_ids() const { return ms_.nr_nodes(); }
  int first_online_node() const { return 0; }

  // ---- 2 MiB boot path, as run by one thread on model CPU `cpu` ----
  // hugetlb_pages_alloc_boot_node(start, end, h): end - start folios, then prep_and_add_allocated_folios.
  // `stopped` (may be empty) is polled once per folio where the kernel calls cond_resched().
  void hugetlb_pages_alloc_boot_node(hstate& h, unsigned long start, unsigned long end, int cpu, HugetlbThreadStats& st,
                                     const std::function<bool()>& stopped = {});
  // alloc_pool_huge_folio(h, nodes_allowed, node_alloc_noretry, next_node): the folio, or nullptr when every
  // allowed node failed.
  Page* alloc_pool_huge_folio(hstate& h, int cpu, const nodemask_t& nodes_allowed, nodemask_t& node_alloc_noretry,
                              std::atomic<int>& next_node, HugetlbThreadStats& st);
  // alloc_buddy_hugetlb_folio() + init_new_hugetlb_folio() (only_alloc_fresh_hugetlb_folio).
  Page* only_alloc_fresh_hugetlb_folio(hstate& h, int cpu, gfp_t gfp_mask, int nid, nodemask_t& node_alloc_noretry);
  void prep_and_add_allocated_folios(hstate& h, std::vector<Page*>& folio_list, HugetlbThreadStats& st,
                                     const std::function<bool()>& stopped = {});

  // ---- gigantic boot path ----
  // hugetlb_gigantic_pages_alloc_boot(h): up to `count` folios from the memblock stand-in, serially (the kernel
  // runs it before SMP), onto huge_boot_pages[]. Returns how many it got; call it before any worker runs. Polls
  // the MemorySystem's interruption_point() once per folio.
  unsigned long hugetlb_gigantic_pages_alloc_boot(hstate& h, unsigned long count, int cpu);
  // The memblock stand-in for one folio of `h` on node `nid`: the first free range of pages_per_huge_page() frames
  // aligned to its size, taken from the buddy lists as MAX_PAGE_ORDER blocks (raw: only each block's head is
  // refcounted). The range's first page, or nullptr when the node has no such range (nothing is taken then).
  Page* memblock_alloc_huge_range(hstate& h, int nid, int cpu);
  const std::vector<Page*>& huge_boot_pages(int nid) const { return huge_boot_pages_.at(size_t(nid)); }
  // gather_bootmem_prealloc_node(nid): turns huge_boot_pages[nid] into hugetlb folios on the free lists.
  void gather_bootmem_prealloc_node(int nid, HugetlbThreadStats& st, const std::function<bool()>& stopped = {});
  void prep_and_add_bootmem_folios(hstate& h, std::vector<Page*>& folio_list, HugetlbThreadStats& st,
                                   const std::function<bool()>& stopped = {});

  // ---- teardown and checks (no worker may run; both poll the MemorySystem's interruption_point() per folio) ----
  // Frees every folio of `h`'s free lists (and ungathered boot pages) back to the page allocator; returns the
  // folios freed. Pages may remain on `cpu`'s pcp lists: drain_all_pages() returns them to the buddy lists.
  unsigned long free_pool(hstate& h, int cpu);
  // Every folio on the free lists: a hugetlb head on its node's list, refcount 0, HPG_freed, the hstate's order,
  // every initialised tail pointing at the head with TAIL_MAPPING; no folio twice; counters consistent.
  HugetlbCheck check_pool(const hstate& h) const;

 private:
  void enqueue_hugetlb_folio(hstate& h, Page* folio);     // hugetlb_lock held
  void __prep_account_new_huge_page(hstate& h, int nid);  // hugetlb_lock held
  void init_new_hugetlb_folio(hstate& h, Page* folio);
  // HVO's cost per folio ends early once `stopped` says so (the folios are still marked optimized).
  void hugetlb_vmemmap_optimize_folios(hstate& h, std::vector<Page*>& folio_list, const std::function<bool()>& stopped);
  uint64_t hugetlb_folio_init_tail_vmemmap(Page* folio, unsigned long start_page, unsigned long end_page);
  uint64_t hugetlb_folio_init_vmemmap(hstate& h, Page* folio, unsigned long nr_pages);
  void update_and_free_hugetlb_folio(hstate& h, Page* folio, int cpu);
  // Frees the memblock stand-in's range of a gigantic folio as its MAX_PAGE_ORDER blocks (each head refcounted).
  void free_huge_range(hstate& h, Page* first, int cpu);
  Page* dequeue_any(hstate& h, int nid);  // list head of hugepage_freelists[nid] (hugetlb_lock held)

  MemorySystem& ms_;
  HugetlbConfig cfg_;
  Lock hugetlb_lock_;
  nodemask_t n_memory_;
  hstate h2m_;
  hstate h1g_;
  std::vector<std::vector<Page*>> huge_boot_pages_;  // per node (the memblock stand-in's huge_bootmem_page lists)
};

}  // namespace alloclab::mm
