// Invariant checks of the vmalloc model (see VmallocSpace::verify in vmalloc.hpp): what the kernel's
// DEBUG_AUGMENT_PROPAGATE_CHECK, find_va_links()'s overlap WARN and a walk of /proc/vmallocinfo would catch.
// Runs only while no other thread calls into the space.
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "alloclab/mm/vmalloc/vmalloc.hpp"

namespace alloclab::vmalloc {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("vmalloc invariant: " + what); }

std::string hex(unsigned long x) {
  std::ostringstream o;
  o << "0x" << std::hex << x;
  return o.str();
}

std::string range(const VmapArea* va) { return "[" + hex(va->va_start) + ", " + hex(va->va_end) + ")"; }

// Red-black rules, parent links, strict address order without overlap, and (augmented) subtree_max_size.
// Returns the black height; appends the in-order walk to `order`.
int check_rb(const RbNode* n, const RbNode* parent, bool augmented, const char* name,
             std::vector<const VmapArea*>& order) {
  if (!n) return 1;
  if (rb::rb_parent(n) != parent) fail(std::string(name) + ": broken parent link");
  if (rb::rb_is_red(n) && parent && rb::rb_is_red(parent)) fail(std::string(name) + ": red node with a red parent");
  const int lh = check_rb(n->rb_left, n, augmented, name, order);
  const VmapArea* va = va_of_rb(n);
  if (va->va_start >= va->va_end) fail(std::string(name) + ": empty or inverted area " + range(va));
  if (!order.empty() && order.back()->va_end > va->va_start)
    fail(std::string(name) + ": areas out of order or overlapping: " + range(order.back()) + " and " + range(va));
  order.push_back(va);
  const int rh = check_rb(n->rb_right, n, augmented, name, order);
  if (lh != rh) fail(std::string(name) + ": unequal black heights");
  if (augmented) {
    const unsigned long want =
        std::max({va_size(va), get_subtree_max_size(n->rb_left), get_subtree_max_size(n->rb_right)});
    if (va->subtree_max_size != want)
      fail(std::string(name) + ": subtree_max_size of " + range(va) + " is " + std::to_string(va->subtree_max_size) +
           ", should be " + std::to_string(want));
  }
  return lh + (rb::rb_is_black(n) ? 1 : 0);
}

}  // namespace

// The tree's in-order walk must be exactly its list.
std::vector<const VmapArea*> check_va_tree(const VaTree& t, bool augmented, const char* name) {
  std::vector<const VmapArea*> order;
  if (t.root.rb_node && rb::rb_is_red(t.root.rb_node)) fail(std::string(name) + ": red root");
  check_rb(t.root.rb_node, nullptr, augmented, name, order);
  size_t i = 0;
  for (const ListHead* p = t.head.next; p != &t.head; p = p->next, ++i) {
    if (p->next->prev != p) fail(std::string(name) + ": broken list links");
    if (i >= order.size() || va_of_list(p) != order[i])
      fail(std::string(name) + ": list order differs from the tree's in-order walk");
  }
  if (i != order.size()) fail(std::string(name) + ": list shorter than the tree");
  return order;
}

VmallocSpace::Snapshot VmallocSpace::snapshot() const {
  Snapshot s;
  auto add_list = [&s](const ListHead* head, std::vector<Extent>& out) {
    for (const ListHead* p = head->next; p != head; p = p->next) {
      const VmapArea* va = va_of_list(p);
      out.push_back({va->va_start, va->va_end});
      ++s.objects;
    }
  };
  add_list(&free_.head, s.free);
  for (const auto& vn : nodes_) {
    add_list(&vn->busy.head, s.busy);
    add_list(&vn->lazy.head, s.lazy);
    add_list(&vn->purge_list, s.lazy);
    for (const auto& vp : vn->pool) add_list(&vp.head, s.pooled);
  }
  for (const auto& c : cpus_)
    if (c.ne_fit_preload_node) ++s.objects;
  for (auto* v : {&s.free, &s.busy, &s.lazy, &s.pooled}) std::sort(v->begin(), v->end());
  return s;
}

