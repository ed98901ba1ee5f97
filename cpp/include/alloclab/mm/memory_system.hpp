// MemorySystem: the set of pglist_data of one run — nodes with their mem_map and zone, the per-CPU pagesets of
// every (zone, model CPU), and the page allocator's entry points.
//
// Models: mm/page_alloc.c of v6.2 (with the v6.7 pcp rules selectable, see pcp.hpp): __alloc_pages ->
// get_page_from_freelist (zonelist walk, zone_watermark_fast at the low watermark, rmqueue -> rmqueue_pcplist or
// rmqueue_buddy, prep_new_page), a "slow path" that only retries at the min watermark (with ALLOC_HIGH/ALLOC_HARDER
// from the gfp mask) and, for __GFP_DIRECT_RECLAIM, once more after drain_all_pages (the one part of
// __alloc_pages_direct_reclaim that does not reclaim), __free_pages -> free_the_page -> free_unref_page (pcp) or
// __free_pages_ok (buddy),
// __alloc_pages_bulk, drain_all_pages (under pcpu_drain_mutex, draining remote pcps directly as v6.0+ does), and
// the pageblock isolation of mm/page_isolation.c that alloc_contig_range builds on.
// Memory: node n holds node_pages[n] frames, pfns starting at a MAX_ORDER_NR_PAGES-aligned node_start_pfn, with its
// mem_map of 64-byte Pages, its pageblock bitmap and its Zone in node-local memory (NodeMemory); each model CPU's
// pcps live in its node's memory. At construction every frame is free (memblock_free_all: max-order blocks,
// every pageblock MIGRATE_MOVABLE) and watermarks and pcp sizes are computed as the kernel does at boot.
// Virtual time: post_alloc_hook and free_pages_prepare touch the head's struct page; prep_compound_page and the tail
// checks stream the tails; __GFP_ZERO with real backing is a bulk clear of the block on its node; the isolation
// counters are atomic RMWs.
// Thread safety is exactly the kernel's: zone->lock guards the free lists, pcp->lock a CPU's lists, and nothing
// else is shared or mutable. Any thread may call the entry points for any model CPU; two threads using the same
// model CPU at once are safe (pcp->lock) but do what the kernel never does (two tasks in one CPU's
// preempt-disabled section), so the second one's trylock fails and it uses the buddy lists.
// Leaves out: reclaim, compaction, OOM, kswapd (an allocation that fails the min watermark returns nullptr),
// mempolicies and cpusets, node distances (the zonelist is the requested node, then the others in index order),
// per-CPU vm_stat diffs, highatomic reserves, memory hotplug, page_owner, init_on_alloc/free.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/gfp.hpp"
#include "alloclab/mm/interruption_point.hpp"
#include "alloclab/mm/page.hpp"
#include "alloclab/mm/pcp.hpp"
#include "alloclab/mm/zone.hpp"
#include "alloclab/topology/topology.hpp"

namespace alloclab::mm {

// Page contents: none (descriptors only; zeroing is skipped) or real (each node also owns node_pages x 4 KiB of
// node-local memory; page_address() points into it and __GFP_ZERO clears it).
enum class Backing : uint8_t { none, real };

struct MemoryConfig {
  std::vector<uint64_t> node_pages;  // frames per model node (one entry per node; 0 = memoryless)
  BatchRule batch_rule = BatchRule::v6_2;
  CheckMode check = CheckMode::in_lock;   // v6.2 as shipped; the patch is after_unlock; v6.4+ is off; 2.6.35 is
                                          // prep_new_page
  int pcp_batch = 0;                      // 0: zone_batchsize(managed pages); else pcp->batch for every pcp
  int percpu_pagelist_high_fraction = 0;  // the sysctl; 0: high from the low watermark
  long min_free_kbytes = -1;              // -1: int_sqrt(lowmem_kbytes * 16) clamped to [128, 262144]
  int watermark_scale_factor = 10;        // the sysctl (1..3000)
  Backing backing = Backing::none;

