// hugetlb pool and boot-time allocation (see hugetlb.hpp). Models mm/hugetlb.c of v6.9 (Gang Li's v6 series as
// merged), with the pre-series variants selectable; gigantic folios are 1 GiB (order 18) with their full mem_map.
#include "alloclab/mm/hugetlb.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

#include "alloclab/base/clock.hpp"
#include "alloclab/kernel/padata.hpp"

namespace alloclab::mm {

namespace {

// page_ref_freeze(page, count): the refcount goes from `count` to 0, or nothing happens. An atomic cmpxchg that the
// caller charges: vcost::rmw for one page, atomic_rmw per page with the memory of a range.
bool page_ref_freeze(Page& p, int count) {
  int expected = count;
  return std::atomic_ref<int32_t>(p._refcount).compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

// htlb_alloc_mask(h): hugepage_movable_supported() is true for 2 MiB (migration supported, not gigantic).
gfp_t htlb_alloc_mask(const hstate& h) { return h.gigantic ? GFP_HIGHUSER : GFP_HIGHUSER_MOVABLE; }

int nodes_weight(const nodemask_t& m) { return int(std::count(m.begin(), m.end(), true)); }

// get_valid_node_allowed + next_node_allowed: the node to try now, and the cursor moved past it.
int hstate_next_node_to_alloc(std::atomic<int>& next_node, const nodemask_t& nodes_allowed) {
  vcost::touch(&next_node, false);
  int nid = next_node.load(std::memory_order_relaxed);
  if (nid < 0 || nid >= int(nodes_allowed.size()) || !nodes_allowed[size_t(nid)])
    nid = next_node_in(nid, nodes_allowed);
  vcost::touch(&next_node, true);
  next_node.store(next_node_in(nid, nodes_allowed), std::memory_order_relaxed);  // a plain int store in the kernel
  return nid;
}

}  // namespace

hstate::hstate(unsigned order_, bool gigantic_, int nr_nodes)
    : order(order_),
      gigantic(gigantic_),
      nr_huge_pages_node(size_t(nr_nodes), 0),
      free_huge_pages_node(size_t(nr_nodes), 0),
      hugepage_freelists(size_t(nr_nodes)) {}

std::string HugetlbCheck::summary() const {
  if (ok) return "ok: " + std::to_string(folios) + " folios, " + std::to_string(tails_checked) + " tails checked";
  std::string s = "hugetlb pool check failed:";
  for (const auto& e : errors) s += "\n  " + e;
  return s;
}

Hugetlb::Hugetlb(MemorySystem& ms, LockDomain& locks, HugetlbConfig cfg)
    : ms_(ms),
      cfg_(cfg),
      hugetlb_lock_(locks, "hugetlb_lock"),
      n_memory_(size_t(ms.nr_nodes()), false),
      h2m_(HUGETLB_PAGE_ORDER, false, ms.nr_nodes()),
      h1g_(HUGETLB_GIGANTIC_ORDER, true, ms.nr_nodes()),
      huge_boot_pages_(size_t(ms.nr_nodes())) {
  for (int n = 0; n < ms.nr_nodes(); ++n) n_memory_[size_t(n)] = ms.node_present_pages(n) > 0;
}

// ---- 2 MiB path ------------------------------------------------------------------------------------------------

void Hugetlb::hugetlb_pages_alloc_boot_node(hstate& h, unsigned long start, unsigned long end, int cpu,
                                            HugetlbThreadStats& st, const std::function<bool()>& stopped) {
  const unsigned long num = end - start;
  nodemask_t node_alloc_noretry(n_memory_.size(), false);  // how hard to retry per node
  std::vector<Page*> folio_list;
  folio_list.reserve(num);
  std::atomic<int> next_node{first_online_node()};
  std::atomic<int>& cursor = cfg_.next_nid == NextNid::local ? next_node : h.next_nid_to_alloc;
  for (unsigned long i = 0; i < num; ++i) {
    if (stopped && stopped()) break;  // cond_resched()
    Page* folio = alloc_pool_huge_folio(h, cpu, n_memory_, node_alloc_noretry, cursor, st);
    if (!folio) {
      ++st.alloc_failed;
      break;
    }
    folio_list.push_back(folio);  // list_move(&folio->lru, &folio_list)
    ++st.folios;
  }
  prep_and_add_allocated_folios(h, folio_list, st, stopped);
}

Page* Hugetlb::alloc_pool_huge_folio(hstate& h, int cpu, const nodemask_t& nodes_allowed,
                                     nodemask_t& node_alloc_noretry, std::atomic<int>& next_node,
                                     HugetlbThreadStats& st) {
  const gfp_t gfp_mask = htlb_alloc_mask(h) | __GFP_THISNODE;
  // for_each_node_mask_to_alloc(next_node, nr_nodes, node, nodes_allowed)
  for (int nr_nodes = nodes_weight(nodes_allowed); nr_nodes > 0; --nr_nodes) {
    const int node = hstate_next_node_to_alloc(next_node, nodes_allowed);
    ++st.node_attempts;
    if (Page* folio = only_alloc_fresh_hugetlb_folio(h, cpu, gfp_mask, node, node_alloc_noretry)) return folio;
  }
  return nullptr;
}

Page* Hugetlb::only_alloc_fresh_hugetlb_folio(hstate& h, int cpu, gfp_t gfp_mask, int nid,
                                              nodemask_t& node_alloc_noretry) {
  // alloc_buddy_hugetlb_folio()
  const bool alloc_try_hard = !node_alloc_noretry[size_t(nid)];
  gfp_mask |= __GFP_COMP | __GFP_NOWARN;
  if (alloc_try_hard) gfp_mask |= __GFP_RETRY_MAYFAIL;
  bool retry = true;
  Page* page;
  for (;;) {
    page = ms_.alloc_pages(cpu, nid, h.order, gfp_mask);
    // Freeze head page.
    if (page) vcost::rmw(page);
    if (page && !page_ref_freeze(*page, 1)) {
      ms_.free_pages(cpu, page, h.order);
      if (retry) {  // retry once
        retry = false;
        continue;
      }
      page = nullptr;  // "HugeTLB head page unexpected inflated ref count"
    }
    break;
  }
  // A page without __GFP_RETRY_MAYFAIL means the state changed: try hard again. A hard failure: stop trying hard.
  if (page && !alloc_try_hard) node_alloc_noretry[size_t(nid)] = false;
  if (!page && alloc_try_hard) node_alloc_noretry[size_t(nid)] = true;
  if (!page) return nullptr;
  init_new_hugetlb_folio(h, page);
  return page;
}

void Hugetlb::init_new_hugetlb_folio(hstate&, Page* folio) {
  memmap_access(folio, 1, Stream::update);
  __folio_set_hugetlb(*folio);
  folio->lru.next = folio->lru.prev = kNoPage;  // INIT_LIST_HEAD(&folio->lru)
  folio->private_ = 0;                          // no HPG flags (subpool and cgroup pointers: not modelled)
}

void Hugetlb::hugetlb_vmemmap_optimize_folios(hstate&, std::vector<Page*>& folio_list,
                                              const std::function<bool()>& stopped) {
  if (cfg_.hvo_ns == 0) return;
  const uint64_t ticks = ns_to_ticks(cfg_.hvo_ns);
  const auto stop = [&stopped] { return stopped && stopped(); };
  for (Page* folio : folio_list) {
    spin_for_ticks(ticks, stop);  // vmemmap_remap_free(): remap the tail vmemmap pages onto the first one
    folio_set_hpg(*folio, HPG_vmemmap_optimized);
  }
}

void Hugetlb::__prep_account_new_huge_page(hstate& h, int nid) {
  vcost::touch(&h.nr_huge_pages, true);
  vcost::touch(&h.nr_huge_pages_node[size_t(nid)], true);
  h.nr_huge_pages++;
  h.nr_huge_pages_node[size_t(nid)]++;
}

void Hugetlb::enqueue_hugetlb_folio(hstate& h, Page* folio) {
  const int nid = page_to_nid(*folio);
  Zone& z = ms_.zone(nid);
  list_add(h.hugepage_freelists[size_t(nid)], z.zone_mem_map, z.page_idx(folio));
  vcost::touch(&h.free_huge_pages, true);
  vcost::touch(&h.free_huge_pages_node[size_t(nid)], true);
  h.free_huge_pages++;
  h.free_huge_pages_node[size_t(nid)]++;
  folio_set_hpg(*folio, HPG_freed);
}

void Hugetlb::prep_and_add_allocated_folios(hstate& h, std::vector<Page*>& folio_list, HugetlbThreadStats& st,
                                            const std::function<bool()>& stopped) {
  // Send list for bulk vmemmap optimization processing.
  hugetlb_vmemmap_optimize_folios(h, folio_list, stopped);
  if (cfg_.lock_mode == HugetlbLockMode::per_worker) {
    // Add all new pool pages to free lists in one lock cycle.
    LockGuard g(hugetlb_lock_);
    for (Page* folio : folio_list) {
      __prep_account_new_huge_page(h, page_to_nid(*folio));
      enqueue_hugetlb_folio(h, folio);
    }
  } else {
    for (Page* folio : folio_list) {
      LockGuard g(hugetlb_lock_);
      __prep_account_new_huge_page(h, page_to_nid(*folio));
      enqueue_hugetlb_folio(h, folio);
    }
  }
  folio_list.clear();
  ++st.lists_added;
}

// ---- gigantic path ---------------------------------------------------------------------------------------------

unsigned long Hugetlb::hugetlb_gigantic_pages_alloc_boot(hstate& h, unsigned long count, int cpu) {
  const int nr = nodes_weight(n_memory_);
  unsigned long i = 0;
  for (; i < count && nr > 0; ++i) {
    ms_.interruption_point();
    // alloc_bootmem_huge_page(h, NUMA_NO_NODE) -> __alloc_bootmem_huge_page: one node from the round-robin cursor;
    // memblock_alloc_try_nid_raw() itself falls back to any node.
    const int node = hstate_next_node_to_alloc(h.next_nid_to_alloc, n_memory_);
    Page* m = memblock_alloc_huge_range(h, node, cpu);
    for (int other = 0; !m && other < ms_.nr_nodes(); ++other)
      if (other != node && n_memory_[size_t(other)]) m = memblock_alloc_huge_range(h, other, cpu);
    if (!m) break;
    huge_boot_pages_[size_t(node)].push_back(m);  // list_add(&m->list, &huge_boot_pages[node])
  }
  return i;
}

Page* Hugetlb::memblock_alloc_huge_range(hstate& h, int nid, int cpu) {
  const uint64_t nr = h.pages_per_huge_page();
  // Movable so that the buddy stand-in leaves the pageblock types alone (memblock has none).
  const gfp_t gfp = __GFP_MOVABLE | __GFP_THISNODE | __GFP_NOWARN;
  std::vector<Page*> range, spare;  // the aligned run of blocks so far; blocks outside any aligned run
  while (range.size() * MAX_ORDER_NR_PAGES < nr) {
    Page* b = ms_.alloc_pages(cpu, nid, MAX_PAGE_ORDER, gfp);
    if (!b) break;
    const uint64_t pfn = ms_.page_to_pfn(b);
    if (range.empty() || pfn != ms_.page_to_pfn(range.back()) + MAX_ORDER_NR_PAGES) {
      spare.insert(spare.end(), range.begin(), range.end());
      range.clear();
      if (pfn % nr) {
        spare.push_back(b);
        continue;
      }
    }
    range.push_back(b);
  }
  Page* found = range.size() * MAX_ORDER_NR_PAGES == nr ? range.front() : nullptr;
  if (!found) spare.insert(spare.end(), range.begin(), range.end());
  for (Page* b : spare) ms_.free_pages(cpu, b, MAX_PAGE_ORDER);
  return found;
}

void Hugetlb::free_huge_range(hstate& h, Page* first, int cpu) {
  for (unsigned long b = 0; b < h.pages_per_huge_page(); b += MAX_ORDER_NR_PAGES) {
    set_page_count(first[b], 1);
    ms_.free_pages(cpu, first + b, MAX_PAGE_ORDER);
  }
}

uint64_t Hugetlb::hugetlb_folio_init_tail_vmemmap(Page* folio, unsigned long start_page, unsigned long end_page) {
  const int nid = page_to_nid(*folio);
  const int zone = page_zonenum(*folio);
  const uint64_t head = compound_head_value(ms_.page_to_pfn(folio));
  if (end_page > start_page) {  // each tail: __init_single_page, then page_ref_freeze's cmpxchg
    vcost::charge(Op::page_init, end_page - start_page);
    vcost::charge(Op::atomic_rmw, end_page - start_page);
    // Written before anything reads them (the cmpxchg finds each line just written): a store stream.
    memmap_access(folio + start_page, end_page - start_page, Stream::store);
  }
  for (unsigned long i = start_page; i < end_page; ++i) {
    Page& p = folio[i];
    // __init_single_page(page, pfn, zone, nid)
    std::memset(static_cast<void*>(&p), 0, sizeof(Page));
    p.flags = page_links(nid, zone);
    p._refcount = 1;   // init_page_count
    p._mapcount = -1;  // page_mapcount_reset
    // prep_compound_tail(head, i)
    p.mapping = TAIL_MAPPING;
    p.compound_head = head;
    p.private_ = 0;
    page_ref_freeze(p, 1);
  }
  return end_page > start_page ? end_page - start_page : 0;
}

uint64_t Hugetlb::hugetlb_folio_init_vmemmap(hstate& h, Page* folio, unsigned long nr_pages) {
  // Prepare folio head: __folio_clear_reserved (never set here), __folio_set_head, folio_ref_freeze(folio, 1).
  __set_bit(*folio, PG_head);
  vcost::rmw(folio);
  if (!page_ref_freeze(*folio, 1)) throw std::logic_error("hugetlb: a bootmem folio's head refcount is not 1");
  const uint64_t n = hugetlb_folio_init_tail_vmemmap(folio, 1, nr_pages);
  folio[1].index = h.order;  // prep_compound_head(): folio_set_order
  return n;
}

void Hugetlb::gather_bootmem_prealloc_node(int nid, HugetlbThreadStats& st, const std::function<bool()>& stopped) {
  hstate& h = h1g_;
  std::vector<Page*>& boot = huge_boot_pages_.at(size_t(nid));  // only this node's worker touches it
  std::vector<Page*> folio_list;
  folio_list.reserve(boot.size());
  size_t k = 0;
  for (; k < boot.size(); ++k) {
    if (stopped && stopped()) break;  // cond_resched()
    Page* folio = boot[k];
    st.tails_written += hugetlb_folio_init_vmemmap(h, folio, HUGETLB_VMEMMAP_RESERVE_PAGES);
    init_new_hugetlb_folio(h, folio);
    folio_list.push_back(folio);
    ++st.folios;
  }
  boot.erase(boot.begin(), boot.begin() + long(k));
  prep_and_add_bootmem_folios(h, folio_list, st, stopped);
}

void Hugetlb::prep_and_add_bootmem_folios(hstate& h, std::vector<Page*>& folio_list, HugetlbThreadStats& st,
                                          const std::function<bool()>& stopped) {
  // Send list for bulk vmemmap optimization processing.
  hugetlb_vmemmap_optimize_folios(h, folio_list, stopped);
  auto init_rest = [&](Page* folio) {
    // If HVO fails (or is off), initialize all tail struct pages.
    if (!folio_test_hpg(*folio, HPG_vmemmap_optimized))
      st.tails_written +=
          hugetlb_folio_init_tail_vmemmap(folio, HUGETLB_VMEMMAP_RESERVE_PAGES, h.pages_per_huge_page());
  };
  if (cfg_.lock_mode == HugetlbLockMode::per_folio) {
    for (Page* folio : folio_list) {
      init_rest(folio);
      // Subdivide locks to achieve better parallel performance.
      LockGuard g(hugetlb_lock_);
      __prep_account_new_huge_page(h, page_to_nid(*folio));
      enqueue_hugetlb_folio(h, folio);
    }
  } else {
    // v6.7: add all new pool pages to free lists in one lock cycle (the tail initialisation inside it).
    LockGuard g(hugetlb_lock_);
    for (Page* folio : folio_list) {
      init_rest(folio);
      __prep_account_new_huge_page(h, page_to_nid(*folio));
      enqueue_hugetlb_folio(h, folio);
    }
  }
  folio_list.clear();
  ++st.lists_added;
}

// ---- teardown ---------------------------------------------------------------------------------------------------

Page* Hugetlb::dequeue_any(hstate& h, int nid) {
  PageList& l = h.hugepage_freelists[size_t(nid)];
  if (l.empty()) return nullptr;
  Zone& z = ms_.zone(nid);
  const uint32_t i = l.head();
  list_del(l, z.zone_mem_map, i);
  Page* folio = z.idx_page(i);
  // remove_hugetlb_folio()
  h.free_huge_pages--;
  h.free_huge_pages_node[size_t(nid)]--;
  h.nr_huge_pages--;
  h.nr_huge_pages_node[size_t(nid)]--;
  folio_clear_hpg(*folio, HPG_freed);
  return folio;
}

void Hugetlb::update_and_free_hugetlb_folio(hstate& h, Page* folio, int cpu) {
  // __update_and_free_hugetlb_folio(): hugetlb_vmemmap_restore_folio (cost not modelled), clear the type.
  __folio_clear_hugetlb(*folio);
  folio->private_ = 0;
  if (h.gigantic) {
    // destroy_compound_gigantic_folio(): tails lose their head, the head its PG_head and order.
    const unsigned long n = h.pages_per_huge_page();
    for (unsigned long i = 1; i < n; ++i) {
      Page& p = folio[i];
      if (!PageTail(p)) continue;  // never initialised (HVO kept them remapped)
      p.mapping = 0;
      p.compound_head = 0;  // clear_compound_head
      p.lru.next = p.lru.prev = kNoPage;
      p.private_ = 0;
    }
    folio[1].index = 0;  // folio_set_order(folio, 0)
    __clear_bit(*folio, PG_head);
    free_huge_range(h, folio, cpu);  // free_contig_range()
    return;
  }
  set_page_count(*folio, 1);  // folio_ref_unfreeze(folio, 1)
  ms_.free_pages(cpu, folio, h.order);
}

unsigned long Hugetlb::free_pool(hstate& h, int cpu) {
  unsigned long freed = 0;
  for (int nid = 0; nid < ms_.nr_nodes(); ++nid) {
    for (;;) {
      ms_.interruption_point();
      Page* folio;
      {
        LockGuard g(hugetlb_lock_);
        folio = dequeue_any(h, nid);
      }
      if (!folio) break;
      update_and_free_hugetlb_folio(h, folio, cpu);
      ++freed;
    }
  }
  if (h.gigantic) {
    for (auto& boot : huge_boot_pages_) {
      for (Page* m : boot) free_huge_range(h, m, cpu);  // never gathered (a stopped run): raw blocks
      boot.clear();
    }
  }
  h.max_huge_pages = 0;
  return freed;
}

// ---- checks ---------------------------------------------------------------------------------------------------

HugetlbCheck Hugetlb::check_pool(const hstate& h) const {
  HugetlbCheck c;
  c.per_node.assign(size_t(ms_.nr_nodes()), 0);
  size_t dropped = 0;
  auto fail = [&](const std::string& e) {
    c.ok = false;
    if (c.errors.size() < 20)
      c.errors.push_back(e);
    else
      ++dropped;
  };
  const unsigned long n = h.pages_per_huge_page();
  for (int nid = 0; nid < ms_.nr_nodes(); ++nid) {
    const Zone& z = ms_.zone(nid);
    const Page* base = z.zone_mem_map;
    const std::string zn = "node " + std::to_string(nid) + ": ";
    std::unordered_set<uint32_t> seen;
    uint32_t prev = kNoPage;
    const uint64_t max_folios = z.spanned_pages / n + 1;
    for (uint32_t i = h.hugepage_freelists[size_t(nid)].head(); i != kNoPage; prev = i, i = base[i].lru.next) {
      ms_.interruption_point();
      const auto at = [&] { return zn + "folio at pfn " + std::to_string(z.zone_start_pfn + i) + ": "; };
      if (i >= z.spanned_pages || i + n > z.spanned_pages) {
        fail(at() + "outside the zone");
        break;
      }
      if (!seen.insert(i).second || seen.size() > max_folios) {
        fail(at() + "on the free list twice");
        break;
      }
      if (base[i].lru.prev != prev) fail(at() + "broken list links");
      const Page* folio = base + i;
      const uint64_t pfn = z.zone_start_pfn + i;
      if (pfn % n) fail(at() + "not aligned to its order");
      if (!PageHead(*folio)) fail(at() + "not a compound head");
      if (!folio_test_hugetlb(*folio)) fail(at() + "not PG_hugetlb");
      if (page_ref_count(*folio) != 0) fail(at() + "refcount " + std::to_string(page_ref_count(*folio)) + ", not 0");
      if (!folio_test_hpg(*folio, HPG_freed)) fail(at() + "HPG_freed not set");
      if (folio_order(folio) != h.order) fail(at() + "order " + std::to_string(folio_order(folio)));
      if (page_to_nid(*folio) != nid) fail(at() + "belongs to node " + std::to_string(page_to_nid(*folio)));
      // With HVO the kernel remaps the gigantic tails past the first 64 (never written); 2 MiB tails were all
      // written by prep_compound_page before HVO.
      const unsigned long written =
          h.gigantic && folio_test_hpg(*folio, HPG_vmemmap_optimized) ? HUGETLB_VMEMMAP_RESERVE_PAGES : n;
      const uint64_t head = compound_head_value(pfn);
      for (unsigned long t = 1; t < written; ++t) {
        const Page& p = folio[t];
        if (p.compound_head != head || p.mapping != TAIL_MAPPING || page_ref_count(p) != 0) {
          fail(at() + "tail " + std::to_string(t) + " does not point to the head");
          break;
        }
      }
      c.tails_checked += written - 1;
      c.per_node[size_t(nid)]++;
    }
    if (c.per_node[size_t(nid)] != h.free_huge_pages_node[size_t(nid)])
      fail(zn + "free_huge_pages_node is " + std::to_string(h.free_huge_pages_node[size_t(nid)]) +
           " but the free list holds " + std::to_string(c.per_node[size_t(nid)]));
    if (h.nr_huge_pages_node[size_t(nid)] != h.free_huge_pages_node[size_t(nid)])
      fail(zn + "nr_huge_pages_node " + std::to_string(h.nr_huge_pages_node[size_t(nid)]) +
           " != free_huge_pages_node " + std::to_string(h.free_huge_pages_node[size_t(nid)]) +
           " (no folio is in use at boot)");
    c.folios += c.per_node[size_t(nid)];
  }
  if (c.folios != h.free_huge_pages || h.nr_huge_pages != h.free_huge_pages)
    fail("free lists hold " + std::to_string(c.folios) + " folios, free_huge_pages " +
         std::to_string(h.free_huge_pages) + ", nr_huge_pages " + std::to_string(h.nr_huge_pages));
  if (dropped) c.errors.push_back("... and " + std::to_string(dropped) + " more");
  return c;
}

}  // namespace alloclab::mm
