// MemorySystem: nodes, boot-time set-up (memmap_init, memblock_free_all, __setup_per_zone_wmarks, pcp sizing), the
// page allocator entry points of mm/page_alloc.c (v6.2), pageblock isolation (mm/page_isolation.c) and check().
// See memory_system.hpp for what is modelled and what is not.
#include "alloclab/mm/memory_system.hpp"

#include "alloclab/base/check_errors.hpp"
#include "alloclab/topology/host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>

namespace alloclab::mm {

namespace {

constexpr uint64_t kMaxZonePages = uint64_t(kNoPage) - pageblock_nr_pages;  // indices must stay below kNoPage
constexpr uint64_t TAIL_MAPPING = 0x400;  // the kernel's poison value for tail pages' ->mapping

uint64_t int_sqrt(uint64_t x) {
  uint64_t r = uint64_t(std::sqrt(double(x)));
  while (r * r > x) --r;
  while ((r + 1) * (r + 1) <= x) ++r;
  return r;
}

[[noreturn]] void bad_arg(const std::string& msg) { throw std::invalid_argument(msg); }

[[noreturn, gnu::cold, gnu::noinline]] void bad_cpu(int cpu, int nr) {
  bad_arg("cpu: " + std::to_string(cpu) + " is out of range (allowed: 0.." + std::to_string(nr - 1) + ")");
}
[[noreturn, gnu::cold, gnu::noinline]] void bad_order(unsigned order) {
  bad_arg("order: " + std::to_string(order) + " is out of range (allowed: 0.." + std::to_string(MAX_PAGE_ORDER) + ")");
}
inline void check_cpu(int cpu, int nr) {
  if (__builtin_expect(unsigned(cpu) >= unsigned(nr), 0)) bad_cpu(cpu, nr);
}
inline void check_order(unsigned order) {
  if (__builtin_expect(order > MAX_PAGE_ORDER, 0)) bad_order(order);
}

// Objects placed in node-local memory.
template <class T, class... Args>
T* construct_at_node(NodeMemory& mem, size_t i, Args&&... args) {
  return new (static_cast<char*>(mem.data()) + i * sizeof(T)) T(std::forward<Args>(args)...);
}

}  // namespace

MemoryConfig MemoryConfig::uniform(const Machine& m, uint64_t pages) {
  MemoryConfig c;
  c.node_pages.assign(size_t(m.model().nr_nodes()), pages);
  return c;
}

uint64_t MemorySystem::bytes_needed(const MemoryConfig& config, int nr_cpus) {
  uint64_t b = 0;
  for (uint64_t pages : config.node_pages) {
    b += pages * sizeof(Page) + (pages >> pageblock_order) + 1 + sizeof(Zone);
    if (config.backing == Backing::real) b += pages * PAGE_SIZE;
    b += uint64_t(nr_cpus) * sizeof(PerCpuPages);
  }
  return b;
}

MemorySystem::MemorySystem(const Machine& machine, LockDomain& locks, MemoryConfig config, InterruptionPoint stop)
    : machine_(machine), locks_(locks), config_(std::move(config)), interruption_point_(std::move(stop)) {
  const Topology& model = machine_.model();
  nr_cpus_ = model.nr_pus();
  const int nr_nodes = model.nr_nodes();
  // ---- validate everything before allocating anything ----
  if (int(config_.node_pages.size()) != nr_nodes)
    bad_arg("node_pages: " + std::to_string(config_.node_pages.size()) + " entries for a model topology of " +
            std::to_string(nr_nodes) + " nodes (give one per node)");
  if (nr_nodes > MAX_NUMNODES)
    bad_arg("topology: " + std::to_string(nr_nodes) + " nodes (allowed: up to " + std::to_string(MAX_NUMNODES) + ")");
  uint64_t total = 0;
  for (int n = 0; n < nr_nodes; ++n) {
    const uint64_t p = config_.node_pages[size_t(n)];
    if (p % pageblock_nr_pages || p > kMaxZonePages)
      bad_arg("node_pages: " + std::to_string(p) + " for node " + std::to_string(n) +
              " is not allowed (allowed: a multiple of " + std::to_string(pageblock_nr_pages) +
              " (pageblock_nr_pages) from 0 to " + std::to_string(kMaxZonePages) + ")");
    total += p;
  }
  if (total == 0) bad_arg("node_pages: every node is empty (give at least one node 512 pages or more)");
  if (config_.pcp_batch < 0 || config_.pcp_batch > (1 << 16))
    bad_arg("pcp_batch: " + std::to_string(config_.pcp_batch) + " is out of range (allowed: 0 (auto)..65536)");
  if (config_.percpu_pagelist_high_fraction != 0 && config_.percpu_pagelist_high_fraction < 8)
    bad_arg("percpu_pagelist_high_fraction: " + std::to_string(config_.percpu_pagelist_high_fraction) +
            " is not allowed (allowed: 0 or at least 8)");
  if (config_.batch_rule == BatchRule::v2_6_35 && config_.percpu_pagelist_high_fraction != 0)
    bad_arg("percpu_pagelist_high_fraction: " + std::to_string(config_.percpu_pagelist_high_fraction) +
            " is a v5.14+ sysctl (allowed with batch_rule 2.6.35: 0; its percpu_pagelist_fraction is not modelled)");
  if (config_.min_free_kbytes < -1)
    bad_arg("min_free_kbytes: " + std::to_string(config_.min_free_kbytes) +
            " is not allowed (allowed: -1 (auto) or >= 0)");
  if (config_.watermark_scale_factor < 1 || config_.watermark_scale_factor > 3000)
    bad_arg("watermark_scale_factor: " + std::to_string(config_.watermark_scale_factor) +
            " is out of range (allowed: 1..3000)");
  check_memory({bytes_needed(config_, nr_cpus_),
                "node_pages: " + std::to_string(total) + " pages of 64-byte struct pages" +
                    std::string(config_.backing == Backing::real ? " and 4 KiB of backing each" : "")});

  // ---- nodes: mem_map, pageblock bitmap, zone (memmap_init) ----
  nodes_.resize(size_t(nr_nodes));
  uint64_t pfn = 0;
  for (int n = 0; n < nr_nodes; ++n) {
    Node& node = nodes_[size_t(n)];
    node.start_pfn = pfn;
    node.pages = config_.node_pages[size_t(n)];
    pfn += (node.pages + MAX_ORDER_NR_PAGES - 1) & ~(MAX_ORDER_NR_PAGES - 1);
    node.pcps.assign(size_t(nr_cpus_), nullptr);
    Page* mem_map = nullptr;
    std::atomic<uint8_t>* pb = nullptr;
    if (node.pages) {
      node.mem_map = NodeMemory(machine_, n, node.pages * sizeof(Page));
      node.pageblocks = NodeMemory(machine_, n, node.pages >> pageblock_order);
      mem_map = static_cast<Page*>(node.mem_map.data());
      pb = static_cast<std::atomic<uint8_t>*>(node.pageblocks.data());
      if (config_.backing == Backing::real) node.backing = NodeMemory(machine_, n, node.pages * PAGE_SIZE);
    }
    node.zone_mem = NodeMemory(machine_, n, sizeof(Zone));
    node.zone = construct_at_node<Zone>(node.zone_mem, 0, locks_, n, ZONE_NORMAL, node.start_pfn, node.pages, mem_map,
                                        pb, config_.batch_rule, config_.check);
    node.zone->per_cpu_pageset = node.pcps.data();
    const uint64_t links = page_links(n, ZONE_NORMAL);
    for (uint64_t i = 0; i < node.pages; ++i) {  // the rest of each descriptor is zero (fresh memory)
      if (i % pageblock_nr_pages == 0) interruption_point();
      mem_map[i].flags = links;
      mem_map[i]._mapcount = -1;
    }
    for (uint64_t b = 0; b < (node.pages >> pageblock_order); ++b) new (&pb[b]) std::atomic<uint8_t>(MIGRATE_MOVABLE);
  }
  // zonelists: this node first, then the others in index order (no distances); only populated zones.
  for (int n = 0; n < nr_nodes; ++n)
    for (int k = 0; k < nr_nodes; ++k) {
      const int m = (n + k) % nr_nodes;
      if (nodes_[size_t(m)].pages) nodes_[size_t(n)].zonelist.push_back(m);
    }

  // ---- memblock_free_all: every frame to the buddy in max-order blocks (__free_pages_core, FPI_TO_TAIL) ----
  for (Node& node : nodes_) {
    Zone& z = *node.zone;
    for (uint64_t i = 0; i < node.pages;) {
      interruption_point();
      unsigned order = MAX_PAGE_ORDER;
      while (i + (uint64_t(1) << order) > node.pages) --order;
      __free_one_page(z.zone_mem_map + i, z.zone_start_pfn + i, z, order, MIGRATE_MOVABLE, FPI_TO_TAIL);
      i += uint64_t(1) << order;
    }
  }

  events_ = std::make_unique<CpuEvents[]>(size_t(nr_cpus_));
  setup_watermarks();
  setup_pagesets();
  pcpu_drain_mutex_ = std::make_unique<Lock>(locks_, "pcpu_drain_mutex");
}

MemorySystem::~MemorySystem() {
  for (Node& node : nodes_) {
    for (PerCpuPages* p : node.pcps)
      if (p) p->~PerCpuPages();
    if (node.zone) node.zone->~Zone();
  }
}

std::array<unsigned long, NR_WMARK> MemorySystem::watermarks(const MemoryConfig& config, int nid) {
  // __setup_per_zone_wmarks(), with min_free_kbytes from init_per_zone_wmark_min().
  std::array<unsigned long, NR_WMARK> w{};
  uint64_t lowmem_pages = 0;
  for (uint64_t p : config.node_pages) lowmem_pages += p;
  const uint64_t managed = config.node_pages.at(size_t(nid));
  if (!managed || !lowmem_pages) return w;
  uint64_t min_free_kbytes;
  if (config.min_free_kbytes >= 0) {
    min_free_kbytes = uint64_t(config.min_free_kbytes);
  } else {
    const uint64_t lowmem_kbytes = lowmem_pages * (PAGE_SIZE >> 10);
    min_free_kbytes = std::clamp<uint64_t>(int_sqrt(lowmem_kbytes * 16), 128, 262144);
  }
  const uint64_t pages_min = min_free_kbytes >> (PAGE_SHIFT - 10);
  uint64_t tmp = pages_min * managed / lowmem_pages;
  w[WMARK_MIN] = tmp;
  tmp = std::max(tmp >> 2, managed * uint64_t(config.watermark_scale_factor) / 10000);
  w[WMARK_LOW] = w[WMARK_MIN] + tmp;
  w[WMARK_HIGH] = w[WMARK_LOW] + tmp;
  w[WMARK_PROMO] = w[WMARK_HIGH] + tmp;
  return w;
}

void MemorySystem::setup_watermarks() {
  for (Node& n : nodes_) {
    const auto w = watermarks(config_, n.zone->node);
    for (int i = 0; i < NR_WMARK; ++i) n.zone->_watermark[i] = w[size_t(i)];
  }
}

void MemorySystem::setup_pagesets() {
  // Every model CPU gets a pcp for every populated zone, placed in the CPU's own node memory (as the per-CPU areas).
  const Topology& model = machine_.model();
  for (int cpu_node = 0; cpu_node < nr_nodes(); ++cpu_node) {
    const std::vector<int>& cpus = model.pus_of_node(cpu_node);
    size_t populated = 0;
    for (const Node& n : nodes_) populated += n.pages ? 1 : 0;
    if (cpus.empty() || !populated) continue;
    Node& home = nodes_[size_t(cpu_node)];
    home.pcp_mem = NodeMemory(machine_, cpu_node, cpus.size() * populated * sizeof(PerCpuPages));
    size_t slot = 0;
    for (int cpu : cpus)
      for (Node& n : nodes_)
        if (n.pages) n.pcps[size_t(cpu)] = construct_at_node<PerCpuPages>(home.pcp_mem, slot++, locks_, cpu);
  }
  for (Node& n : nodes_) {
    Zone& z = *n.zone;
    if (!z.populated()) continue;
    const int batch =
        config_.pcp_batch ? config_.pcp_batch : std::max(1, zone_batchsize(z.managed_pages(), config_.batch_rule));
    int cpus_of_node = int(model.pus_of_node(z.node).size());
    if (!cpus_of_node) cpus_of_node = nr_cpus_;
    const int frac = config_.percpu_pagelist_high_fraction;
    // 2.6.35 setup_pageset(): pcp->high = 6 * batch (percpu_pagelist_fraction unset).
    const int high_min =
        config_.batch_rule == BatchRule::v2_6_35 ? 6 * batch : zone_highsize(z, batch, cpus_of_node, frac);
    const int high_max = frac ? high_min : zone_highsize(z, batch, cpus_of_node, 8);
    z.pageset_batch = batch;
    z.pageset_high = high_min;
    z.pageset_high_min = high_min;
    z.pageset_high_max = config_.batch_rule == BatchRule::v6_7 ? high_max : high_min;
    for (int cpu = 0; cpu < nr_cpus_; ++cpu) {
      PerCpuPages* p = n.pcps[size_t(cpu)];
      if (!p) continue;
      p->batch = batch;
      p->high = high_min;
      p->high_min = high_min;
      p->high_max = z.pageset_high_max;
    }
  }
}

// ---- allocation ----------------------------------------------------------------------------------------------------

void MemorySystem::prep_new_page(Page* page, unsigned order, gfp_t gfp) {
  // post_alloc_hook
  memmap_access(page, 1, Stream::update);
  page->private_ = 0;
  set_page_refcounted(*page);
  if ((gfp & __GFP_ZERO) && config_.backing == Backing::real) {
    vcost::pages(PageOp::clear, uint64_t(1) << order, page_frame(page));
    std::memset(page_address(page), 0, PAGE_SIZE << order);  // clear_highpage for each page
  }
  if (order && (gfp & __GFP_COMP)) {
    // prep_compound_page: PG_head, tails point at the head; the order lives in the first tail (v6.2 keeps it in
    // the first tail's overlay of lru/mapping/index; the model uses index).
    __set_bit(*page, PG_head);
    const uint64_t head = (page_to_pfn(page) << 1) | 1;
    const uint64_t n = uint64_t(1) << order;
    memmap_access(page + 1, n - 1, Stream::store);  // prep_compound_tail on each tail: written, not read
    for (uint64_t i = 1; i < n; i++) {
      page[i].mapping = TAIL_MAPPING;
      page[i].compound_head = head;
      page[i].private_ = 0;
    }
    page[1].index = order;
  }
}

Page* MemorySystem::get_page_from_freelist(int cpu, gfp_t gfp, unsigned order, unsigned alloc_flags, int nid,
                                           int migratetype) {
  const bool v67 = config_.batch_rule == BatchRule::v6_7;
  for (int z_nid : nodes_[size_t(nid)].zonelist) {
    if ((gfp & __GFP_THISNODE) && z_nid != nid) break;
    Zone& zone = *nodes_[size_t(z_nid)].zone;
    bool ok = false;
    if (v67 && !zone.test_flag(ZONE_BELOW_HIGH)) {
      // v6.7: detect a zone below the high watermark here, so the free path can shrink pcp->high.
      ok = zone_watermark_fast(zone, order, zone.high_wmark_pages(), alloc_flags, gfp);
      if (!ok) zone.set_flag(ZONE_BELOW_HIGH);
    }
    if (!ok &&
        !zone_watermark_fast(zone, order, zone.wmark_pages(int(alloc_flags & ALLOC_WMARK_MASK)), alloc_flags, gfp))
      continue;  // (node_reclaim is not modelled)
    // rmqueue() (2.6.35: buffered_rmqueue, which has no CMA and caches order 0 only)
    const bool v2635 = zone.batch_rule == BatchRule::v2_6_35;
    for (;;) {  // 2.6.35: `again:` after a block prep_new_page found bad
      Page* page = nullptr;
      if (zone_pcp_allowed_order(zone, order) &&
          (v2635 || (alloc_flags & ALLOC_CMA) || migratetype != MIGRATE_MOVABLE)) {
        bool trylock_failed = false;
        page = rmqueue_pcplist(zone, order, migratetype, alloc_flags, cpu, &trylock_failed);
        if (trylock_failed) events_[size_t(cpu)].add(events_[size_t(cpu)].pcp_trylock_fail, 1);
      }
      if (!page) page = rmqueue_buddy(zone, order, alloc_flags, migratetype);
      if (!page) break;
      if (zone.check_mode == CheckMode::prep_new_page) {
        // 2.6.35 prep_new_page: check_new_page on each struct page, after local_irq_restore (no lock held).
        events_[size_t(cpu)].add(events_[size_t(cpu)].pages_checked_at_prep, uint64_t(1) << order);
        if (check_new_pages(zone, page, order)) continue;  // the bad block is leaked: goto again
      }
      prep_new_page(page, order, gfp);
      return page;
    }
  }
  return nullptr;
}

Page* MemorySystem::alloc_pages(int cpu, int nid, unsigned order, gfp_t gfp) {
  check_cpu(cpu, nr_cpus_);
  if (unsigned(nid) >= nodes_.size())
    bad_arg("nid: " + std::to_string(nid) + " is out of range (allowed: 0.." + std::to_string(nodes_.size() - 1) + ")");
  check_order(order);
  const int migratetype = gfp_migratetype(gfp);
  // First attempt at the low watermark (ALLOC_CMA for movable requests: gfp_to_alloc_flags_cma).
  unsigned alloc_flags = ALLOC_WMARK_LOW | (migratetype == MIGRATE_MOVABLE ? ALLOC_CMA : 0);
  Page* page = get_page_from_freelist(cpu, gfp, order, alloc_flags, nid, migratetype);
  if (__builtin_expect(!page, 0)) {
    // The slow path without reclaim, compaction or OOM: gfp_to_alloc_flags() and one more try at the min mark.
    alloc_flags = ALLOC_WMARK_MIN | ALLOC_CPUSET;
    if (gfp & __GFP_HIGH) alloc_flags |= ALLOC_HIGH;
    if (gfp & __GFP_KSWAPD_RECLAIM) alloc_flags |= ALLOC_KSWAPD;
    if (gfp & __GFP_ATOMIC) alloc_flags = (alloc_flags | ALLOC_HARDER) & ~ALLOC_CPUSET;
    if (migratetype == MIGRATE_MOVABLE) alloc_flags |= ALLOC_CMA;
    page = get_page_from_freelist(cpu, gfp, order, alloc_flags, nid, migratetype);
    if (!page && (gfp & __GFP_DIRECT_RECLAIM)) {
      // What survives of __alloc_pages_direct_reclaim without reclaim: pages may sit on pcp lists, so drain them
      // all and retry once.
      drain_all_pages(nullptr);
      page = get_page_from_freelist(cpu, gfp, order, alloc_flags, nid, migratetype);
    }
    if (!page) {
      events_[size_t(cpu)].add(events_[size_t(cpu)].alloc_fail, 1);
      return nullptr;
    }
  }
  events_[size_t(cpu)].add(events_[size_t(cpu)].pgalloc, uint64_t(1) << order);
  return page;
}

int MemorySystem::alloc_pages_bulk(int cpu, int nid, gfp_t gfp, int nr_pages, Page** array) {
  check_cpu(cpu, nr_cpus_);
  if (unsigned(nid) >= nodes_.size())
    bad_arg("nid: " + std::to_string(nid) + " is out of range (allowed: 0.." + std::to_string(nodes_.size() - 1) + ")");
  if (nr_pages <= 0) return 0;
  if (nr_pages == 1) {
    array[0] = alloc_pages(cpu, nid, 0, gfp);
    return array[0] ? 1 : 0;
  }
  const int migratetype = gfp_migratetype(gfp);
  const unsigned alloc_flags = ALLOC_WMARK_LOW | (migratetype == MIGRATE_MOVABLE ? ALLOC_CMA : 0);
  Zone* zone = nullptr;
  for (int z_nid : nodes_[size_t(nid)].zonelist) {
    if ((gfp & __GFP_THISNODE) && z_nid != nid) break;
    Zone& z = *nodes_[size_t(z_nid)].zone;
    if (zone_watermark_fast(z, 0, z.wmark_pages(int(alloc_flags & ALLOC_WMARK_MASK)) + unsigned(nr_pages), alloc_flags,
                            gfp)) {
      zone = &z;
      break;
    }
  }
  int nr_populated = 0;
  if (zone) {
    PerCpuPages& pcp = *zone->per_cpu_pageset[cpu];
    LockToken t;
    if (pcp.lock.trylock(t)) {
      PageList& list = pcp.lists[order_to_pindex(migratetype, 0)];
      while (nr_populated < nr_pages) {
        Page* page = __rmqueue_pcplist(*zone, 0, migratetype, alloc_flags, pcp, list);
        if (!page) break;
        prep_new_page(page, 0, gfp);
        array[nr_populated++] = page;
      }
      pcp.lock.unlock(t);
      events_[size_t(cpu)].add(events_[size_t(cpu)].pgalloc, uint64_t(nr_populated));
    } else {
      events_[size_t(cpu)].add(events_[size_t(cpu)].pcp_trylock_fail, 1);
    }
  }
  if (nr_populated == 0) {  // failed_irq / failed: one page through the normal path
    Page* page = alloc_pages(cpu, nid, 0, gfp);
    if (page) array[nr_populated++] = page;
  }
  return nr_populated;
}

// ---- free --------------------------------------------------------------------------------------------------------

bool MemorySystem::free_pages_prepare(Zone& zone, Page* page, unsigned order, bool check_free) {
  const bool checks = zone.check_mode != CheckMode::off;  // v6.4+: only with check_pages_enabled
  int bad = 0;
  memmap_access(page, 1, Stream::update);
  if (order) {
    const bool compound = PageHead(*page);
    if (compound && page[1].index != order) {  // VM_BUG_ON_PAGE(compound_order(page) != order)
      zone.nr_bad_pages.fetch_add(1, std::memory_order_relaxed);
      bad++;
    }
    const uint64_t head = (page_to_pfn(page) << 1) | 1;
    const uint64_t n = uint64_t(1) << order;
    memmap_access(page + 1, n - 1, Stream::update);  // free_tail_pages_check and the flags of each tail
    for (uint64_t i = 1; i < n; i++) {
      Page& p = page[i];
      if (compound) {  // free_tail_pages_check
        if (p.mapping != TAIL_MAPPING || p.compound_head != head) {
          zone.nr_bad_pages.fetch_add(1, std::memory_order_relaxed);
          bad++;
        }
        p.mapping = 0;
        p.compound_head = 0;  // clear_compound_head
        if (i == 1) p.index = 0;
      }
      if (checks && free_page_is_bad(zone, &p)) {
        bad++;
        continue;
      }
      p.flags &= ~PAGE_FLAGS_CHECK_AT_PREP;
    }
  }
  if (PageMappingFlags(*page)) page->mapping = 0;
  if (check_free && checks && free_page_is_bad(zone, page)) bad++;
  if (bad) return false;
  page->flags &= ~PAGE_FLAGS_CHECK_AT_PREP;
  return true;
}

void MemorySystem::free_unref_page(int cpu, Zone& zone, Page* page, unsigned order) {
  const uint64_t pfn = zone.page_to_pfn(page);
  // free_unref_page_prepare: v6.2 defers the head check to bulkfree_pcp_prepare under zone->lock; 2.6.35's
  // free_hot_cold_page runs free_pages_check here, before the pcp list.
  if (!free_pages_prepare(zone, page, order, zone.check_mode == CheckMode::prep_new_page)) return;
  int migratetype = zone.get_pfnblock_migratetype(pfn);
  page->index = uint64_t(migratetype);  // set_pcppage_migratetype
  // Only unmovable, reclaimable and movable go on the pcp lists; isolated pageblocks go straight to the buddy.
  if (__builtin_expect(migratetype >= MIGRATE_PCPTYPES, 0)) {
    if (is_migrate_isolate(migratetype)) {
      free_one_page(zone, page, pfn, order, migratetype, FPI_NONE);
      return;
    }
    migratetype = MIGRATE_MOVABLE;
  }
  PerCpuPages& pcp = *zone.per_cpu_pageset[cpu];
  LockToken t;
  if (__builtin_expect(pcp.lock.trylock(t), 1)) {
    const uint64_t bulk0 = pcp.stats.bulk_frees;
    free_unref_page_commit(zone, pcp, page, migratetype, order);
    CpuEvents& ev = events_[size_t(cpu)];
    ev.add(ev.free_to_pcp, 1);
    if (pcp.stats.bulk_frees != bulk0) ev.add(ev.free_pcp_bulk, pcp.stats.bulk_frees - bulk0);
    pcp.lock.unlock(t);
  } else {
    events_[size_t(cpu)].add(events_[size_t(cpu)].pcp_trylock_fail, 1);
    free_one_page(zone, page, pfn, order, migratetype, FPI_NONE);
  }
}

void MemorySystem::__free_pages_ok(Zone& zone, Page* page, unsigned order) {
  const uint64_t pfn = zone.page_to_pfn(page);
  const int migratetype = zone.get_pfnblock_migratetype(pfn);
  if (!free_pages_prepare(zone, page, order, true)) return;
  free_one_page(zone, page, pfn, order, migratetype, FPI_NONE);
}

void MemorySystem::free_pages(int cpu, Page* page, unsigned order) {
  check_cpu(cpu, nr_cpus_);
  check_order(order);
  if (!page) bad_arg("page: nullptr (nothing to free)");
  Zone& zone = page_zone(page);
  auto free_the_page = [&](Page* p, unsigned o) {
    if (zone_pcp_allowed_order(zone, o))
      free_unref_page(cpu, zone, p, o);
    else
      __free_pages_ok(zone, p, o);
    events_[size_t(cpu)].add(events_[size_t(cpu)].pgfree, uint64_t(1) << o);
  };
  const bool head = PageHead(*page);  // before the reference is dropped
  if (put_page_testzero(*page)) {
    free_the_page(page, order);
  } else if (!head) {
    // Someone else holds the head of a non-compound block: free the tail parts (v6.2 __free_pages).
    while (order-- > 0) free_the_page(page + (uint64_t(1) << order), order);
  }
}

// ---- drains ------------------------------------------------------------------------------------------------------

void MemorySystem::drain_local_pages(int cpu, Zone* zone) {
  check_cpu(cpu, nr_cpus_);
  if (zone) {
    if (zone->populated()) drain_pages_zone(*zone, cpu);
    return;
  }
  for (Node& n : nodes_)
    if (n.pages) drain_pages_zone(*n.zone, cpu);
}

void MemorySystem::drain_all_pages(Zone* zone) {
  // __drain_all_pages(zone, false): a drain already in progress does the job for us, except for a zone-specific
  // caller (alloc_contig_range), which must see its zone drained: it waits (mutex_lock).
  LockToken t;
  if (!pcpu_drain_mutex_->trylock(t)) {
    if (!zone) return;
    pcpu_drain_mutex_->lock(t);
  }
  for (int cpu = 0; cpu < nr_cpus_; ++cpu) {
    bool has_pcps = false;
    if (zone) {
      has_pcps = zone->populated() && zone->per_cpu_pageset[cpu]->nr() > 0;
    } else {
      for (Node& n : nodes_)
        if (n.pages && n.pcps[size_t(cpu)]->nr() > 0) has_pcps = true;
    }
    if (has_pcps) drain_local_pages(cpu, zone);  // remote drain under the target's pcp->lock (v6.0+)
  }
  pcpu_drain_mutex_->unlock(t);
}

// ---- pfn helpers
// -----------------------------------------------------------------------------------------------------

Page* MemorySystem::pfn_to_page(uint64_t pfn) const {
  for (const Node& n : nodes_)
    if (pfn >= n.start_pfn && pfn < n.start_pfn + n.pages) return n.zone->pfn_to_page(pfn);
  return nullptr;
}

void* MemorySystem::page_address(const Page* p) const {
  const Node& n = nodes_[size_t(page_to_nid(*p))];
  if (!n.backing.data()) return nullptr;
  return static_cast<char*>(n.backing.data()) + uint64_t(p - n.zone->zone_mem_map) * PAGE_SIZE;
}

void MemorySystem::prefault_backing() const {
  for (const Node& n : nodes_) {
    auto* base = static_cast<volatile char*>(n.backing.data());
    if (!base) continue;
    for (uint64_t i = 0; i < n.pages; ++i) {
      if (i % pageblock_nr_pages == 0) interruption_point();
      base[i * PAGE_SIZE] = base[i * PAGE_SIZE];
    }
  }
}

// ---- pageblock isolation (mm/page_isolation.c, v6.2)
// -----------------------------------------------------------------

int MemorySystem::set_migratetype_isolate(Zone& zone, uint64_t pfn, uint64_t range_start, uint64_t range_end) {
  Page* page = zone.pfn_to_page(pfn);
  LockToken t;
  zone.lock_zone(t);
  if (is_migrate_isolate(zone.get_pageblock_migratetype(page))) {
    zone.unlock_zone(t);
    return -EBUSY;
  }
  // (has_unmovable_pages is not modelled: allocated pages are assumed movable)
  const int mt = zone.get_pageblock_migratetype(page);
  // isolate_single_pageblock: a free block that straddles an edge of the range is split, so that only its part
  // inside becomes isolated. Blocks wholly inside stay whole (their later pageblocks hold no buddy head).
  split_free_page_outside(zone, pfn, range_start, range_end);
  zone.set_pageblock_migratetype(page, MIGRATE_ISOLATE);
  vcost::rmw(&zone.nr_isolate_pageblock);
  zone.nr_isolate_pageblock.fetch_add(1, std::memory_order_relaxed);
  const int nr_pages = move_freepages_block(zone, page, MIGRATE_ISOLATE, nullptr);
  zone.__mod_zone_freepage_state(-nr_pages, mt);
  ++zone.stats.isolation_changes;
  zone.unlock_zone(t);
  return 0;
}

void MemorySystem::unset_migratetype_isolate(Zone& zone, uint64_t pfn, int migratetype) {
  Page* page = zone.pfn_to_page(pfn);
  LockToken t;
  zone.lock_zone(t);
  if (!is_migrate_isolate(zone.get_pageblock_migratetype(page))) {
    zone.unlock_zone(t);
    return;
  }
  // A free block of pageblock order or more whose buddy is not isolated is taken out and put back, so it merges.
  bool isolated_page = false;
  unsigned order = 0;
  memmap_access(page, 1, Stream::load);
  if (PageBuddy_racy(*page)) {
    order = buddy_order(*page);
    if (order >= pageblock_order && order < MAX_PAGE_ORDER) {
      Page* buddy = find_buddy_page_pfn(zone, page, pfn, order, nullptr);
      if (buddy && !is_migrate_isolate(zone.get_pageblock_migratetype(buddy)))
        isolated_page = __isolate_free_page(zone, page, order) != 0;
    }
  }
  if (!isolated_page) {
    const int nr_pages = move_freepages_block(zone, page, migratetype, nullptr);
    zone.__mod_zone_freepage_state(nr_pages, migratetype);
  }
  zone.set_pageblock_migratetype(page, migratetype);
  if (isolated_page) __free_one_page(page, pfn, zone, order, migratetype, FPI_NONE);  // __putback_isolated_page
  vcost::rmw(&zone.nr_isolate_pageblock);
  zone.nr_isolate_pageblock.fetch_sub(1, std::memory_order_relaxed);
  ++zone.stats.isolation_changes;
  zone.unlock_zone(t);
}

namespace {
Zone& range_zone(const MemorySystem& ms, uint64_t start_pfn, uint64_t end_pfn) {
  if (start_pfn >= end_pfn || start_pfn % pageblock_nr_pages || end_pfn % pageblock_nr_pages)
    bad_arg("pfn range: [" + std::to_string(start_pfn) + ", " + std::to_string(end_pfn) +
            ") must be non-empty and pageblock-aligned (multiples of " + std::to_string(pageblock_nr_pages) + ")");
  Page* first = ms.pfn_to_page(start_pfn);
  Page* last = ms.pfn_to_page(end_pfn - 1);
  if (!first || !last || &ms.page_zone(first) != &ms.page_zone(last))
    bad_arg("pfn range: [" + std::to_string(start_pfn) + ", " + std::to_string(end_pfn) + ") is not inside one zone");
  return ms.page_zone(first);
}
}  // namespace

int MemorySystem::start_isolate_page_range(uint64_t start_pfn, uint64_t end_pfn, int migratetype) {
  Zone& zone = range_zone(*this, start_pfn, end_pfn);
  for (uint64_t pfn = start_pfn; pfn < end_pfn; pfn += pageblock_nr_pages) {
    if (set_migratetype_isolate(zone, pfn, start_pfn, end_pfn) != 0) {
      for (uint64_t p = start_pfn; p < pfn; p += pageblock_nr_pages) unset_migratetype_isolate(zone, p, migratetype);
      return -EBUSY;
    }
  }
  drain_all_pages(&zone);  // pcp pages of the range go back to the (now isolated) free lists
  return 0;
}

void MemorySystem::undo_isolate_page_range(uint64_t start_pfn, uint64_t end_pfn, int migratetype) {
  Zone& zone = range_zone(*this, start_pfn, end_pfn);
  for (uint64_t pfn = start_pfn; pfn < end_pfn; pfn += pageblock_nr_pages)
    unset_migratetype_isolate(zone, pfn, migratetype);
}

int MemorySystem::test_pages_isolated(uint64_t start_pfn, uint64_t end_pfn) {
  Zone& zone = range_zone(*this, start_pfn, end_pfn);
  for (uint64_t pfn = start_pfn; pfn < end_pfn; pfn += pageblock_nr_pages)
    if (!is_migrate_isolate(zone.get_pfnblock_migratetype(pfn))) return -EBUSY;
  LockToken t;
  zone.lock_zone(t);
  uint64_t pfn = start_pfn;
  while (pfn < end_pfn) {
    Page* page = zone.pfn_to_page(pfn);
    memmap_access(page, 1, Stream::load);
    if (!PageBuddy_racy(*page) || page->buddy_list_mt != MIGRATE_ISOLATE) break;
    pfn += uint64_t(1) << buddy_order(*page);
  }
  zone.unlock_zone(t);
  return pfn >= end_pfn ? 0 : -EBUSY;
}

// ---- introspection -------------------------------------------------------------------------------------------------

std::string CheckReport::summary() const {
  std::ostringstream os;
  if (ok) {
    os << "ok: " << total_pages << " pages: " << free_pages << " free (" << isolated_free_pages << " isolated), "
       << pcp_pages << " on pcp lists, " << allocated_pages << " allocated";
  } else {
    os << errors.size() << " problem(s):";
    for (const auto& e : errors) os << "\n  " << e;
  }
  return os.str();
}

std::string FreeAreaState::to_string() const {
  std::ostringstream os;
  for (int mt = 0; mt < MIGRATE_TYPES; ++mt) {
    os << migratetype_name(mt) << ":";
    for (unsigned o = 0; o < NR_PAGE_ORDERS; ++o) os << " " << nr_free[o][mt];
    os << "\n";
  }
  return os.str();
}

FreeAreaState MemorySystem::free_area_state(int nid) const {
  FreeAreaState s;
  const Zone& z = zone(nid);
  for (unsigned o = 0; o < NR_PAGE_ORDERS; ++o)
    for (int mt = 0; mt < MIGRATE_TYPES; ++mt) {
      uint64_t n = 0;
      for (uint32_t i = z.free_area[o].free_list[mt].head(); i != kNoPage; i = z.zone_mem_map[i].lru.next) ++n;
      s.nr_free[o][mt] = n;
    }
  return s;
}

MemoryStats MemorySystem::stats() const {
  MemoryStats s;
  for (const Node& n : nodes_) {
    s.zone += n.zone->stats;
    s.bad_pages += n.zone->nr_bad_pages.load();
    for (const PerCpuPages* p : n.pcps)
      if (p) s.pcp += p->stats;
  }
  for (int c = 0; c < nr_cpus_; ++c) {
    s.pgalloc += events_[size_t(c)].pgalloc.load();
    s.pgfree += events_[size_t(c)].pgfree.load();
    s.alloc_fail += events_[size_t(c)].alloc_fail.load();
    s.pcp_trylock_fail += events_[size_t(c)].pcp_trylock_fail.load();
    s.pages_checked_at_prep += events_[size_t(c)].pages_checked_at_prep.load();
  }
  return s;
}

CheckReport MemorySystem::check() const {
  CheckReport r;
  CheckErrors fail(r.ok, r.errors);
  enum : uint8_t { kUnseen, kFree, kPcp };
  for (const Node& node : nodes_) {
    const Zone& z = *node.zone;
    const std::string zn = "node " + std::to_string(z.node) + ": ";
    r.total_pages += z.spanned_pages;
    std::vector<uint8_t> where(z.spanned_pages, kUnseen);
    uint64_t free_counted = 0, cma_free = 0, isolated_free = 0;
    const Page* base = z.zone_mem_map;
    // 1. the buddy lists
    for (unsigned o = 0; o < NR_PAGE_ORDERS; ++o) {
      uint64_t blocks = 0;
      const uint64_t n = uint64_t(1) << o;
      for (int mt = 0; mt < MIGRATE_TYPES; ++mt) {
        uint32_t prev = kNoPage;
        for (uint32_t i = z.free_area[o].free_list[mt].head(); i != kNoPage; prev = i, i = base[i].lru.next) {
          interruption_point();
          const auto at = [&] {  // built only for a failure: this loop visits every free block
            return zn + "pfn " + std::to_string(z.zone_start_pfn + i) + " (order " + std::to_string(o) + ", " +
                   migratetype_name(mt) + " list): ";
          };
          if (i >= z.spanned_pages || i % n || i + n > z.spanned_pages) {
            fail(at() + "block outside the zone or misaligned");
            break;
          }
          if (base[i].lru.prev != prev) fail(at() + "broken list links");
          const Page& p = base[i];
          if (!PageBuddy(p)) fail(at() + "on a free list but not PageBuddy");
          if (buddy_order(p) != o) fail(at() + "buddy order " + std::to_string(buddy_order(p)));
          if (int(p.buddy_list_mt) != mt) fail(at() + "says it is on list " + migratetype_name(int(p.buddy_list_mt)));
          for (uint64_t k = 0; k < n; ++k) {
            if (where[i + k] != kUnseen) {
              fail(at() + "page " + std::to_string(i + k) + " is in two places");
              break;
            }
            where[i + k] = kFree;
            const Page& q = base[i + k];
            if (k && PageBuddy(q)) fail(at() + "tail page " + std::to_string(k) + " is PageBuddy");
            if (q._refcount != 0 || q.mapping || q.memcg_data || (q.flags & PAGE_FLAGS_CHECK_AT_PREP) ||
                (k && q._mapcount != -1))
              fail(at() + "free page " + std::to_string(k) + " of the block has refcount/mapping/memcg/flags set");
          }
          ++blocks;
          if (is_migrate_isolate(mt))
            isolated_free += n;
          else
            free_counted += n;
          if (is_migrate_cma(mt)) cma_free += n;
          // Fully merged: the buddy of a free block is not itself a free block of the same order (unless an
          // isolation boundary at pageblock order or above keeps them apart).
          if (o < MAX_PAGE_ORDER) {
            const uint64_t pfn = z.zone_start_pfn + i, bpfn = pfn ^ n;
            if (z.zone_spans_pfn(bpfn)) {
              const Page& b = base[bpfn - z.zone_start_pfn];
              if (PageBuddy(b) && buddy_order(b) == o) {
                const int mta = z.get_pfnblock_migratetype(pfn), mtb = z.get_pfnblock_migratetype(bpfn);
                const bool apart = o >= pageblock_order && mta != mtb &&
                                   (!migratetype_is_mergeable(mta) || !migratetype_is_mergeable(mtb));
                if (!apart) fail(at() + "not merged with its free buddy");
              }
            }
          }
        }
      }
      if (blocks != z.free_area[o].nr_free.load()) {
        fail(zn + "free_area[" + std::to_string(o) + "].nr_free is " + std::to_string(z.free_area[o].nr_free.load()) +
             " but its lists hold " + std::to_string(blocks) + " blocks");
      }
    }
    if (long(free_counted) != z.zone_page_state(NR_FREE_PAGES))
      fail(zn + "NR_FREE_PAGES is " + std::to_string(z.zone_page_state(NR_FREE_PAGES)) + " but the lists hold " +
           std::to_string(free_counted) + " non-isolated free pages");
    if (long(cma_free) != z.zone_page_state(NR_FREE_CMA_PAGES))
      fail(zn + "NR_FREE_CMA_PAGES is " + std::to_string(z.zone_page_state(NR_FREE_CMA_PAGES)) +
           " but the CMA lists hold " + std::to_string(cma_free));
    // 2. the pcp lists of every CPU
    uint64_t pcp_total = 0;
    for (const PerCpuPages* pcp : node.pcps) {
      if (!pcp) continue;
      uint64_t pages = 0;
      for (int pindex = 0; pindex < NR_PCP_LISTS; ++pindex) {
        const unsigned o = pindex_to_order(pindex);
        const uint64_t n = uint64_t(1) << o;
        uint32_t prev = kNoPage;
        for (uint32_t i = pcp->lists[pindex].head(); i != kNoPage; prev = i, i = base[i].lru.next) {
          interruption_point();
          const auto at = [&] {
            return zn + "cpu " + std::to_string(pcp->cpu) + " pcp list " + std::to_string(pindex) + " pfn " +
                   std::to_string(z.zone_start_pfn + i) + ": ";
          };
          if (i >= z.spanned_pages || i % n || i + n > z.spanned_pages) {
            fail(at() + "block outside the zone or misaligned");
            break;
          }
          if (base[i].lru.prev != prev) fail(at() + "broken list links");
          if (PageBuddy(base[i])) fail(at() + "PageBuddy on a pcp list");
          if (base[i].index >= MIGRATE_TYPES) fail(at() + "bad pcp migratetype");
          for (uint64_t k = 0; k < n; ++k) {
            if (where[i + k] != kUnseen) {
              fail(at() + "page " + std::to_string(i + k) + " is in two places");
              break;
            }
            where[i + k] = kPcp;
          }
          pages += n;
        }
      }
      if (long(pages) != pcp->nr())
        fail(zn + "cpu " + std::to_string(pcp->cpu) + " pcp->count is " + std::to_string(pcp->nr()) +
             " but its lists hold " + std::to_string(pages));
      pcp_total += pages;
    }
    // 3. everything else is allocated, and must not look free
    uint64_t allocated = 0;
    for (uint64_t i = 0; i < z.spanned_pages; ++i) {
      if (i % pageblock_nr_pages == 0) interruption_point();
      if (where[i] == kUnseen) {
        ++allocated;
        if (PageBuddy(base[i]))
          fail(zn + "pfn " + std::to_string(z.zone_start_pfn + i) + " is PageBuddy but on no free list");
      }
    }
    // 4. isolation and bad pages
    long isolated_blocks = 0;
    for (uint64_t b = 0; b < (z.spanned_pages >> pageblock_order); ++b)
      if (is_migrate_isolate(z.pageblock_flags[b].load())) ++isolated_blocks;
    if (isolated_blocks != z.nr_isolate_pageblock.load())
      fail(zn + "nr_isolate_pageblock is " + std::to_string(z.nr_isolate_pageblock.load()) + " but " +
           std::to_string(isolated_blocks) + " pageblocks are MIGRATE_ISOLATE");
    if (z.nr_bad_pages.load())
      fail(zn + std::to_string(z.nr_bad_pages.load()) +
           " page(s) failed the struct page checks and were leaked (bad_page)");
    r.free_pages += free_counted + isolated_free;
    r.isolated_free_pages += isolated_free;
    r.pcp_pages += pcp_total;
    r.allocated_pages += allocated;
  }
  fail.close();
  return r;
}

}  // namespace alloclab::mm