  // `pages` on every node of the machine's model topology.
  static MemoryConfig uniform(const Machine& m, uint64_t pages);
};

// Counts per model CPU (the kernel's vm_event counters). Single writer in practice (the thread running as that
// CPU); relaxed atomics updated by load + store so that two threads sharing a model CPU lose counts, not memory safety.
struct alignas(64) CpuEvents {
  std::atomic<uint64_t> pgalloc{0};           // pages allocated
  std::atomic<uint64_t> pgfree{0};            // pages freed
  std::atomic<uint64_t> alloc_fail{0};        // allocations that returned nullptr
  std::atomic<uint64_t> pcp_trylock_fail{0};  // pcp_spin_trylock failures (alloc and free)
  // CheckMode::prep_new_page (2.6.35): struct pages check_new_page read in prep_new_page, outside zone->lock.
  std::atomic<uint64_t> pages_checked_at_prep{0};
  // How free_unref_page went: onto the pcp lists (one pcp->lock each), and the free_pcppages_bulk calls those
  // frees triggered at the pcp's high mark (one zone->lock each). The rest took zone->lock directly (an isolated
  // pageblock, a failed trylock).
  std::atomic<uint64_t> free_to_pcp{0};
  std::atomic<uint64_t> free_pcp_bulk{0};
  void add(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// Totals over zones and CPUs (read when no worker runs).
struct MemoryStats {
  ZoneLockStats zone;  // summed over zones
  PcpStats pcp;        // summed over pcps
  uint64_t pgalloc = 0, pgfree = 0, alloc_fail = 0, pcp_trylock_fail = 0, bad_pages = 0;
  uint64_t pages_checked_at_prep = 0;  // CheckMode::prep_new_page
};

// The outcome of check(): every problem found, and where every page is.
struct CheckReport {
  bool ok = true;
  std::vector<std::string> errors;  // at most 20, then a count
  uint64_t total_pages = 0, free_pages = 0, isolated_free_pages = 0, pcp_pages = 0, allocated_pages = 0;
  std::string summary() const;  // "ok: N pages: F free, P on pcp lists, A allocated" or the errors
};

// nr_free per (order, migratetype) of one zone: compare before/after to see a round trip close.
struct FreeAreaState {
  uint64_t nr_free[NR_PAGE_ORDERS][MIGRATE_TYPES] = {};
  bool operator==(const FreeAreaState&) const = default;
  std::string to_string() const;
};

inline std::string_view to_string(CheckMode m) { return kCheckModeNames(m); }
inline std::string_view to_string(BatchRule r) { return kBatchRuleNames(r); }

class MemorySystem {
 public:
  // Validates the configuration (std::invalid_argument naming node_pages, pcp_batch, ... with the value and the
  // allowed range) and the memory it needs against what the host can give, before allocating anything. Polls `stop`
  // once per pageblock while it initialises the mem_map, and keeps it for interruption_point().
  MemorySystem(const Machine& machine, LockDomain& locks, MemoryConfig config, InterruptionPoint stop = {});
  ~MemorySystem();
  MemorySystem(const MemorySystem&) = delete;
  MemorySystem& operator=(const MemorySystem&) = delete;

  // Bytes of host memory a configuration needs (mem_map, pageblock bitmaps, zones, pcps, backing).
  static uint64_t bytes_needed(const MemoryConfig& config, int nr_cpus);
  // The watermarks node `nid`'s zone will get (__setup_per_zone_wmarks), without building anything: for callers
  // that size memory before asking for it.
  static std::array<unsigned long, NR_WMARK> watermarks(const MemoryConfig& config, int nid);

  // ---- the page allocator ----
  // alloc_pages_node(nid, gfp, order) as run on model CPU `cpu`. nullptr when every allowed zone is below its min
  // watermark (or has no block of that order). Throws std::invalid_argument for cpu/nid/order out of range.
  Page* alloc_pages(int cpu, int nid, unsigned order, gfp_t gfp);
  // __free_pages(page, order) on model CPU `cpu`: drops a reference and frees the block when it was the last.
  void free_pages(int cpu, Page* page, unsigned order);
  // __alloc_pages_bulk (order 0) into array[0..nr); returns how many it allocated (one pcp->lock for the batch).
  int alloc_pages_bulk(int cpu, int nid, gfp_t gfp, int nr, Page** array);
  // Returns every pcp page of `zone` (all zones when nullptr) to the buddy lists, under pcpu_drain_mutex.
  void drain_all_pages(Zone* zone = nullptr);
  void drain_local_pages(int cpu, Zone* zone = nullptr);

  // ---- pageblock isolation (mm/page_isolation.c), for alloc_contig_range ----
  // Marks every pageblock of [start_pfn, end_pfn) MIGRATE_ISOLATE (splitting free blocks that straddle its edges),
  // moves their free pages to the ISOLATE lists and drains the pcps. Returns 0, or -EBUSY when a pageblock is
  // already isolated (nothing is changed then). The range must be pageblock-aligned and inside one zone.
  int start_isolate_page_range(uint64_t start_pfn, uint64_t end_pfn, int migratetype);
  // Gives the pageblocks back `migratetype` and their free pages to its lists (merging them again).
  void undo_isolate_page_range(uint64_t start_pfn, uint64_t end_pfn, int migratetype);
  // 0 when every page of the range is free on an ISOLATE list, else -EBUSY.
  int test_pages_isolated(uint64_t start_pfn, uint64_t end_pfn);

  // ---- geometry ----
  int nr_nodes() const { return int(nodes_.size()); }
  int nr_cpus() const { return nr_cpus_; }
  Zone& zone(int nid) const { return *nodes_.at(size_t(nid)).zone; }
  uint64_t node_start_pfn(int nid) const { return nodes_.at(size_t(nid)).start_pfn; }
  uint64_t node_present_pages(int nid) const { return nodes_.at(size_t(nid)).pages; }
  Zone& page_zone(const Page* p) const { return *nodes_[size_t(page_to_nid(*p))].zone; }
  uint64_t page_to_pfn(const Page* p) const { return page_zone(p).page_to_pfn(p); }
  // `p` as a page op's cost sees it (vcost::pages): its node, read as other CPUs' flag updates allow, and frame.
  PageFrame page_frame(const Page* p) const {
    const int nid = page_to_nid_racy(*p);
    return {nid, zone(nid).page_to_pfn(p)};
  }
  Page* pfn_to_page(uint64_t pfn) const;  // nullptr outside every node
  bool pfn_valid(uint64_t pfn) const { return pfn_to_page(pfn) != nullptr; }
  void* page_address(const Page* p) const;  // nullptr without real backing
  // Touches one byte of every page of every node's backing (untimed set-up, before the workers run) so the host's
  // own first-touch faults do not land inside a measured clear or copy. Nothing without real backing. Polls
  // interruption_point() once per pageblock.
  void prefault_backing() const;
  PerCpuPages& pcp(int cpu, int nid) const { return *zone(nid).per_cpu_pageset[cpu]; }
  const MemoryConfig& config() const { return config_; }
  const Machine& machine() const { return machine_; }

  // The run's stop check, for loops over pages in set-up and teardown (this one's and its subsystems'): call it once
  // per pageblock, folio or list entry. Never from a worker's path (workers stop through their stop flag).
  void interruption_point() const {
    if (interruption_point_) interruption_point_();
  }

  // ---- introspection (call when no other thread uses the system; takes no locks, so lock_stat is unchanged) ----
  // check() polls interruption_point() as it walks the pages.
  CheckReport check() const;
  FreeAreaState free_area_state(int nid) const;
  MemoryStats stats() const;
  const CpuEvents& events(int cpu) const { return events_[size_t(cpu)]; }

 private:
  struct Node {
    uint64_t start_pfn = 0, pages = 0;
    NodeMemory mem_map, pageblocks, zone_mem, pcp_mem, backing;
    Zone* zone = nullptr;
    std::vector<PerCpuPages*> pcps;  // per model CPU
    std::vector<int> zonelist;       // node ids to try, this node first
  };
  Page* get_page_from_freelist(int cpu, gfp_t gfp, unsigned order, unsigned alloc_flags, int nid, int migratetype);
  void prep_new_page(Page* page, unsigned order, gfp_t gfp);
  bool free_pages_prepare(Zone& zone, Page* page, unsigned order, bool check_free);
  void free_unref_page(int cpu, Zone& zone, Page* page, unsigned order);
  void __free_pages_ok(Zone& zone, Page* page, unsigned order);
  void setup_watermarks();
  void setup_pagesets();
  int set_migratetype_isolate(Zone& zone, uint64_t pfn, uint64_t range_start, uint64_t range_end);
  void unset_migratetype_isolate(Zone& zone, uint64_t pfn, int migratetype);

  const Machine& machine_;
  LockDomain& locks_;
  MemoryConfig config_;
  int nr_cpus_ = 0;
  std::vector<Node> nodes_;
  std::unique_ptr<CpuEvents[]> events_;
  std::unique_ptr<Lock> pcpu_drain_mutex_;
  InterruptionPoint interruption_point_;
};

}  // namespace alloclab::mm
