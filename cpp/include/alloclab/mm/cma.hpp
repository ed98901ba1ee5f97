// CMA: contiguous memory areas — struct cma with its bitmap, cma_alloc / cma_release, and the lock around
// alloc_contig_range that the seed patch made per area.
//
// Models: mm/cma.c and mm/cma.h of the tree Ge Yang's "mm/cma: using per-CMA locks to improve concurrent
// allocation performance" patched (mm-unstable on v6.14-rc, 2025-02; both released in v6.15), for single-range areas:
// its cma_range_alloc() on an area's one struct cma_memrange is v6.13's cma_alloc() loop. The patch is a switch:
//   * CmaAreas is one MemorySystem's cma_areas[] + cma_area_count + the file-global
//     `static DEFINE_MUTEX(cma_mutex)` (lock class "cma_mutex"). Its areas are declared right after the
//     MemorySystem is built, before anything is allocated: cma_declare_contiguous_nid places each at the top of its
//     node (memblock allocates top-down), and cma_activate_area -> init_cma_reserved_pageblock makes every
//     pageblock MIGRATE_CMA and moves its free pages to the CMA free lists (NR_FREE_CMA_PAGES). From then on
//     movable allocations land in the areas (the ALLOC_CMA fallback of __rmqueue), which is what makes
//     alloc_contig_range migrate.
//   * struct cma: base_pfn, count, available_count, order_per_bit (pages per bitmap bit = 2^order_per_bit; the
//     seed's hugetlb_cma areas use HUGETLB_PAGE_ORDER = 9, one bit per 2 MiB), the bitmap, `cma->lock` (lock
//     class "cma->lock", a spinlock since ~v5.13) and `cma->alloc_mutex` (lock class "cma->alloc_mutex", the
//     patch).
//   * cma_alloc(count, align): under cma->lock, stop if count > available_count, find a zero area with
//     bitmap_find_next_zero_area_off (alignment mask/offset of cma_bitmap_aligned_mask/offset), set its bits and
//     take count from available_count; unlock; then alloc_contig_range(pfn, pfn + count, MIGRATE_CMA) under
//     cma_mutex (AllocMutex::global, before the patch) or cma->alloc_mutex (AllocMutex::per_area, after). On
//     failure cma_clear_bitmap (cma->lock again) restores the bits; -EBUSY retries from bitmap_no + mask + 1, any
//     other error gives up.
//   * cma_release(pages, count): free_contig_range + cma_clear_bitmap.
// Lock acquisitions of one cma_alloc in an area nobody else allocates from, with P = cma_alloc_positions() and E
// attempts that failed with -EBUSY (S = 1 if it returned pages, else 0):
//     attempts A = min(1 + E, P): alloc mutex (cma_mutex or this area's cma->alloc_mutex) = A,
//     cma->lock = A claims + (A - S) roll-backs + 1 if the search ran out of positions (S = 0 and E = P),
//   plus, per attempt, those of alloc_contig_range (page_alloc_contig.hpp). cma_release: cma->lock once.
// `align` is in pages and must be a power of two (the kernel passes its log2, an order).
// Virtual time: each bitmap word find_next_bit scans and bitmap_set/clear write is a bitmap_word on its line.
// Leaves out: debugfs/sysfs accounting, page_kasan_tag_reset, the frozen-page API (pages come back with one
// reference each, as in v6.13), multi-range areas, fixed bases and limits, CMA heaps / dma-buf users.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "alloclab/base/enum_names.hpp"
#include "alloclab/base/line_aligned.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/memory_system.hpp"
#include "alloclab/mm/page_alloc_contig.hpp"

namespace alloclab::mm {

enum class AllocMutex : uint8_t { global, per_area };
inline constexpr EnumNames<AllocMutex, 2> kAllocMutexNames{
    {{{AllocMutex::global, "global"}, {AllocMutex::per_area, "per_area"}}}};
inline std::string_view to_string(AllocMutex m) { return kAllocMutexNames(m); }

// One area to declare: `pages` pages on node `nid` (a multiple of pageblock_nr_pages and of 2^order_per_bit).
struct CmaAreaSpec {
  int nid;
  uint64_t pages;
};

// What one or more cma_alloc calls did (one worker's, typically).
#define ALLOCLAB_CMA_ALLOC_STATS(X)                                              \
  X(calls, sum, "cma_alloc calls")                                               \
  X(attempts, sum, "alloc_contig_range calls = alloc mutex acquisitions")        \
  X(busy_retries, sum, "attempts that failed with -EBUSY (the search moved on)") \
  X(failures, sum, "cma_alloc calls that returned nullptr")                      \
  X(mutex_wait_ticks, sum, "clock ticks waiting for the alloc mutex")            \
  X(mutex_hold_ticks, sum, "clock ticks holding it (alloc_contig_range)")
struct CmaAllocStats {
  ALLOCLAB_COUNTERS(CmaAllocStats, ALLOCLAB_CMA_ALLOC_STATS)
  int last_error = 0;  // what the last failed cma_alloc ended with: -EBUSY, -ENOMEM, -EINTR
  ContigStats contig;  // alloc_contig_range, all attempts
  void add_extra(const CmaAllocStats& o) {
    if (o.last_error) last_error = o.last_error;
    contig += o.contig;
  }
};

class CmaAreas;

class alignas(64) Cma {
 public:
  // `global`: the CmaAreas' cma_mutex (AllocMutex::global), or nullptr for this area's own alloc_mutex.
  Cma(LockDomain& locks, std::string name, int nid, uint64_t base_pfn, uint64_t count, unsigned order_per_bit,
      Lock* global);
  Cma(const Cma&) = delete;
  Cma& operator=(const Cma&) = delete;