void VmallocSpace::verify() const {
  // Free tree: augmented, coalesced (no two free areas touch).
  const auto free_order = check_va_tree(free_, true, "free tree");
  for (size_t i = 1; i < free_order.size(); ++i)
    if (free_order[i - 1]->va_end == free_order[i]->va_start)
      fail("free tree: adjacent free areas not merged: " + range(free_order[i - 1]) + " and " + range(free_order[i]));

  unsigned long lazy_pages = 0;
  for (unsigned id = 0; id < nr_vmap_nodes_; ++id) {
    const VmapNode& vn = *nodes_[id];
    for (const VmapArea* va : check_va_tree(vn.busy, false, "busy tree")) {
      if (addr_to_node_id(va->va_start) != id)
        fail("busy area " + range(va) + " is on node " + std::to_string(id) + ", addr_to_node says " +
             std::to_string(addr_to_node_id(va->va_start)));
      if (!va->vm) fail("busy area " + range(va) + " has no vm_struct");
      if (va->vm->addr != va->va_start || va->vm->size != va_size(va))
        fail("busy area " + range(va) + " and its vm_struct disagree");
    }
    if (!vn.purge_list.empty()) fail("purge list not empty outside a purge");
    for (const VmapArea* va : check_va_tree(vn.lazy, false, "lazy tree")) {
      lazy_pages += va_size(va) >> PAGE_SHIFT;
      if (!v67_shape()) {
        const unsigned vid = decode_vn_id(va->flags);
        const unsigned want = is_vn_id_valid(vid) ? vid : addr_to_node_id(va->va_start);
        if (want != id) fail("lazy area " + range(va) + " on the wrong node");
      }
    }
    for (unsigned i = 0; i < MAX_VA_SIZE_PAGES; ++i) {
      unsigned long n = 0;
      for (const ListHead* p = vn.pool[i].head.next; p != &vn.pool[i].head; p = p->next, ++n) {
        const VmapArea* va = va_of_list(p);
        if (va_size(va) != (i + 1ul) * PAGE_SIZE) fail("pool[" + std::to_string(i) + "] holds " + range(va));
      }
      if (n != vn.pool[i].len.load()) fail("pool[" + std::to_string(i) + "].len does not match its list");
    }
  }
  if (lazy_pages != vmap_lazy_nr_.load())
    fail("vmap_lazy_nr is " + std::to_string(vmap_lazy_nr_.load()) + " but the lazy trees hold " +
         std::to_string(lazy_pages) + " pages");

  // Coverage: free + busy + lazy + pooled tile [vstart, vend) exactly.
  const Snapshot s = snapshot();
  std::vector<std::pair<Extent, const char*>> all;
  for (const auto& e : s.free) all.push_back({e, "free"});
  for (const auto& e : s.busy) all.push_back({e, "busy"});
  for (const auto& e : s.lazy) all.push_back({e, "lazy"});
  for (const auto& e : s.pooled) all.push_back({e, "pooled"});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  unsigned long at = cfg_.vstart;
  for (const auto& [e, kind] : all) {
    if (e.start < at)
      fail(std::string(kind) + " area [" + hex(e.start) + ", " + hex(e.end) + ") overlaps what precedes it");
    if (e.start > at) fail("hole [" + hex(at) + ", " + hex(e.start) + ") is neither free, busy, lazy nor pooled");
    at = e.end;
  }
  if (at != cfg_.vend) fail("the areas end at " + hex(at) + ", not at vend " + hex(cfg_.vend));

  // Object accounting: every vmap_area allocated and not freed is somewhere.
  const VmallocStats st = stats();
  if (st.va_objs_alloc - st.va_objs_free != s.objects)
    fail(std::to_string(st.va_objs_alloc - st.va_objs_free) + " vmap_area objects allocated, " +
         std::to_string(s.objects) + " accounted for");
  if (st.overlap_warnings) fail("find_va_links() saw " + std::to_string(st.overlap_warnings) + " overlaps");
}

}  // namespace alloclab::vmalloc
