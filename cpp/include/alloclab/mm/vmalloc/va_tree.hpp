// The address-sorted vmap_area tree + list (struct rb_list in v6.9+): insert, unlink, lookup and
// merge-on-insert, shared by the free tree (augmented), the busy trees, the lazy trees and local purge trees.
//
// Models Linux v6.9+ mm/vmalloc.c: find_va_links(), get_va_next_sibling(), __link_va() / link_va() /
// link_va_augment(), __unlink_va() / unlink_va() / unlink_va_augment(), insert_vmap_area(),
// insert_vmap_area_augment(), __find_vmap_area(), __merge_or_add_vmap_area() / merge_or_add_vmap_area() /
// merge_or_add_vmap_area_augment(), and the free tree's augmentation: RB_DECLARE_CALLBACKS_MAX(...,
// subtree_max_size, va_size) and augment_tree_propagate_from(). None of these lock: the caller holds the lock
// of the tree (free_vmap_area_lock, vn->busy.lock, vn->lazy.lock) or owns a local tree.
// Leaves out: KASAN tag resets, the DEBUG_AUGMENT_PROPAGATE_CHECK walk (verify() in vmalloc.hpp does it).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "alloclab/mm/vmalloc/percpu.hpp"
#include "alloclab/mm/vmalloc/rbtree.hpp"
#include "alloclab/mm/vmalloc/vmap_area.hpp"

namespace alloclab::vmalloc {

// An address-sorted tree with its list (free_vmap_area_root + free_vmap_area_list, vn->busy, vn->lazy, ...).
struct VaTree {
  RbRoot root;
  ListHead head;
  VaTree() = default;
  VaTree(const VaTree&) = delete;
  VaTree& operator=(const VaTree&) = delete;
};

// free_vmap_area_rb_augment_cb: subtree_max_size = max(va_size(va), children's subtree_max_size).
struct FreeVaAugment {
  // RBCOMPUTE(node, exit): returns true (stop) when exit and the value did not change.
  static bool compute_max(VmapArea* va, bool exit) {
    unsigned long max = va_size(va);
    if (RbNode* l = va->rb_node.rb_left) {
      const unsigned long c = va_of_rb(l)->subtree_max_size;
      if (c > max) max = c;
    }
    if (RbNode* r = va->rb_node.rb_right) {
      const unsigned long c = va_of_rb(r)->subtree_max_size;
      if (c > max) max = c;
    }
    if (exit && va->subtree_max_size == max) return true;
    va->subtree_max_size = max;
    return false;
  }
  // The levels up to the first whose value holds. Their stores go out together: the exit test is predicted not
  // taken and each parent pointer sits on a line the level below holds, so the core runs ahead up the path.
  static void propagate(RbNode* rb, RbNode* stop) {
    std::array<const void*, rb::kMaxDepth> path;
    size_t depth = 0;
    while (rb != stop) {
      path.at(depth++) = rb;
      VmapArea* va = va_of_rb(rb);
      if (compute_max(va, true)) break;
      rb = rb::rb_parent(&va->rb_node);
    }
    rb::steps(std::span(path.data(), depth), true);
  }
  static void copy(RbNode* o, RbNode* n) { va_of_rb(n)->subtree_max_size = va_of_rb(o)->subtree_max_size; }
  static void rotate(RbNode* o, RbNode* n) {
    va_of_rb(n)->subtree_max_size = va_of_rb(o)->subtree_max_size;
    compute_max(va_of_rb(o), false);
  }
};

// augment_tree_propagate_from(): recompute subtree_max_size from `va` towards the root until a value holds.
inline void augment_tree_propagate_from(VmapArea* va) { FreeVaAugment::propagate(&va->rb_node, nullptr); }

// find_va_links(): the link where `va` goes, searching from `root` (or from the subtree at `from` when root is
// null). Returns null on an overlap with an existing area (the kernel WARNs "vmalloc bug"; counted in `c`).
RbNode** find_va_links(VmapCpu& c, const VmapArea* va, RbRoot* root, RbNode* from, RbNode** parent);
// get_va_next_sibling(): the list entry that will follow `va` once linked at (parent, link); null if the tree
// is empty.
ListHead* get_va_next_sibling(RbNode* parent, RbNode** link);

void link_va(VmapArea* va, RbRoot* root, RbNode* parent, RbNode** link, ListHead* head, bool augment);
void unlink_va(VmapArea* va, RbRoot* root, bool augment);

// insert_vmap_area(): busy and lazy trees (v6.9+). Returns false on an overlap (nothing inserted).
bool insert_vmap_area(VmapCpu& c, VmapArea* va, VaTree& t);
// insert_vmap_area_augment(): free tree; `from` (optional) is a node to start the descent from (va_clip's NE
// split inserts the left remainder next to the area it was cut from).
bool insert_vmap_area_augment(VmapCpu& c, VmapArea* va, RbNode* from, VaTree& t);

// __find_vmap_area(): the area containing addr, or null.
VmapArea* find_vmap_area_in(unsigned long addr, const RbRoot* root);

// merge_or_add_vmap_area(): link `va` into `t`, coalescing it with an adjacent previous and/or next area; the
// object of a coalesced area is freed. Returns the area that now covers va's range (null on an overlap).
VmapArea* merge_or_add_vmap_area(VmapCpu& c, VmapArea* va, VaTree& t);
VmapArea* merge_or_add_vmap_area_augment(VmapCpu& c, VmapArea* va, VaTree& t);

// Checks a tree (red-black rules, parent links, address order without overlap, list == in-order walk and, when
// `augmented`, every subtree_max_size) and returns its areas in order. Throws std::logic_error naming `name`.
std::vector<const VmapArea*> check_va_tree(const VaTree& t, bool augmented, const char* name);

}  // namespace alloclab::vmalloc
