// VmapCpu: the per-CPU state mm/vmalloc.c keeps (ne_fit_preload_node) plus the model's per-CPU event counters,
// and the vmap_area_cachep slab (kmem_cache_alloc / kmem_cache_free of struct vmap_area).
//
// Models Linux v6.9+: DEFINE_PER_CPU(struct vmap_area *, ne_fit_preload_node) and preload_this_cpu_lock(), which
// preloads one object *before* taking free_vmap_area_lock so that an NE_FIT_TYPE split never allocates under
// the lock. raw_smp_processor_id() is `cpu`, the worker's model PU (it picks the vmap_node pool).
// One VmapCpu per worker thread (not per model PU: two workers may share a model PU in an oversubscribed run, and
// per-CPU data is only safe for one running context at a time). Counters are plain integers written by their own
// thread and summed after the threads have been joined (no shared counters on the hot path).
// Leaves out: the slab itself (objects come from operator new, with a small per-CPU LIFO of freed objects as the
// slab's per-CPU cache), GFP flags, memory-pressure failure of kmem_cache_alloc.
#pragma once

#include <cstdint>
#include <new>

#include "alloclab/mm/vmalloc/vmap_area.hpp"

namespace alloclab::vmalloc {

// fit_type of va_clip()/classify_va_fit_type().
enum FitType : unsigned { NOTHING_FIT = 0, FL_FIT_TYPE = 1, LE_FIT_TYPE = 2, RE_FIT_TYPE = 3, NE_FIT_TYPE = 4 };

struct VmallocStats {
  // __get_vm_area_node() / vfree()
  uint64_t allocs = 0;          // successful allocations
  uint64_t alloc_failures = 0;  // "vmalloc_node_range for size %lu failed: Address range full"
  uint64_t frees = 0;           // remove_vm_area() that found its area
  // Lock acquisitions per site (the lock_stat class holds the sum of the sites).
  uint64_t busy_lock_alloc = 0;  // alloc path: insert_vmap_area (+ setup_vmalloc_vm with busy_lock=twice)
  uint64_t busy_lock_setup = 0;  // of which setup_vmalloc_vm()
  uint64_t busy_lock_free = 0;   // find_unlink_vmap_area()
  uint64_t free_lock_alloc = 0;  // free_vmap_area_lock in alloc_vmap_area()
  uint64_t free_lock_purge = 0;  // free_vmap_area_lock in purge / pool decay / reclaim_list_global()
  uint64_t pool_lock = 0;        // vn->pool_lock, every site
  uint64_t lazy_lock = 0;        // vn->lazy.lock (v6.9+) / purge_vmap_area_lock (v6.7), every site
  uint64_t purge_lock = 0;       // vmap_purge_lock
  // node_alloc(): hits need no free_vmap_area_lock at all.
  uint64_t pool_hits = 0, pool_misses = 0;
  // The free tree.
  uint64_t searches = 0, search_steps = 0;  // find_vmap_lowest_match() calls and nodes visited
  uint64_t fit[5] = {};                     // va_clip() by FitType
  uint64_t merges = 0;                      // merge_or_add_vmap_area() calls that coalesced
  // Lazy free and purge.
  uint64_t drains = 0;           // drain_vmap_area_work() runs (lazy pages above lazy_max_pages)
  uint64_t overflow_purges = 0;  // reclaim_and_purge_vmap_areas() on an allocation that found no space
  uint64_t purges = 0;           // __purge_vmap_area_lazy() calls that found lazy areas
  uint64_t purged_areas = 0, purged_pages = 0;
  uint64_t tlb_flushes = 0;    // flush_tlb_kernel_range()
  uint64_t decayed_areas = 0;  // pool entries returned to the free tree by decay_va_pool_node()
  // vmap_area objects (the vmap_area_cachep slab) allocated and freed by this CPU.
  uint64_t va_objs_alloc = 0, va_objs_free = 0;
  // find_va_links() found an overlap ("vmalloc bug: ... overlaps with ..."): must stay 0.
  uint64_t overlap_warnings = 0;

  VmallocStats& operator+=(const VmallocStats& o);
};

struct alignas(64) VmapCpu {
  int cpu = 0;                              // raw_smp_processor_id(): the model PU
  VmapArea* ne_fit_preload_node = nullptr;  // this CPU's preloaded object for an NE split
  VmallocStats st;
  // The slab's per-CPU object cache (a LIFO of freed vmap_area objects linked through their first word).
  VmapArea* cache = nullptr;
  unsigned cache_len = 0;

  VmapCpu() = default;
  VmapCpu(VmapCpu&& o) noexcept : cpu(o.cpu), ne_fit_preload_node(o.ne_fit_preload_node), st(o.st) {
    cache = o.cache;
    cache_len = o.cache_len;
    o.ne_fit_preload_node = o.cache = nullptr;
    o.cache_len = 0;
  }
  VmapCpu(const VmapCpu&) = delete;
  VmapCpu& operator=(const VmapCpu&) = delete;
  ~VmapCpu() {
    delete ne_fit_preload_node;
    while (cache) {
      VmapArea* next = *reinterpret_cast<VmapArea**>(cache);
      delete cache;
      cache = next;
    }
  }
};

inline constexpr unsigned VA_CACHE_MAX = 256;

// kmem_cache_alloc(vmap_area_cachep) / kmem_cache_free(): from / to this CPU's object cache when possible.
inline VmapArea* kmem_cache_alloc_va(VmapCpu& c) {
  ++c.st.va_objs_alloc;
  if (VmapArea* va = c.cache) {
    c.cache = *reinterpret_cast<VmapArea**>(va);
    --c.cache_len;
    return new (va) VmapArea;
  }
  return new VmapArea;
}
inline void kmem_cache_free_va(VmapCpu& c, VmapArea* va) {
  ++c.st.va_objs_free;
  if (c.cache_len < VA_CACHE_MAX) {
    va->~VmapArea();
    *reinterpret_cast<VmapArea**>(va) = c.cache;
    c.cache = va;
    ++c.cache_len;
    return;
  }
  delete va;
}

}  // namespace alloclab::vmalloc
