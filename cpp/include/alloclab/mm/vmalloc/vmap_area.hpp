// struct vmap_area and struct vm_struct, and the constants of the x86-64 vmalloc space (mm/vmalloc.c,
// include/linux/vmalloc.h, arch/x86/include/asm/pgtable_64_types.h).
//
// Models Linux v6.9+ (vmap_node era; v6.7 differs only in not encoding a vn_id in va->flags). A vmap_area is in
// exactly one place at a time: the free tree (subtree_max_size is live), a busy tree (vm is live), a lazy tree,
// a size-class pool, a purge list, or a CPU's ne_fit_preload_node slot.
// Leaves out: VMAP_RAM / VMAP_BLOCK users (vm_map_ram, vmap blocks), vm_struct's pages/page_order/phys_addr
// fields beyond what map_pages needs, KASAN shadow, the 5-level-paging VMALLOC_START.
#pragma once

#include <cstddef>
#include <cstdint>

#include "alloclab/mm/vmalloc/list.hpp"
#include "alloclab/mm/vmalloc/rbtree.hpp"

namespace alloclab::mm {
struct Page;
}

namespace alloclab::vmalloc {

inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr unsigned long PAGE_SIZE = 1ul << PAGE_SHIFT;
// x86-64 with 4-level paging: VMALLOC_START = 0xffffc90000000000, VMALLOC_SIZE_TB = 32.
inline constexpr unsigned long VMALLOC_START = 0xffffc90000000000ul;
inline constexpr unsigned long VMALLOC_SIZE_DEFAULT = 32ul << 40;
// x86-64 THREAD_SIZE (16 KiB kernel stacks) and THREAD_ALIGN under CONFIG_VMAP_STACK.
inline constexpr unsigned long THREAD_SIZE = 4 * PAGE_SIZE;
inline constexpr unsigned long THREAD_ALIGN = THREAD_SIZE;
// v6.9+: pool[] of a vmap_node holds areas of 1..MAX_VA_SIZE_PAGES pages; vmap_zone_size = 16 pages.
inline constexpr unsigned MAX_VA_SIZE_PAGES = 256;
inline constexpr unsigned long VMAP_ZONE_SIZE = 16 * PAGE_SIZE;
inline constexpr unsigned MAX_VMAP_NODES = 128;  // nr_vmap_nodes = clamp(num_possible_cpus(), 1, 128)

// vm_struct flags (include/linux/vmalloc.h).
inline constexpr unsigned long VM_ALLOC = 0x00000002;
inline constexpr unsigned long VM_NO_GUARD = 0x00000040;
inline constexpr unsigned long VM_UNINITIALIZED = 0x00000020;

inline constexpr unsigned long ALIGN(unsigned long x, unsigned long a) { return (x + a - 1) & ~(a - 1); }
inline constexpr bool IS_ALIGNED(unsigned long x, unsigned long a) { return (x & (a - 1)) == 0; }
inline constexpr unsigned long PAGE_ALIGN(unsigned long x) { return ALIGN(x, PAGE_SIZE); }
inline constexpr bool is_power_of_2(unsigned long n) { return n != 0 && (n & (n - 1)) == 0; }

struct VmStruct {
  unsigned long addr = 0;  // void *addr
  unsigned long size = 0;  // including the guard page
  unsigned long flags = 0;
  unsigned long requested_size = 0;
  const void* caller = nullptr;
  // __vmalloc_area_node(): the pages backing the area (null when the model maps none); the caller owns the array
  // and frees it with the pages.
  mm::Page** pages = nullptr;
  unsigned nr_pages = 0;
};

struct VmapArea {
  unsigned long va_start = 0;
  unsigned long va_end = 0;
  RbNode rb_node;  // address-sorted rbtree
  ListHead list;   // address-sorted list
  union {
    unsigned long subtree_max_size;  // in the "free" tree
    VmStruct* vm;                    // in a "busy" tree
  };
  unsigned long flags = 0;  // VMAP_RAM | VMAP_BLOCK, and (v6.9+) the encoded vn_id in bits 8 and up

  VmapArea() : subtree_max_size(0) {}
};

inline unsigned long va_size(const VmapArea* va) { return va->va_end - va->va_start; }

inline VmapArea* va_of_rb(RbNode* n) {
  return reinterpret_cast<VmapArea*>(reinterpret_cast<char*>(n) - offsetof(VmapArea, rb_node));
}
inline const VmapArea* va_of_rb(const RbNode* n) {
  return reinterpret_cast<const VmapArea*>(reinterpret_cast<const char*>(n) - offsetof(VmapArea, rb_node));
}
inline VmapArea* va_of_list(ListHead* l) {
  return reinterpret_cast<VmapArea*>(reinterpret_cast<char*>(l) - offsetof(VmapArea, list));
}
inline const VmapArea* va_of_list(const ListHead* l) {
  return reinterpret_cast<const VmapArea*>(reinterpret_cast<const char*>(l) - offsetof(VmapArea, list));
}

// The line a virtual-clock run tracks for an area, whichever of its fields is read or written: its rb_node's (the
// rbtree code touches rb_nodes). One line per area, wherever the host's heap put it: areas lie at least 72 bytes
// apart, so two areas never share one, and no touch depends on the area's offset within a host line. The kernel's
// 72-byte slab objects do share lines with their neighbours, which the model leaves out.
inline const void* va_line(const VmapArea* va) { return &va->rb_node; }

// get_subtree_max_size(): 0 for an empty subtree.
inline unsigned long get_subtree_max_size(const RbNode* n) { return n ? va_of_rb(n)->subtree_max_size : 0; }

}  // namespace alloclab::vmalloc
