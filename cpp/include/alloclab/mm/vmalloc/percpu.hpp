// VmapCpu: the per-CPU state mm/vmalloc.c keeps (ne_fit_preload_node) plus the model's per-CPU event counters,
// and the vmap_area_cachep slab (kmem_cache_alloc / kmem_cache_free of struct vmap_area).
//
// Models Linux v6.9+: DEFINE_PER_CPU(struct vmap_area *, ne_fit_preload_node) and preload_this_cpu_lock(), which
// preloads one object *before* taking free_vmap_area_lock so that an NE_FIT_TYPE split never allocates under
// the lock. raw_smp_processor_id() is `cpu`, the worker's model PU (it picks the vmap_node pool).
// One VmapCpu per worker thread (not per model PU: two workers may share a model PU in an oversubscribed run, and
// per-CPU data is only safe for one running context at a time). Counters are plain integers written by their own
// thread and summed after the threads have been joined (no shared counters on the hot path).
// The slabs are KmemCache's (kmem_cache.hpp): every context's caches live as long as its VmallocSpace.
// Leaves out: GFP flags, memory-pressure failure of kmem_cache_alloc.
#pragma once

#include <cstdint>
#include <new>

#include "alloclab/base/counters.hpp"
#include "alloclab/mm/vmalloc/kmem_cache.hpp"
#include "alloclab/mm/vmalloc/vmap_area.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab::vmalloc {

// fit_type of va_clip()/classify_va_fit_type().
enum FitType : unsigned { NOTHING_FIT = 0, FL_FIT_TYPE = 1, LE_FIT_TYPE = 2, RE_FIT_TYPE = 3, NE_FIT_TYPE = 4 };

#define ALLOCLAB_VMALLOC_STATS(X)                                                                                 \
  /* __get_vm_area_node() / vfree() */                                                                            \
  X(allocs, sum, "successful allocations")                                                                        \
  X(alloc_failures, sum, "'vmalloc_node_range for size %lu failed: Address range full'")                          \
  X(frees, sum, "remove_vm_area() calls that found their area")                                                   \
  /* lock acquisitions per site (the lock_stat class holds the sum of the sites) */                               \
  X(busy_lock_alloc, sum, "busy lock, alloc path: insert_vmap_area (+ setup_vmalloc_vm with busy_lock=twice)")    \
  X(busy_lock_setup, sum, "of which setup_vmalloc_vm()")                                                          \
  X(busy_lock_free, sum, "busy lock in find_unlink_vmap_area()")                                                  \
  X(busy_lock_find, sum, "busy lock in find_vmap_area() (find_vm_area(): fork.c's lookup of a fresh stack)")      \
  X(free_lock_alloc, sum, "free_vmap_area_lock in alloc_vmap_area()")                                             \
  X(free_lock_purge, sum, "free_vmap_area_lock in purge / pool decay / reclaim_list_global()")                    \
  X(pool_lock, sum, "vn->pool_lock, every site")                                                                  \
  X(lazy_lock_free, sum, "lazy lock (vn->lazy.lock / purge_vmap_area_lock) in free_vmap_area_noflush()")          \
  X(lazy_lock_purge, sum, "lazy lock in a purge: the lazy tree detached (v6.7: once per purge; v6.9+: per node)") \
  X(purge_lock, sum, "vmap_purge_lock")                                                                           \
  /* node_alloc(): hits need no free_vmap_area_lock at all */                                                     \
  X(pool_hits, sum, "allocations served from a vmap_node pool")                                                   \
  X(pool_misses, sum, "allocations the pools could not serve")                                                    \
  /* the free tree */                                                                                             \
  X(searches, sum, "find_vmap_lowest_match() calls")                                                              \
  X(search_steps, sum, "free-tree nodes they visited")                                                            \
  X(fit_nothing, sum, "va_clip() NOTHING_FIT")                                                                    \
  X(fit_fl, sum, "va_clip() FL_FIT_TYPE (the whole free area)")                                                   \
  X(fit_le, sum, "va_clip() LE_FIT_TYPE (its left edge)")                                                         \
  X(fit_re, sum, "va_clip() RE_FIT_TYPE (its right edge)")                                                        \
  X(fit_ne, sum, "va_clip() NE_FIT_TYPE (its middle: the area splits)")                                           \
  X(merges, sum, "merge_or_add_vmap_area() calls that coalesced")                                                 \
  /* lazy free and purge */                                                                                       \
  X(drains, sum, "drain_vmap_area_work() runs (lazy pages above lazy_max_pages)")                                 \
  X(overflow_purges, sum, "reclaim_and_purge_vmap_areas() on an allocation that found no space")                  \
  X(purges, sum, "__purge_vmap_area_lazy() calls that found lazy areas")                                          \
  X(purged_areas, sum, "areas they purged")                                                                       \
  X(purged_pages, sum, "pages they purged")                                                                       \
  X(tlb_flushes, sum, "flush_tlb_kernel_range()")                                                                 \
  X(decayed_areas, sum, "pool entries returned to the free tree by decay_va_pool_node()")                         \
  /* vmap_area objects (the vmap_area_cachep slab) allocated and freed by this CPU */                             \
  X(va_objs_alloc, sum, "vmap_area objects allocated")                                                            \
  X(va_objs_free, sum, "vmap_area objects freed")                                                                 \
  X(overlap_warnings, sum, "find_va_links() found an overlap ('vmalloc bug: ... overlaps with ...'): must stay 0")
struct VmallocStats {
  ALLOCLAB_COUNTERS(VmallocStats, ALLOCLAB_VMALLOC_STATS)
  // va_clip()'s count for a fit type.
  uint64_t& fit(FitType t) {
    uint64_t* by_type[] = {&fit_nothing, &fit_fl, &fit_le, &fit_re, &fit_ne};
    return *by_type[t];
  }
};

struct alignas(64) VmapCpu {
  int cpu = 0;                              // raw_smp_processor_id(): the model PU
  VmapArea* ne_fit_preload_node = nullptr;  // this CPU's preloaded object for an NE split
  VmallocStats st;
  KmemCache<VmapArea> va_cache;  // vmap_area_cachep on this CPU
  KmemCache<VmStruct> vm_cache;  // kzalloc()'s slab of struct vm_struct on this CPU
};

// kmem_cache_alloc(vmap_area_cachep) / kmem_cache_free() on this CPU. In a virtual-clock run each is a list_op on
// SLUB's per-CPU freelist that writes the object's line (va_line()): an object freed on another CPU comes with its
// line from there.
inline VmapArea* kmem_cache_alloc_va(VmapCpu& c) {
  ++c.st.va_objs_alloc;
  VmapArea* va = c.va_cache.alloc();
  vcost::charge(Op::list_op);
  vcost::touch(va_line(va), true);
  return va;
}
inline void kmem_cache_free_va(VmapCpu& c, VmapArea* va) {
  ++c.st.va_objs_free;
  vcost::charge(Op::list_op);
  vcost::touch(va_line(va), true);
  c.va_cache.free(va);
}

}  // namespace alloclab::vmalloc
