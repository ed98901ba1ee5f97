// Lowest-fit search and va_clip over the augmented free tree (see free_space.hpp).
#include "alloclab/mm/vmalloc/free_space.hpp"

namespace alloclab::vmalloc {

bool is_within_this_va(const VmapArea* va, unsigned long size, unsigned long align, unsigned long vstart) {
  const unsigned long nva_start_addr = va->va_start > vstart ? ALIGN(va->va_start, align) : ALIGN(vstart, align);
  // Can overflow with a big size or alignment.
  if (nva_start_addr + size < nva_start_addr || nva_start_addr < vstart) return false;
  return nva_start_addr + size <= va->va_end;
}

VmapArea* find_vmap_lowest_match(VmapCpu& c, const RbRoot* root, unsigned long size, unsigned long align,
                                 unsigned long vstart, bool adjust_search_size) {
  const unsigned long length = adjust_search_size ? size + align - 1 : size;
  RbNode* node = root->rb_node;
  uint64_t steps = 0;
  VmapArea* found = nullptr;
  ++c.st.searches;
  while (node) {
    ++steps;
    vcost::visit(node);
    VmapArea* va = va_of_rb(node);
    if (get_subtree_max_size(node->rb_left) >= length && vstart < va->va_start) {
      node = node->rb_left;
    } else {
      if (is_within_this_va(va, size, align, vstart)) {
        found = va;
        break;
      }
      // No point going right if the right subtree has no block of the search length.
      if (get_subtree_max_size(node->rb_right) >= length) {
        node = node->rb_right;
        continue;
      }
      // Roll back to the first ancestor whose right subtree satisfies the search (needed because of vstart or
      // an alignment overhead larger than PAGE_SIZE).
      while ((node = rb::rb_parent(node))) {
        ++steps;
        vcost::visit(node);
        va = va_of_rb(node);
        if (is_within_this_va(va, size, align, vstart)) {
          found = va;
          break;
        }
        if (get_subtree_max_size(node->rb_right) >= length && vstart <= va->va_start) {
          // Shift vstart past this area so the subtree already checked is not entered again.
          vstart = va->va_start + 1;
          node = node->rb_right;
          break;
        }
      }
      if (found) break;
    }
  }
  c.st.search_steps += steps;
  return found;
}

VmapArea* find_vmap_lowest_linear_match(const ListHead* head, unsigned long size, unsigned long align,
                                        unsigned long vstart) {
  for (const ListHead* p = head->next; p != head; p = p->next) {
    const VmapArea* va = va_of_list(p);
    if (is_within_this_va(va, size, align, vstart)) return const_cast<VmapArea*>(va);
  }
  return nullptr;
}

FitType classify_va_fit_type(const VmapArea* va, unsigned long nva_start_addr, unsigned long size) {
  if (nva_start_addr < va->va_start || nva_start_addr + size > va->va_end) return NOTHING_FIT;
  if (va->va_start == nva_start_addr) return va->va_end == nva_start_addr + size ? FL_FIT_TYPE : LE_FIT_TYPE;
  if (va->va_end == nva_start_addr + size) return RE_FIT_TYPE;
  return NE_FIT_TYPE;
}

bool va_clip(VmapCpu& c, VaTree& free, VmapArea* va, unsigned long nva_start_addr, unsigned long size) {
  VmapArea* lva = nullptr;
  const FitType type = classify_va_fit_type(va, nva_start_addr, size);
  ++c.st.fit(type);
  vcost::touch(va_line(va), true);  // its va_start / va_end
  switch (type) {
    case FL_FIT_TYPE:
      //  |               |
      //  V      NVA      V
      //  |---------------|
      unlink_va(va, &free.root, true);
      kmem_cache_free_va(c, va);
      return true;
    case LE_FIT_TYPE:
      //  |       |
      //  V  NVA  V
      //  |-------|-------|
      va->va_start += size;
      break;
    case RE_FIT_TYPE:
      //          |       |
      //          V  NVA  V
      //  |-------|-------|
      va->va_end = nva_start_addr;
      break;
    case NE_FIT_TYPE:
      //      |       |
      //      V  NVA  V
      //  |---|-------|---|
      //    LVA         VA
      // The CPU was preloaded before free_vmap_area_lock was taken, so the split allocates nothing here.
      lva = c.ne_fit_preload_node;
      c.ne_fit_preload_node = nullptr;
      if (!lva) lva = kmem_cache_alloc_va(c);  // kmem_cache_alloc(GFP_NOWAIT)
      lva->va_start = va->va_start;
      lva->va_end = nva_start_addr;
      va->va_start = nva_start_addr + size;
      break;
    case NOTHING_FIT: return false;
  }
  augment_tree_propagate_from(va);
  if (lva) insert_vmap_area_augment(c, lva, &va->rb_node, free);
  return true;
}

unsigned long alloc_from_free_tree(VmapCpu& c, VaTree& free, unsigned long size, unsigned long align,
                                   unsigned long vstart, unsigned long vend) {
  // No adjustment for align <= PAGE_SIZE (every area starts page-aligned anyway), nor for a range that is
  // exactly the request (the adjusted length could never be found there).
  bool adjust_search_size = true;
  if (align <= PAGE_SIZE || (align > PAGE_SIZE && (vend - vstart) == size)) adjust_search_size = false;

  VmapArea* va = find_vmap_lowest_match(c, &free.root, size, align, vstart, adjust_search_size);
  if (!va) return vend;
  const unsigned long nva_start_addr = va->va_start > vstart ? ALIGN(va->va_start, align) : ALIGN(vstart, align);
  if (nva_start_addr + size > vend) return vend;  // the "vend" restriction
  if (!va_clip(c, free, va, nva_start_addr, size)) return vend;
  return nva_start_addr;
}

}  // namespace alloclab::vmalloc
