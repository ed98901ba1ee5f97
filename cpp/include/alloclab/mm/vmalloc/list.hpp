// ListHead: the kernel's intrusive doubly-linked circular list (include/linux/list.h), as mm/vmalloc.c uses it
// for free_vmap_area_list, the busy/lazy lists of a vmap_node and the size-class pools.
//
// Models: struct list_head with list_add, list_add_tail, list_del_init, list_move_tail, list_replace_init and
// list_empty (list_entry is va_of_list() in vmap_area.hpp, an offsetof container_of). In a virtual-clock run each
// insertion or removal is a list_op (a move is two); the lines it writes are the callers' to touch (an entry is a
// vmap_area, whose line is va_line(), and the callers know which neighbour is a list head).
// Leaves out: RCU variants, poisoning, list debugging.
#pragma once

#include "alloclab/topology/cost_model.hpp"

namespace alloclab::vmalloc {

struct ListHead {
  ListHead* next;
  ListHead* prev;

  ListHead() : next(this), prev(this) {}
  ListHead(const ListHead&) = delete;
  ListHead& operator=(const ListHead&) = delete;

  bool empty() const { return next == this; }
};

inline void INIT_LIST_HEAD(ListHead* h) { h->next = h->prev = h; }

inline void __list_add(ListHead* n, ListHead* prev, ListHead* next) {
  vcost::charge(Op::list_op);
  next->prev = n;
  n->next = next;
  n->prev = prev;
  prev->next = n;
}
// Inserts `n` right after `head`.
inline void list_add(ListHead* n, ListHead* head) { __list_add(n, head, head->next); }
// Inserts `n` right before `head` (at the tail of the list `head` heads).
inline void list_add_tail(ListHead* n, ListHead* head) { __list_add(n, head->prev, head); }
inline void list_del_init(ListHead* e) {
  vcost::charge(Op::list_op);
  e->prev->next = e->next;
  e->next->prev = e->prev;
  INIT_LIST_HEAD(e);
}
inline void list_move_tail(ListHead* e, ListHead* head) {
  vcost::charge(Op::list_op);
  e->prev->next = e->next;
  e->next->prev = e->prev;
  list_add_tail(e, head);
}
// `n` takes over the entries of `old`, which is left empty.
inline void list_replace_init(ListHead* old, ListHead* n) {
  if (old->empty()) {
    INIT_LIST_HEAD(n);
    return;
  }
  vcost::charge(Op::list_op);
  n->next = old->next;
  n->next->prev = n;
  n->prev = old->prev;
  n->prev->next = n;
  INIT_LIST_HEAD(old);
}

}  // namespace alloclab::vmalloc
