// The address-sorted vmap_area tree + list (see va_tree.hpp). Follows Linux v6.9+ mm/vmalloc.c line by line.
#include "alloclab/mm/vmalloc/va_tree.hpp"

namespace alloclab::vmalloc {

RbNode** find_va_links(VmapCpu& c, const VmapArea* va, RbRoot* root, RbNode* from, RbNode** parent) {
  RbNode** link;
  if (root) {
    link = &root->rb_node;
    if (!*link) {
      *parent = nullptr;
      return link;
    }
  } else {
    link = &from;
  }
  // Go to the bottom of the tree; on the way, refuse an overlap (the kernel WARNs and returns NULL).
  VmapArea* tmp_va;
  do {
    vcost::visit(*link);
    tmp_va = va_of_rb(*link);
    if (va->va_end <= tmp_va->va_start) {
      link = &(*link)->rb_left;
    } else if (va->va_start >= tmp_va->va_end) {
      link = &(*link)->rb_right;
    } else {
      ++c.st.overlap_warnings;
      return nullptr;
    }
  } while (*link);
  *parent = &tmp_va->rb_node;
  return link;
}

ListHead* get_va_next_sibling(RbNode* parent, RbNode** link) {
  if (!parent) return nullptr;  // empty tree: no neighbours
  VmapArea* list = va_of_rb(parent);
  return &parent->rb_right == link ? list->list.next : &list->list;
}

void link_va(VmapArea* va, RbRoot* root, RbNode* parent, RbNode** link, ListHead* head, bool augment) {
  // VA is not in the list yet, but its future previous list entry is known from the parent.
  if (parent) {
    head = &va_of_rb(parent)->list;
    if (&parent->rb_right != link) head = head->prev;
  }
  rb_link_node(&va->rb_node, parent, link);
  if (augment) {
    // As the kernel: plain insertion, then subtree_max_size = 0 so that augment_tree_propagate_from() (called
    // by the caller) fills the values in from the bottom up.
    rb_insert_augmented<FreeVaAugment>(&va->rb_node, root);
    va->subtree_max_size = 0;
  } else {
    rb_insert_color(&va->rb_node, root);
  }
  vcost::touch(va_line(va), true);
  list_add(&va->list, head);  // address-sorted list
}

void unlink_va(VmapArea* va, RbRoot* root, bool augment) {
  if (RB_EMPTY_NODE(&va->rb_node)) return;  // WARN_ON in the kernel
  if (augment)
    rb_erase_augmented<FreeVaAugment>(&va->rb_node, root);
  else
    rb_erase(&va->rb_node, root);
  vcost::touch(va_line(va), true);
  list_del_init(&va->list);
  RB_CLEAR_NODE(&va->rb_node);
}

bool insert_vmap_area(VmapCpu& c, VmapArea* va, VaTree& t) {
  RbNode* parent;
  RbNode** link = find_va_links(c, va, &t.root, nullptr, &parent);
  if (!link) return false;
  link_va(va, &t.root, parent, link, &t.head, false);
  return true;
}

bool insert_vmap_area_augment(VmapCpu& c, VmapArea* va, RbNode* from, VaTree& t) {
  RbNode* parent;
  RbNode** link = from ? find_va_links(c, va, nullptr, from, &parent) : find_va_links(c, va, &t.root, nullptr, &parent);
  if (!link) return false;
  link_va(va, &t.root, parent, link, &t.head, true);
  augment_tree_propagate_from(va);
  return true;
}

VmapArea* find_vmap_area_in(unsigned long addr, const RbRoot* root) {
  RbNode* n = root->rb_node;
  while (n) {
    vcost::visit(n);
    VmapArea* va = va_of_rb(n);
    if (addr < va->va_start)
      n = n->rb_left;
    else if (addr >= va->va_end)
      n = n->rb_right;
    else
      return va;
  }
  return nullptr;
}

namespace {

VmapArea* merge_or_add(VmapCpu& c, VmapArea* va, VaTree& t, bool augment) {
  ListHead* const head = &t.head;
  RbNode* parent;
  RbNode** link = find_va_links(c, va, &t.root, nullptr, &parent);
  if (!link) return nullptr;

  bool merged = false;
  ListHead* next = get_va_next_sibling(parent, link);
  if (next) {
    //  |<------VA------>|<-----Next----->|
    if (next != head) {
      VmapArea* sibling = va_of_list(next);
      vcost::touch(va_line(sibling), false);
      if (sibling->va_start == va->va_end) {
        vcost::touch(va_line(sibling), true);
        sibling->va_start = va->va_start;
        kmem_cache_free_va(c, va);
        va = sibling;
        merged = true;
      }
    }
    //  |<-----Prev----->|<------VA------>|
    if (next->prev != head) {
      VmapArea* sibling = va_of_list(next->prev);
      vcost::touch(va_line(sibling), false);
      if (sibling->va_end == va->va_start) {
        // If both neighbours coalesce, unlink "next" first, then merge into "prev"; otherwise the augmented
        // values could be left stale by the rotations of the erase.
        if (merged) unlink_va(va, &t.root, augment);
        vcost::touch(va_line(sibling), true);
        sibling->va_end = va->va_end;
        kmem_cache_free_va(c, va);
        va = sibling;
        merged = true;
      }
    }
  }
  if (merged)
    ++c.st.merges;
  else
    link_va(va, &t.root, parent, link, head, augment);
  return va;
}

}  // namespace

VmapArea* merge_or_add_vmap_area(VmapCpu& c, VmapArea* va, VaTree& t) { return merge_or_add(c, va, t, false); }

VmapArea* merge_or_add_vmap_area_augment(VmapCpu& c, VmapArea* va, VaTree& t) {
  va = merge_or_add(c, va, t, true);
  if (va) augment_tree_propagate_from(va);
  return va;
}

}  // namespace alloclab::vmalloc
