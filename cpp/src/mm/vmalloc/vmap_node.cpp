// vmap nodes and their size-class pools (see vmap_node.hpp): node_alloc(), node_pool_del_va(),
// node_pool_add_va(), decay_va_pool_node(), reclaim_list_global(). Linux v6.9+ mm/vmalloc.c.
#include "alloclab/mm/vmalloc/vmap_node.hpp"

#include "alloclab/mm/vmalloc/vmalloc.hpp"

namespace alloclab::vmalloc {

VmapNode::VmapNode(LockDomain& d, bool v67_shape)
    : busy_lock(d, v67_shape ? "vmap_area_lock" : "vn->busy.lock"),
      lazy_lock(d, v67_shape ? "purge_vmap_area_lock" : "vn->lazy.lock"),
      pool_lock(d, "vn->pool_lock") {}

VmapArea* VmallocSpace::node_alloc(VmapCpu& c, unsigned long size, unsigned long align, unsigned long vstart,
                                   unsigned long vend, unsigned long* addr, unsigned* vn_id) {
  *vn_id = 0;
  *addr = vend;
  // Fall back to the global heap outside VMALLOC_START..VMALLOC_END or with one node (and, in the model, with
  // the pools switched off).
  if (vstart != cfg_.vstart || vend != cfg_.vend || nr_vmap_nodes_ == 1 || !cfg_.pools) return nullptr;
  const unsigned id = unsigned(c.cpu) % nr_vmap_nodes_;  // raw_smp_processor_id() % nr_vmap_nodes
  VmapArea* va = node_pool_del_va(c, nodes_[id].get(), size, align, vstart, vend);
  *vn_id = encode_vn_id(id);
  if (va) {
    *addr = va->va_start;
    ++c.st.pool_hits;
  } else {
    ++c.st.pool_misses;
  }
  return va;
}

VmapArea* VmallocSpace::node_pool_del_va(VmapCpu& c, VmapNode* vn, unsigned long size, unsigned long align,
                                         unsigned long vstart, unsigned long vend) {
  VmapPool* vp = size_to_va_pool(vn, size);
  if (!vp) return nullptr;
  vcost::touch(&vp->len, false);
  if (vp->len.load(std::memory_order_relaxed) == 0) return nullptr;  // list_empty() without the lock
  VmapArea* va = nullptr;
  ScopedLock g(vn->pool_lock);
  ++c.st.pool_lock;
  touch(vn->pool_last_cpu, c);
  if (!vp->head.empty()) {
    va = va_of_list(vp->head.next);
    if (IS_ALIGNED(va->va_start, align)) {
      const bool err = va_size(va) != size || va->va_start < vstart || va->va_end > vend;
      if (!err) {
        vcost::touch(&vp->head, true);
        vcost::touch(va_line(va), true);
        list_del_init(&va->list);
        vcost::touch(&vp->len, true);
        vp->len.store(vp->len.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      } else {
        va = nullptr;  // WARN_ON_ONCE in the kernel
      }
    } else {
      vcost::touch(&vp->head, true);
      vcost::touch(va_line(va), true);
      list_move_tail(&va->list, &vp->head);
      va = nullptr;
    }
  }
  return va;
}

bool VmallocSpace::node_pool_add_va(VmapCpu& c, VmapNode* vn, VmapArea* va) {
  VmapPool* vp = size_to_va_pool(vn, va_size(va));
  if (!vp) return false;
  ScopedLock g(vn->pool_lock);
  ++c.st.pool_lock;
  touch(vn->pool_last_cpu, c);
  vcost::touch(&vp->head, true);
  vcost::touch(va_line(va), true);
  list_add(&va->list, &vp->head);
  vcost::touch(&vp->len, true);
  vp->len.store(vp->len.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return true;
}

void VmallocSpace::decay_va_pool_node(VmapCpu& c, VmapNode* vn, bool full_decay) {
  VaTree decay;  // decay_root + decay_list: a local tree where decayed areas coalesce first
  for (unsigned i = 0; i < MAX_VA_SIZE_PAGES; ++i) {
    VmapPool& vp = vn->pool[i];
    vcost::touch(&vp.len, false);
    if (vp.len.load(std::memory_order_relaxed) == 0) continue;
    ListHead tmp_list;
    unsigned long pool_len, n_decay;
    {
      // Detach the pool, so no one can use it meanwhile.
      ScopedLock g(vn->pool_lock);
      ++c.st.pool_lock;
      touch(vn->pool_last_cpu, c);
      vcost::touch(&vp.head, true);
      list_replace_init(&vp.head, &tmp_list);
      vcost::touch(&vp.len, true);
      pool_len = n_decay = vp.len.load(std::memory_order_relaxed);
      vp.len.store(0, std::memory_order_relaxed);
    }
    // Decay a pool by ~25 % of what is left in it.
    if (!full_decay) n_decay >>= 2;
    pool_len -= n_decay;
    for (ListHead *p = tmp_list.next, *n = p->next; p != &tmp_list; p = n, n = p->next) {
      if (!n_decay--) break;
      VmapArea* va = va_of_list(p);
      vcost::touch(va_line(va), true);
      list_del_init(&va->list);
      merge_or_add_vmap_area(c, va, decay);
      ++c.st.decayed_areas;
    }
    // Attach the rest back: only a purge (which holds vmap_purge_lock, as we do) repopulates a pool.
    if (!tmp_list.empty()) {
      ScopedLock g(vn->pool_lock);
      ++c.st.pool_lock;
      touch(vn->pool_last_cpu, c);
      vcost::touch(&vp.head, true);
      list_replace_init(&tmp_list, &vp.head);
      vcost::touch(&vp.len, true);
      vp.len.store(pool_len, std::memory_order_relaxed);
    }
  }
  reclaim_list_global(c, &decay.head);
}

void VmallocSpace::reclaim_list_global(VmapCpu& c, ListHead* head) {
  if (head->empty()) return;
  ScopedLock g(free_lock_);
  ++c.st.free_lock_purge;
  touch(free_last_cpu_, c);
  // As the kernel: the entries are re-linked into the free tree while `head` is walked (its links are not
  // looked at again), and an entry that coalesces is freed.
  for (ListHead *p = head->next, *n = p->next; p != head; p = n, n = p->next)
    merge_or_add_vmap_area_augment(c, va_of_list(p), free_);
  INIT_LIST_HEAD(head);
}

}  // namespace alloclab::vmalloc
