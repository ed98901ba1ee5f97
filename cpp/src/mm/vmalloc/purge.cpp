// Lazy free and purge: free_vmap_area_noflush(), drain_vmap_area_work(), reclaim_and_purge_vmap_areas(),
// __purge_vmap_area_lazy(), purge_vmap_node() (see vmalloc.hpp).
//
// Models Linux v6.9+ (per-node lazy trees, purge back to the per-node pools or the free tree) and v6.7 (one
// purge_vmap_area_root where lazily freed areas coalesce, purged straight into the free tree under one
// free_vmap_area_lock section) — the v6.7 path is taken when nr_vmap_nodes = 1.
// Leaves out: the purge_work kworker helpers (nr_purge_helpers: here the purging CPU walks every node itself),
// kasan_release_vmalloc, cond_resched_lock, the vmap_notify_list, purge_fragmented_blocks_allcpus (no vmap
// blocks), and the asynchronous drain: the CPU whose free pushes vmap_lazy_nr over lazy_max_pages() runs the
// drain itself, and a drain is never queued twice (drain_pending_ plays the work item's PENDING bit).
#include <algorithm>
#include <climits>

#include "alloclab/mm/vmalloc/vmalloc.hpp"

namespace alloclab::vmalloc {

void VmallocSpace::free_vmap_area_noflush(VmapCpu& c, VmapArea* va) {
  if (!va->list.empty()) throw std::logic_error("free_vmap_area_noflush: area still on a list");
  const unsigned long nr = (va->va_end - va->va_start) >> PAGE_SHIFT;
  vcost::rmw(&vmap_lazy_nr_);
  const unsigned long nr_lazy = vmap_lazy_nr_.fetch_add(nr, std::memory_order_relaxed) + nr;

  if (v67_shape()) {
    // v6.7: merge or place it into the purge tree/list.
    VmapNode* vn = nodes_[0].get();
    ScopedLock g(vn->lazy_lock);
    ++c.st.lazy_lock_free;
    touch(vn->lazy_last_cpu, c);
    merge_or_add_vmap_area(c, va, vn->lazy);
    vcost::touch(&vn->lazy_count, true);
    vn->lazy_count.store(1, std::memory_order_relaxed);
  } else {
    // v6.9+: back to the node it was requested on (so a purge refills that node's pool), else by address.
    const unsigned vn_id = decode_vn_id(va->flags);
    VmapNode* vn = is_vn_id_valid(vn_id) ? nodes_[vn_id].get() : addr_to_node(va->va_start);
    ScopedLock g(vn->lazy_lock);
    ++c.st.lazy_lock_free;
    touch(vn->lazy_last_cpu, c);
    insert_vmap_area(c, va, vn->lazy);
    vcost::touch(&vn->lazy_count, true);
    vn->lazy_count.store(vn->lazy_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // After this point the area may be freed at any time. schedule_work(&drain_vmap_work): a work item whose PENDING
  // bit is set is not queued again.
  if (nr_lazy <= lazy_max_pages_) return;
  vcost::touch(&drain_pending_, false);
  if (drain_pending_.load(std::memory_order_relaxed)) return;
  vcost::rmw(&drain_pending_);
  if (drain_pending_.exchange(true, std::memory_order_acq_rel)) return;
  ++c.st.drains;
  purge_vmap_area_lazy(c);  // drain_vmap_area_work()
  vcost::touch(&drain_pending_, true);
  drain_pending_.store(false, std::memory_order_release);
}

void VmallocSpace::purge_vmap_area_lazy(VmapCpu& c) {
  ScopedLock g(purge_lock_);
  ++c.st.purge_lock;
  purge_lazy_locked(c, false);
}

void VmallocSpace::reclaim_and_purge_vmap_areas(VmapCpu& c) {
  ScopedLock g(purge_lock_);
  ++c.st.purge_lock;
  purge_lazy_locked(c, true);
}

void VmallocSpace::flush_tlb_kernel_range(VmapCpu& c, unsigned long, unsigned long) {
  ++c.st.tlb_flushes;
  spin_for_ticks(tlb_ticks_);
}

bool VmallocSpace::purge_lazy_locked(VmapCpu& c, bool full_pool_decay) {
  unsigned long start = ULONG_MAX, end = 0;
  uint64_t nr_purged_areas = 0;

  if (v67_shape()) {
    VmapNode* vn = nodes_[0].get();
    ListHead local_purge_list;
    {
      ScopedLock g(vn->lazy_lock);
      ++c.st.lazy_lock_purge;
      touch(vn->lazy_last_cpu, c);
      vn->lazy.root = RbRoot{};
      vcost::touch(&vn->lazy.head, true);
      list_replace_init(&vn->lazy.head, &local_purge_list);
      vn->lazy_count.store(0, std::memory_order_relaxed);
    }
    if (local_purge_list.empty()) return false;
    start = std::min(start, va_of_list(local_purge_list.next)->va_start);
    end = std::max(end, va_of_list(local_purge_list.prev)->va_end);
    flush_tlb_kernel_range(c, start, end);
    unsigned long nr_pages = 0;
    {
      ScopedLock g(free_lock_);
      ++c.st.free_lock_purge;
      touch(free_last_cpu_, c);
      for (ListHead *p = local_purge_list.next, *n = p->next; p != &local_purge_list; p = n, n = p->next) {
        VmapArea* va = va_of_list(p);
        const unsigned long nr = (va->va_end - va->va_start) >> PAGE_SHIFT;
        if (!merge_or_add_vmap_area_augment(c, va, free_)) continue;
        nr_pages += nr;
        ++nr_purged_areas;
      }
    }
    INIT_LIST_HEAD(&local_purge_list);
    vcost::rmw(&vmap_lazy_nr_);
    vmap_lazy_nr_.fetch_sub(nr_pages, std::memory_order_relaxed);
    c.st.purged_pages += nr_pages;
  } else {
    std::vector<VmapNode*> purge_nodes;
    for (auto& np : nodes_) {
      VmapNode* vn = np.get();
      INIT_LIST_HEAD(&vn->purge_list);
      vn->skip_populate = full_pool_decay;
      decay_va_pool_node(c, vn, full_pool_decay);
      vcost::touch(&vn->lazy_count, false);
      if (vn->lazy_count.load(std::memory_order_relaxed) == 0) continue;  // RB_EMPTY_ROOT(&vn->lazy.root)
      {
        ScopedLock g(vn->lazy_lock);
        ++c.st.lazy_lock_purge;
        touch(vn->lazy_last_cpu, c);
        vn->lazy.root = RbRoot{};
        vcost::touch(&vn->lazy.head, true);
        list_replace_init(&vn->lazy.head, &vn->purge_list);
        vn->lazy_count.store(0, std::memory_order_relaxed);
      }
      if (vn->purge_list.empty()) continue;
      start = std::min(start, va_of_list(vn->purge_list.next)->va_start);
      end = std::max(end, va_of_list(vn->purge_list.prev)->va_end);
      purge_nodes.push_back(vn);
    }
    if (!purge_nodes.empty()) {
      flush_tlb_kernel_range(c, start, end);
      for (VmapNode* vn : purge_nodes) {
        purge_vmap_node(c, vn);
        nr_purged_areas += vn->nr_purged;
      }
    }
  }
  if (nr_purged_areas) {
    ++c.st.purges;
    c.st.purged_areas += nr_purged_areas;
  }
  return nr_purged_areas > 0;
}

void VmallocSpace::purge_vmap_node(VmapCpu& c, VmapNode* vn) {
  unsigned long nr_purged_pages = 0;
  ListHead local_list;
  vn->nr_purged = 0;
  for (ListHead *p = vn->purge_list.next, *n = p->next; p != &vn->purge_list; p = n, n = p->next) {
    VmapArea* va = va_of_list(p);
    const unsigned long nr = (va->va_end - va->va_start) >> PAGE_SHIFT;
    const unsigned vn_id = decode_vn_id(va->flags);
    vcost::touch(va_line(va), true);
    list_del_init(&va->list);
    nr_purged_pages += nr;
    ++vn->nr_purged;
    if (is_vn_id_valid(vn_id) && !vn->skip_populate && node_pool_add_va(c, vn, va)) continue;
    list_add(&va->list, &local_list);  // back to the global free tree
  }
  vcost::rmw(&vmap_lazy_nr_);
  vmap_lazy_nr_.fetch_sub(nr_purged_pages, std::memory_order_relaxed);
  c.st.purged_pages += nr_purged_pages;
  reclaim_list_global(c, &local_list);
}

}  // namespace alloclab::vmalloc
