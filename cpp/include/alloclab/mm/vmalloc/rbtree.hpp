// Intrusive red-black tree with augmentation callbacks: lib/rbtree.c and include/linux/rbtree_augmented.h.
//
// Models (Linux v6.9, unchanged in substance since v4.x): struct rb_node with the colour packed in the low bit of
// __rb_parent_color, rb_link_node, rb_insert_color / rb_insert_augmented (__rb_insert), rb_erase /
// rb_erase_augmented (__rb_erase_augmented + ____rb_erase_color), rb_first / rb_next / rb_prev. The augmented
// variants take a callbacks type with static propagate(node, stop), copy(old, new) and rotate(old, new), as
// RB_DECLARE_CALLBACKS generates; the callbacks are template parameters so they inline as the kernel's
// __always_inline ones do. The plain variants use a no-op callbacks type.
// In a virtual-clock run each pass of the rebalancing loops and each step of the successor walk is a tree_step that
// reads or writes the node it works on (the descent that found the place is its caller's to charge).
// Leaves out: the cached-leftmost root (rb_root_cached), RCU-safe WRITE_ONCE ordering (every tree here is only
// touched under its lock), rb_replace_node, postorder iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "alloclab/topology/cost_model.hpp"

namespace alloclab::vmalloc {

struct RbNode {
  uintptr_t __rb_parent_color = 0;  // parent pointer | colour (bit 0: 1 = black)
  RbNode* rb_right = nullptr;
  RbNode* rb_left = nullptr;
} __attribute__((aligned(sizeof(long))));

struct RbRoot {
  RbNode* rb_node = nullptr;
};

namespace rb {

constexpr uintptr_t RB_RED = 0;
constexpr uintptr_t RB_BLACK = 1;

inline RbNode* parent_of(uintptr_t pc) { return reinterpret_cast<RbNode*>(pc & ~uintptr_t(3)); }
inline RbNode* rb_parent(const RbNode* n) { return parent_of(n->__rb_parent_color); }
inline bool is_black_pc(uintptr_t pc) { return pc & 1; }
inline bool rb_is_black(const RbNode* n) { return is_black_pc(n->__rb_parent_color); }
inline bool rb_is_red(const RbNode* n) { return !rb_is_black(n); }
inline RbNode* rb_red_parent(const RbNode* red) { return reinterpret_cast<RbNode*>(red->__rb_parent_color); }
inline void rb_set_black(RbNode* n) { n->__rb_parent_color |= RB_BLACK; }
inline void rb_set_parent(RbNode* n, RbNode* p) {
  n->__rb_parent_color = (n->__rb_parent_color & 1) | reinterpret_cast<uintptr_t>(p);
}
inline void rb_set_parent_color(RbNode* n, RbNode* p, uintptr_t color) {
  n->__rb_parent_color = reinterpret_cast<uintptr_t>(p) | color;
}
inline void change_child(RbNode* old, RbNode* n, RbNode* parent, RbRoot* root) {
  if (parent) {
    if (parent->rb_left == old)
      parent->rb_left = n;
    else
      parent->rb_right = n;
  } else {
    root->rb_node = n;
  }
}
// After a rotation `n` takes `old`'s place (and parent/colour); `old` becomes n's child with `color`.
inline void rotate_set_parents(RbNode* old, RbNode* n, RbRoot* root, uintptr_t color) {
  RbNode* parent = rb_parent(old);
  n->__rb_parent_color = old->__rb_parent_color;
  rb_set_parent_color(old, n, color);
  change_child(old, n, parent, root);
}

// One level of rebalancing or walking: a tree_step on node `n`'s line.
inline void step(const RbNode* n, bool write) {
  if (CostModel* m = vcost::active()) [[unlikely]] {
    m->charge(Op::tree_step, 1);
    m->touch(n, write);
  }
}
// Levels the core reaches without waiting for each other (a path it walked down, propagated back up: each parent
// pointer is on a line the level below already holds): a tree_step each, their lines one group of independent
// accesses (CostModel::touch_each).
inline void steps(std::span<const void* const> nodes, bool write) {
  if (CostModel* m = vcost::active()) [[unlikely]] {
    m->charge(Op::tree_step, nodes.size());
    m->touch_each(nodes, write);
  }
}
// The deepest path: a red-black tree of 2^64 nodes is at most 128 levels high.
inline constexpr size_t kMaxDepth = 128;

struct NoAugment {
  static void propagate(RbNode*, RbNode*) {}
  static void copy(RbNode*, RbNode*) {}
  static void rotate(RbNode*, RbNode*) {}
};

// The rebalancing cases come in mirror pairs: lib/rbtree.c writes each twice, once per side. Here each is written
// once for a side `L` (the side of its parent the node or subtree in question hangs on) and its mirror `R`, and
// instantiated for both.
using RbSide = RbNode* RbNode::*;

// One pass of __rb_insert's loop for a red `node` under a red `parent` that is gparent's L child. Returns true to go
// on one level up (case 1: node and parent were moved up), false when the tree is balanced.
template <class Aug, RbSide L, RbSide R>
inline bool insert_side(RbNode*& node, RbNode*& parent, RbNode* gparent, RbRoot* root) {
  RbNode* tmp = gparent->*R;
  if (tmp && rb_is_red(tmp)) {
    // Case 1: the uncle is red: colour flips.
    rb_set_parent_color(tmp, gparent, RB_BLACK);
    rb_set_parent_color(parent, gparent, RB_BLACK);
    node = gparent;
    parent = rb_parent(node);
    rb_set_parent_color(node, parent, RB_RED);
    return true;
  }
  tmp = parent->*R;
  if (node == tmp) {
    // Case 2: the uncle is black and node is parent's R child: rotate towards L at parent.
    tmp = node->*L;
    parent->*R = tmp;
    node->*L = parent;
    if (tmp) rb_set_parent_color(tmp, parent, RB_BLACK);
    rb_set_parent_color(parent, node, RB_RED);
    Aug::rotate(parent, node);
    parent = node;
    tmp = node->*R;
  }
  // Case 3: the uncle is black and node is parent's L child: rotate towards R at gparent.
  gparent->*L = tmp;
  parent->*R = gparent;
  if (tmp) rb_set_parent_color(tmp, gparent, RB_BLACK);
  rotate_set_parents(gparent, parent, root, RB_RED);
  Aug::rotate(gparent, parent);
  return false;
}

// __rb_insert(): rebalance after rb_link_node() of a red node.
template <class Aug>
inline void insert(RbNode* node, RbRoot* root) {
  RbNode* parent = rb_red_parent(node);
  for (;;) {
    step(parent ? parent : node, true);
    // Loop invariant: node is red.
    if (!parent) {
      rb_set_parent_color(node, nullptr, RB_BLACK);
      break;
    }
    if (rb_is_black(parent)) break;
    RbNode* gparent = rb_red_parent(parent);
    const bool up = parent != gparent->rb_right
                        ? insert_side<Aug, &RbNode::rb_left, &RbNode::rb_right>(node, parent, gparent, root)
                        : insert_side<Aug, &RbNode::rb_right, &RbNode::rb_left>(node, parent, gparent, root);
    if (!up) break;
  }
}

// One pass of ____rb_erase_color's loop for `node` (possibly null), parent's L child, whose subtree is one black
// short. Returns true to go on one level up (case 2 with a black parent: node and parent were moved up), false when
// the black height is restored.
template <class Aug, RbSide L, RbSide R>
inline bool erase_color_side(RbNode*& node, RbNode*& parent, RbRoot* root) {
  RbNode *sibling = parent->*R, *tmp1, *tmp2;
  if (rb_is_red(sibling)) {
    // Case 1: rotate towards L at parent.
    tmp1 = sibling->*L;
    parent->*R = tmp1;
    sibling->*L = parent;
    rb_set_parent_color(tmp1, parent, RB_BLACK);
    rotate_set_parents(parent, sibling, root, RB_RED);
    Aug::rotate(parent, sibling);
    sibling = tmp1;
  }
  tmp1 = sibling->*R;
  if (!tmp1 || rb_is_black(tmp1)) {
    tmp2 = sibling->*L;
    if (!tmp2 || rb_is_black(tmp2)) {
      // Case 2: sibling colour flip.
      rb_set_parent_color(sibling, parent, RB_RED);
      if (rb_is_red(parent)) {
        rb_set_black(parent);
      } else {
        node = parent;
        parent = rb_parent(node);
        if (parent) return true;
      }
      return false;
    }
    // Case 3: rotate towards R at sibling.
    tmp1 = tmp2->*R;
    sibling->*L = tmp1;
    tmp2->*R = sibling;
    parent->*R = tmp2;
    if (tmp1) rb_set_parent_color(tmp1, sibling, RB_BLACK);
    Aug::rotate(sibling, tmp2);
    tmp1 = sibling;
    sibling = tmp2;
  }
  // Case 4: rotate towards L at parent + colour flips.
  tmp2 = sibling->*L;
  parent->*R = tmp2;
  sibling->*L = parent;
  rb_set_parent_color(tmp1, sibling, RB_BLACK);
  if (tmp2) rb_set_parent(tmp2, parent);
  rotate_set_parents(parent, sibling, root, RB_BLACK);
  Aug::rotate(parent, sibling);
  return false;
}

// ____rb_erase_color(): restore the black height below `parent` after a black node was removed.
template <class Aug>
inline void erase_color(RbNode* parent, RbRoot* root) {
  RbNode* node = nullptr;
  for (;;) {
    step(parent, true);
    const bool up = node != parent->rb_right
                        ? erase_color_side<Aug, &RbNode::rb_left, &RbNode::rb_right>(node, parent, root)
                        : erase_color_side<Aug, &RbNode::rb_right, &RbNode::rb_left>(node, parent, root);
    if (!up) break;
  }
}

// __rb_erase_augmented(): unlink `node`; returns the node to rebalance from, or null.
template <class Aug>
inline RbNode* erase_augmented(RbNode* node, RbRoot* root) {
  RbNode* child = node->rb_right;
  RbNode* tmp = node->rb_left;
  RbNode *parent, *rebalance;
  uintptr_t pc;

  if (!tmp) {
    // Case 1: at most one child (the right one). A lone child is red and node black: recolour locally.
    pc = node->__rb_parent_color;
    parent = parent_of(pc);
    change_child(node, child, parent, root);
    if (child) {
      child->__rb_parent_color = pc;
      rebalance = nullptr;
    } else {
      rebalance = is_black_pc(pc) ? parent : nullptr;
    }
    tmp = parent;
  } else if (!child) {
    // Still case 1, with the left child.
    tmp->__rb_parent_color = pc = node->__rb_parent_color;
    parent = parent_of(pc);
    change_child(node, tmp, parent, root);
    rebalance = nullptr;
    tmp = parent;
  } else {
    RbNode *successor = child, *child2;
    tmp = child->rb_left;
    if (!tmp) {
      // Case 2: node's successor is its right child.
      parent = successor;
      child2 = successor->rb_right;
      Aug::copy(node, successor);
    } else {
      // Case 3: node's successor is the leftmost node under node's right child.
      do {
        step(tmp, false);
        parent = successor;
        successor = tmp;
        tmp = tmp->rb_left;
      } while (tmp);
      child2 = successor->rb_right;
      parent->rb_left = child2;
      successor->rb_right = child;
      rb_set_parent(child, successor);
      Aug::copy(node, successor);
      Aug::propagate(parent, successor);
    }
    tmp = node->rb_left;
    successor->rb_left = tmp;
    rb_set_parent(tmp, successor);
    pc = node->__rb_parent_color;
    tmp = parent_of(pc);
    change_child(node, successor, tmp, root);
    if (child2) {
      rb_set_parent_color(child2, parent, RB_BLACK);
      rebalance = nullptr;
    } else {
      rebalance = rb_is_black(successor) ? parent : nullptr;
    }
    successor->__rb_parent_color = pc;
    tmp = successor;
  }
  Aug::propagate(tmp, nullptr);
  return rebalance;
}

}  // namespace rb

// rb_link_node(): attach `node` (red) at `*link` below `parent`; follow with rb_insert_color/_augmented.
inline void rb_link_node(RbNode* node, RbNode* parent, RbNode** link) {
  node->__rb_parent_color = reinterpret_cast<uintptr_t>(parent);
  node->rb_left = node->rb_right = nullptr;
  *link = node;
}

inline void rb_insert_color(RbNode* node, RbRoot* root) { rb::insert<rb::NoAugment>(node, root); }

// The caller propagates the augmented value of `node` afterwards (as vmalloc's augment_tree_propagate_from()).
template <class Aug>
inline void rb_insert_augmented(RbNode* node, RbRoot* root) {
  rb::insert<Aug>(node, root);
}

inline void rb_erase(RbNode* node, RbRoot* root) {
  if (RbNode* rebalance = rb::erase_augmented<rb::NoAugment>(node, root))
    rb::erase_color<rb::NoAugment>(rebalance, root);
}

template <class Aug>
inline void rb_erase_augmented(RbNode* node, RbRoot* root) {
  if (RbNode* rebalance = rb::erase_augmented<Aug>(node, root)) rb::erase_color<Aug>(rebalance, root);
}

// RB_CLEAR_NODE / RB_EMPTY_NODE: a node that is in no tree points to itself.
inline void RB_CLEAR_NODE(RbNode* n) { n->__rb_parent_color = reinterpret_cast<uintptr_t>(n); }
inline bool RB_EMPTY_NODE(const RbNode* n) { return n->__rb_parent_color == reinterpret_cast<uintptr_t>(n); }
inline bool RB_EMPTY_ROOT(const RbRoot* r) { return r->rb_node == nullptr; }

inline RbNode* rb_first(const RbRoot* root) {
  RbNode* n = root->rb_node;
  if (!n) return nullptr;
  while (n->rb_left) n = n->rb_left;
  return n;
}

namespace rb {
// rb_next with L = rb_left, R = rb_right; rb_prev with the sides swapped: the L-most node of the R subtree, else the
// nearest ancestor that `node` is under on its L side (null: none).
template <RbSide L, RbSide R>
inline RbNode* rb_neighbour(const RbNode* node) {
  if (node->*R) {
    node = node->*R;
    while (node->*L) node = node->*L;
    return const_cast<RbNode*>(node);
  }
  RbNode* parent;
  while ((parent = rb_parent(node)) && node == parent->*R) node = parent;
  return parent;
}
}  // namespace rb

inline RbNode* rb_next(const RbNode* node) { return rb::rb_neighbour<&RbNode::rb_left, &RbNode::rb_right>(node); }
inline RbNode* rb_prev(const RbNode* node) { return rb::rb_neighbour<&RbNode::rb_right, &RbNode::rb_left>(node); }

}  // namespace alloclab::vmalloc