  const std::string name;
  const int nid;
  const uint64_t base_pfn;
  const uint64_t count;  // pages
  const unsigned order_per_bit;

  Lock lock;         // cma->lock: bitmap and available_count
  Lock alloc_mutex;  // cma->alloc_mutex (used with AllocMutex::per_area)
  // The lock cma_alloc holds around alloc_contig_range: the global cma_mutex or alloc_mutex above.
  Lock& alloc_lock() const { return *alloc_lock_; }

  bool contains(uint64_t pfn) const { return pfn >= base_pfn && pfn < base_pfn + count; }
  uint64_t bitmap_maxno() const { return count >> order_per_bit; }  // cma_bitmap_maxno
  // Read when no other thread uses the area (or under lock).
  uint64_t available_count() const { return available_count_; }
  uint64_t bits_set() const;
  bool test_bit(uint64_t bit) const { return (bitmap_[bit / 64] >> (bit % 64)) & 1; }

 private:
  friend Page* cma_alloc(Cma&, MigrateContext&, int, uint64_t, uint64_t, CmaAllocStats*, const std::function<bool()>&);
  friend void cma_clear_bitmap(Cma&, uint64_t, uint64_t);
  Lock* alloc_lock_;
  uint64_t available_count_;      // protected by lock
  line_vector<uint64_t> bitmap_;  // protected by lock
};

class CmaAreas {
 public:
  // Declares and activates `areas` on `ms`, which must not have allocated anything in them yet (call it right after
  // building the MemorySystem). Throws std::invalid_argument naming `cma_areas` for a bad node, a size that is not a
  // multiple of the pageblock (and of 2^order_per_bit), areas that do not fit their node, or pages already in use.
  CmaAreas(MemorySystem& ms, LockDomain& locks, const std::vector<CmaAreaSpec>& areas, AllocMutex mode,
           unsigned order_per_bit = pageblock_order);
  CmaAreas(const CmaAreas&) = delete;
  CmaAreas& operator=(const CmaAreas&) = delete;

  // The default: one area of `pages` on every node that has memory.
  static std::vector<CmaAreaSpec> one_per_node(const MemorySystem& ms, uint64_t pages);

  int size() const { return int(areas_.size()); }
  Cma& operator[](int i) const { return *areas_.at(size_t(i)); }
  Cma* find(uint64_t pfn) const;  // the area holding pfn, or nullptr
  AllocMutex mode() const { return mode_; }
  MemorySystem& memory() const { return ms_; }

  Lock cma_mutex;  // the global one (lock class "cma_mutex")

  // Introspection (no other thread running): every problem found; empty when consistent. `idle` additionally
  // requires every area to be wholly free (bitmap clear, available_count == count).
  std::vector<std::string> check(bool idle = false) const;

 private:
  MemorySystem& ms_;
  AllocMutex mode_;
  std::vector<std::unique_ptr<Cma>> areas_;
};

// cma_alloc(cma, count, align, no_warn=false) on model CPU `cpu`: `count` contiguous pages of the area, or nullptr
// (stats->last_error says why). Throws std::invalid_argument for count == 0, count > the area, or an align that is
// not a power of two.
Page* cma_alloc(Cma& cma, MigrateContext& mc, int cpu, uint64_t count, uint64_t align = 1,
                CmaAllocStats* stats = nullptr, const std::function<bool()>& fatal_signal_pending = {});
// cma_release: gives back `count` pages from `pages` (which cma_alloc returned) on model CPU `cpu`. False, with
// nothing done, when they are not inside the area.
bool cma_release(Cma& cma, MemorySystem& ms, int cpu, const Page* pages, uint64_t count);
// cma_clear_bitmap: the bits of [pfn, pfn + count) cleared and count given back to available_count, under
// cma->lock.
void cma_clear_bitmap(Cma& cma, uint64_t pfn, uint64_t count);

// The bitmap positions cma_alloc(count, align) can try in `cma` when nothing else is allocated in it (its bitmap is
// clear at every search): the first aligned position (cma_bitmap_aligned_offset / _mask) where the count's bits fit,
// then one every mask + 1 bits, as each -EBUSY moves the search on (start = bitmap_no + mask + 1), while the bits
// still fit below cma_bitmap_maxno. 0 when none fits. Throws std::invalid_argument as cma_alloc does.
uint64_t cma_alloc_positions(const Cma& cma, uint64_t count, uint64_t align);

// bitmap_find_next_zero_area_off (lib/bitmap.c) on a bitmap of `size` bits.
uint64_t bitmap_find_next_zero_area_off(std::span<const uint64_t> map, uint64_t size, uint64_t start, uint64_t nr,
                                        uint64_t align_mask, uint64_t align_offset);

}  // namespace alloclab::mm
