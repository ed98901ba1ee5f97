// Free vmalloc space: the lowest-fit search over the augmented free tree and the clipping of the found area.
//
// Models Linux v6.9+ mm/vmalloc.c (unchanged in substance since Uladzislau Rezki's v5.2 rewrite):
//   * find_vmap_lowest_match(): an O(log n) descent that goes left whenever the left subtree's subtree_max_size
//     can hold the search length and the left side is not below vstart, otherwise tries this area
//     (is_within_this_va(), which honours alignment), then the right subtree, and finally climbs back to the
//     first ancestor whose right subtree can hold it. The search length is size + align - 1 when align >
//     PAGE_SIZE (so any area of that length fits whatever its alignment), else size.
//   * find_vmap_lowest_linear_match(): the O(n) list walk the kernel keeps for DEBUG_AUGMENT_LOWEST_MATCH_CHECK.
//   * classify_va_fit_type() / va_clip(): FL_FIT_TYPE (the request takes the whole area: unlink and free it),
//     LE_FIT_TYPE (left edge: va_start += size), RE_FIT_TYPE (right edge: va_end = nva_start_addr),
//     NE_FIT_TYPE (no edge: split, the left remainder uses this CPU's preloaded ne_fit_preload_node), then
//     augment_tree_propagate_from().
//   * __alloc_vmap_area(): search + vend check + clip.
// All run under free_vmap_area_lock (taken by the caller).
// Leaves out: nothing of the algorithm; kmem_cache_alloc(GFP_NOWAIT) of an NE object never fails here.
#pragma once

#include "alloclab/mm/vmalloc/va_tree.hpp"

namespace alloclab::vmalloc {

bool is_within_this_va(const VmapArea* va, unsigned long size, unsigned long align, unsigned long vstart);

// The lowest free area that can hold `size` at `align` at or after vstart, or null. Counts the nodes visited in
// c.st.search_steps.
VmapArea* find_vmap_lowest_match(VmapCpu& c, const RbRoot* root, unsigned long size, unsigned long align,
                                 unsigned long vstart, bool adjust_search_size);
VmapArea* find_vmap_lowest_linear_match(const ListHead* head, unsigned long size, unsigned long align,
                                        unsigned long vstart);

FitType classify_va_fit_type(const VmapArea* va, unsigned long nva_start_addr, unsigned long size);
// Cuts [nva_start_addr, +size) out of free area `va`. Returns false (NOTHING_FIT) if it is not inside.
bool va_clip(VmapCpu& c, VaTree& free, VmapArea* va, unsigned long nva_start_addr, unsigned long size);

// __alloc_vmap_area(): the start of a fresh [addr, addr + size) in [vstart, vend) taken from the free tree, or
// `vend` when nothing fits (the kernel returns -ENOENT / -ERANGE; the caller's test is the same).
unsigned long alloc_from_free_tree(VmapCpu& c, VaTree& free, unsigned long size, unsigned long align,
                                   unsigned long vstart, unsigned long vend);

}  // namespace alloclab::vmalloc
