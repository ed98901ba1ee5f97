// VmallocSpace: set-up, __get_vm_area_node(), alloc_vmap_area(), setup_vmalloc_vm(), remove_vm_area(), vfree()
// (see vmalloc.hpp). Linux v6.9+ mm/vmalloc.c, with the v6.7 shape when nr_vmap_nodes = 1.
#include "alloclab/mm/vmalloc/vmalloc.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace alloclab::vmalloc {

namespace {

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

}  // namespace

VmallocSpace::VmallocSpace(LockDomain& locks, const VmallocConfig& cfg)
    : cfg_(cfg),
      nr_vmap_nodes_(cfg.nr_vmap_nodes),
      lazy_max_pages_(lazy_max_pages_of(cfg)),
      bounce_ticks_(ns_to_ticks(cfg.bounce_ns)),
      tlb_ticks_(ns_to_ticks(cfg.tlb_flush_ns)),
      free_lock_(locks, "free_vmap_area_lock"),
      purge_lock_(locks, "vmap_purge_lock") {
  require(cfg.nr_vmap_nodes >= 1 && cfg.nr_vmap_nodes <= MAX_VMAP_NODES,
          "vmap_nodes: " + std::to_string(cfg.nr_vmap_nodes) + " is outside 1.." + std::to_string(MAX_VMAP_NODES));
  require(IS_ALIGNED(cfg.vstart, PAGE_SIZE) && IS_ALIGNED(cfg.vend, PAGE_SIZE) && cfg.vend > cfg.vstart,
          "vmalloc_size: the range must be a non-empty multiple of PAGE_SIZE");
  require(cfg.nr_cpus >= 1, "nr_cpus: must be at least 1");
  require(cfg.nr_contexts >= 1, "nr_contexts: must be at least 1");
  for (unsigned i = 0; i < nr_vmap_nodes_; ++i) nodes_.push_back(std::make_unique<VmapNode>(locks, v67_shape()));
  cpus_.resize(size_t(cfg.nr_contexts));
  // vmap_init_free_space(): the whole range is one free area.
  VmapCpu& c = cpus_[0];
  VmapArea* va = kmem_cache_alloc_va(c);
  va->va_start = cfg.vstart;
  va->va_end = cfg.vend;
  insert_vmap_area_augment(c, va, nullptr, free_);
}

unsigned long VmallocSpace::lazy_max_pages_of(const VmallocConfig& cfg) {
  if (cfg.lazy_max_pages) return cfg.lazy_max_pages;
  // lazy_max_pages(): fls(num_online_cpus()) * (32 MiB / PAGE_SIZE).
  return unsigned(std::bit_width(cfg.nr_cpus)) * (32ul * 1024 * 1024 / PAGE_SIZE);
}

// Every vmap_area and vm_struct lives in the contexts' slabs, which go with cpus_: nothing is visited.
VmallocSpace::~VmallocSpace() = default;

std::string_view VmallocSpace::busy_lock_class() const { return v67_shape() ? "vmap_area_lock" : "vn->busy.lock"; }
std::string_view VmallocSpace::lazy_lock_class() const {
  return v67_shape() ? "purge_vmap_area_lock" : "vn->lazy.lock";
}

VmStruct* VmallocSpace::get_vm_area(VmapCpu& c, unsigned long size, unsigned long align, unsigned long flags,
                                    const void* caller) {
  if (size == 0) throw std::invalid_argument("size: 0 bytes (must be at least 1)");
  if (!is_power_of_2(align)) throw std::invalid_argument("align: " + std::to_string(align) + " is not a power of two");
  const unsigned long requested_size = size;
  size = PAGE_ALIGN(size);  // ALIGN(size, 1ul << shift) with shift = PAGE_SHIFT
  if (size == 0 || size > cfg_.vend - cfg_.vstart)
    throw std::invalid_argument("size: " + std::to_string(requested_size) + " bytes do not fit the vmalloc range");
  VmStruct* area = c.vm_cache.alloc();  // kzalloc_node()
  if (!(flags & VM_NO_GUARD)) size += PAGE_SIZE;

  VmapArea* va;
  if (cfg_.busy_lock_once) {
    // As merged (v6.10, aaab830ad887 + Baoquan He's follow-up): the caller's fields first, the address and
    // va->vm inside alloc_vmap_area() before its single busy-lock section.
    area->flags = flags;
    area->caller = caller;
    area->requested_size = requested_size;
    va = alloc_vmap_area(c, size, align, cfg_.vstart, cfg_.vend, 0, area);
  } else {
    va = alloc_vmap_area(c, size, align, cfg_.vstart, cfg_.vend, 0, nullptr);
  }
  if (!va) {
    c.vm_cache.free(area);
    return nullptr;
  }
  if (!cfg_.busy_lock_once) {
    area->requested_size = requested_size;
    setup_vmalloc_vm(c, area, va, flags, caller);  // the second busy-lock acquisition
  }
  ++c.st.allocs;
  return area;
}

VmapArea* VmallocSpace::alloc_vmap_area(VmapCpu& c, unsigned long size, unsigned long align, unsigned long vstart,
                                        unsigned long vend, unsigned long va_flags, VmStruct* vm) {
  if (size == 0 || !IS_ALIGNED(size, PAGE_SIZE) || !is_power_of_2(align))
    throw std::invalid_argument("alloc_vmap_area: size must be a non-zero page multiple and align a power of two");

  // A hit in this CPU's node pool needs no free_vmap_area_lock. On a miss the area still carries the vn_id, so
  // that it goes back to this node's pool when it is purged: pools fill on demand.
  unsigned long addr;
  unsigned vn_id;
  VmapArea* va = node_alloc(c, size, align, vstart, vend, &addr, &vn_id);
  if (!va) va = kmem_cache_alloc_va(c);

  bool purged = false;
  for (;;) {
    if (addr == vend) {
      // preload_this_cpu_lock(): an object for an NE_FIT_TYPE split, allocated before the lock is taken.
      if (!c.ne_fit_preload_node) c.ne_fit_preload_node = kmem_cache_alloc_va(c);
      ScopedLock g(free_lock_);
      ++c.st.free_lock_alloc;
      touch(free_last_cpu_, c);
      addr = alloc_from_free_tree(c, free_, size, align, vstart, vend);
    }
    if (addr != vend) break;
    // overflow: purge the lazy areas (and drain the pools) once, then retry.
    if (purged) {
      kmem_cache_free_va(c, va);
      ++c.st.alloc_failures;  // "vmalloc_node_range for size %lu failed: Address range full"
      return nullptr;
    }
    ++c.st.overflow_purges;
    reclaim_and_purge_vmap_areas(c);
    purged = true;
  }

  vcost::touch(va_line(va), true);
  va->va_start = addr;
  va->va_end = addr + size;
  va->vm = nullptr;
  va->flags = va_flags | vn_id;
  if (vm) {
    vm->addr = addr;
    vm->size = va_size(va);
    va->vm = vm;
  }
  if (!IS_ALIGNED(va->va_start, align) || va->va_start < vstart || va->va_end > vend)
    throw std::logic_error("alloc_vmap_area: BUG_ON: area outside [vstart, vend) or misaligned");

  VmapNode* vn = addr_to_node(va->va_start);
  bool inserted;
  {
    ScopedLock g(vn->busy_lock);
    ++c.st.busy_lock_alloc;
    touch(vn->busy_last_cpu, c);
    inserted = insert_vmap_area(c, va, vn->busy);
  }
  if (!inserted) throw std::logic_error("alloc_vmap_area: vmalloc bug: the new area overlaps a busy area");
  return va;
}

void VmallocSpace::setup_vmalloc_vm(VmapCpu& c, VmStruct* vm, VmapArea* va, unsigned long flags, const void* caller) {
  VmapNode* vn = addr_to_node(va->va_start);
  ScopedLock g(vn->busy_lock);
  ++c.st.busy_lock_alloc;
  ++c.st.busy_lock_setup;
  touch(vn->busy_last_cpu, c);
  // setup_vmalloc_vm_locked()
  vm->flags = flags;
  vm->addr = va->va_start;
  vm->size = va->va_end - va->va_start;
  vm->caller = caller;
  va->vm = vm;
}

VmapArea* VmallocSpace::busy_lookup(VmapCpu& c, unsigned long addr, uint64_t& taken, bool unlink) {
  // An area lives in the busy tree of addr_to_node(va_start); the kernel still walks every node if needed.
  unsigned i = addr_to_node_id(addr);
  const unsigned j = i;
  do {
    VmapNode* vn = nodes_[i].get();
    ScopedLock g(vn->busy_lock);
    ++taken;
    touch(vn->busy_last_cpu, c);
    if (VmapArea* va = find_vmap_area_in(addr, &vn->busy.root)) {
      if (unlink) unlink_va(va, &vn->busy.root, false);
      return va;
    }
  } while ((i = (i + 1) % nr_vmap_nodes_) != j);
  return nullptr;
}

VmapArea* VmallocSpace::find_unlink_vmap_area(VmapCpu& c, unsigned long addr) {
  return busy_lookup(c, addr, c.st.busy_lock_free, true);
}

VmStruct* VmallocSpace::find_vm_area(VmapCpu& c, unsigned long addr) {
  // find_vmap_area() (v6.7: spin_lock(&vmap_area_lock); __find_vmap_area(addr, &vmap_area_root); v6.9+: the same
  // under each node's busy lock).
  VmapArea* va = busy_lookup(c, addr, c.st.busy_lock_find, false);
  if (!va) return nullptr;
  vcost::touch(va_line(va), false);  // va->vm, read after the unlock (find_vm_area())
  return va->vm;
}

VmStruct* VmallocSpace::remove_vm_area(VmapCpu& c, unsigned long addr) {
  if (!IS_ALIGNED(addr, PAGE_SIZE)) return nullptr;  // WARN "Trying to vfree() bad address"
  VmapArea* va = find_unlink_vmap_area(c, addr);
  if (!va) return nullptr;
  VmStruct* vm = va->vm;
  if (!vm) throw std::logic_error("remove_vm_area: busy area without a vm_struct");
  // free_unmap_vmap_area(): vunmap_range_noflush() (page tables: not modelled) + free_vmap_area_noflush().
  free_vmap_area_noflush(c, va);
  ++c.st.frees;
  return vm;
}

void VmallocSpace::free_vm_struct(VmapCpu& c, VmStruct* vm) { c.vm_cache.free(vm); }

bool VmallocSpace::vfree(VmapCpu& c, unsigned long addr) {
  VmStruct* vm = remove_vm_area(c, addr);
  if (!vm) return false;
  free_vm_struct(c, vm);
  return true;
}

VmallocStats VmallocSpace::stats() const {
  VmallocStats s;
  for (const auto& c : cpus_) s += c.st;
  return s;
}

void VmallocSpace::reset_stats() {
  for (auto& c : cpus_) {
    const uint64_t a = c.st.va_objs_alloc, f = c.st.va_objs_free;
    c.st = VmallocStats{};
    c.st.va_objs_alloc = a;
    c.st.va_objs_free = f;
  }
}

}  // namespace alloclab::vmalloc
