// VmallocSpace: the state of mm/vmalloc.c for one run — the free tree, the vmap nodes, lazy free and purge — and
// its entry points __get_vm_area_node() / alloc_vmap_area() / remove_vm_area() / vfree().
//
// Models Linux v6.9+ (vmap_node, per-node pools) and, with nr_vmap_nodes = 1, v6.7 (one busy tree under
// vmap_area_lock, one merged lazy tree under purge_vmap_area_lock, no pools). Lock acquisitions are the kernel's:
//   alloc_vmap_area():   [pool hit: vn->pool_lock ×1, no free_vmap_area_lock]
//                        [pool miss / v6.7: vn->pool_lock ×(0|1), free_vmap_area_lock ×1]
//                        busy lock ×1 (insert_vmap_area into addr_to_node(va_start)->busy)
//   __get_vm_area_node() with busy_lock_once = false (before commit aaab830ad887, "mm/vmalloc: Eliminated the
//                        lock contention from twice to once"): setup_vmalloc_vm() takes the busy lock again;
//                        with busy_lock_once = true the vm fields are set before the single insert.
//   find_vm_area():      busy lock ×1 per node it looks at (find_vmap_area: addr_to_node(addr) first, which holds
//                        an area that starts at addr; v6.7: the global vmap_area_lock once).
//   remove_vm_area():    busy lock ×1 (find_unlink_vmap_area), lazy lock ×1 (free_vmap_area_noflush).
//   drain (lazy pages > lazy_max_pages = fls(ncpus) × 32 MiB): vmap_purge_lock, then per node: pool decay
//                        (pool_lock, free_vmap_area_lock), lazy detach (lazy lock), one TLB flush for all,
//                        purge_vmap_node (pool_lock per area returned to a pool, free_vmap_area_lock once).
// Every acquisition is also counted per site in the calling CPU's VmallocStats, so a run can check its lock_stat
// against the model (busy-lock acquisitions per allocation are exactly 2 or 1).
// Costs that are modelled, not performed: flush_tlb_kernel_range (tlb_flush_ns per purge) and, optionally, the
// cache-line transfer of a lock's data when the previous holder was another CPU (bounce_ns, charged inside the
// critical sections of the busy, free, pool and lazy locks: the "handoff cost" of a big machine). In a virtual-clock
// run the trees, lists and counters charge their steps and lines themselves (rbtree.hpp, list.hpp, va_tree.hpp,
// free_space.hpp) and the coherence model moves the lines: leave bounce_ns at 0 there, or it is counted twice.
// Leaves out: KASAN (kasan_populate_vmalloc), the vmap_notify_list shrinkers, vmap blocks / vm_map_ram,
// huge-page mappings, the kworker helpers of a purge (the CPU that queues the drain runs it, synchronously,
// once at a time, like a work item that cannot be queued twice), cond_resched. See vmap_node.hpp for the nodes.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>
#include <vector>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/vmalloc/free_space.hpp"
#include "alloclab/mm/vmalloc/vmap_node.hpp"

namespace alloclab::vmalloc {

struct VmallocConfig {
  unsigned long vstart = VMALLOC_START;
  unsigned long vend = VMALLOC_START + VMALLOC_SIZE_DEFAULT;
  unsigned nr_vmap_nodes = 1;        // 1: the v6.7 shape; 2..128: v6.9+
  bool pools = true;                 // v6.9+ node_alloc() pools (false: every allocation searches the free tree)
  bool busy_lock_once = true;        // false: the pre-patch setup_vmalloc_vm() takes the busy lock a second time
  unsigned nr_cpus = 1;              // num_online_cpus(), for lazy_max_pages()
  unsigned long lazy_max_pages = 0;  // 0: fls(nr_cpus) * 32 MiB / PAGE_SIZE, as lazy_max_pages()
  uint64_t tlb_flush_ns = 0;         // cost of one flush_tlb_kernel_range() (calibrated busy-wait)
  uint64_t bounce_ns = 0;            // cost of pulling a lock's data from another CPU (calibrated busy-wait)
  int nr_contexts = 1;               // per-CPU contexts (one per thread that calls in)
};

// An interval of the vmalloc space, for snapshots and invariant checks.
struct Extent {
  unsigned long start, end;
  bool operator<(const Extent& o) const { return start < o.start; }
  bool operator==(const Extent&) const = default;
};

class VmallocSpace {
 public:
  // Throws std::invalid_argument naming the field for an unusable configuration.
  VmallocSpace(LockDomain& locks, const VmallocConfig& cfg);
  ~VmallocSpace();
  VmallocSpace(const VmallocSpace&) = delete;
  VmallocSpace& operator=(const VmallocSpace&) = delete;

  const VmallocConfig& config() const { return cfg_; }
  unsigned nr_vmap_nodes() const { return nr_vmap_nodes_; }
  bool v67_shape() const { return nr_vmap_nodes_ == 1; }
  unsigned long lazy_max_pages() const { return lazy_max_pages_; }
  static unsigned long lazy_max_pages_of(const VmallocConfig& cfg);  // what lazy_max_pages() will be
  // "vmap_area_lock" (v6.7 shape) or "vn->busy.lock" (v6.9+).
  std::string_view busy_lock_class() const;
  std::string_view lazy_lock_class() const;

  VmapCpu& cpu(int ctx) { return cpus_[size_t(ctx)]; }
  int nr_contexts() const { return int(cpus_.size()); }

  // __get_vm_area_node(size, align, PAGE_SHIFT, flags, VMALLOC_START, VMALLOC_END): the vm_struct of a fresh
  // area of PAGE_ALIGN(size) bytes plus a guard page (unless VM_NO_GUARD), or null when the space is full even
  // after a purge. Throws std::invalid_argument for size 0 or an align that is not a power of two.
  VmStruct* get_vm_area(VmapCpu& c, unsigned long size, unsigned long align, unsigned long flags = VM_ALLOC,
                        const void* caller = nullptr);
  // alloc_vmap_area(): a busy area of exactly `size` (page multiple) bytes in [vstart, vend), bound to `vm` when
  // given (setup before the insert); null when nothing fits even after reclaim_and_purge_vmap_areas().
  VmapArea* alloc_vmap_area(VmapCpu& c, unsigned long size, unsigned long align, unsigned long vstart,
                            unsigned long vend, unsigned long va_flags, VmStruct* vm);
  // find_vm_area(): the vm_struct of the busy area containing addr, or null (also for an area without one), looked
  // up by find_vmap_area() under the busy lock: v6.7 the global vmap_area_lock; v6.9+ vn->busy.lock of
  // addr_to_node(addr), then of the following nodes until one holds it (an area that starts at addr is on the
  // first). kernel/fork.c alloc_thread_stack_node() calls it on every stack __vmalloc_node_range() returned.
  VmStruct* find_vm_area(VmapCpu& c, unsigned long addr);
  // remove_vm_area(): unlinks the busy area starting at addr and frees it lazily; returns its vm_struct (the
  // caller frees its pages and their array, then free_vm_struct()), or null for an address that is not a vmalloc
  // area.
  VmStruct* remove_vm_area(VmapCpu& c, unsigned long addr);
  void free_vm_struct(VmapCpu& c, VmStruct* vm);  // kfree(vm) on context c
  // vfree() of an area without pages: remove_vm_area() + kfree(vm). False if addr was not a vmalloc area.
  bool vfree(VmapCpu& c, unsigned long addr);

  // drain_vmap_area_work(): vmap_purge_lock + __purge_vmap_area_lazy(), pools decayed by ~25 %.
  void purge_vmap_area_lazy(VmapCpu& c);
  // reclaim_and_purge_vmap_areas(): the same with a full pool decay and no repopulation (what an allocation
  // that found no space does before retrying). Afterwards, with no busy areas, the free tree is one area.
  void reclaim_and_purge_vmap_areas(VmapCpu& c);
  unsigned long vmap_lazy_nr() const { return vmap_lazy_nr_.load(std::memory_order_relaxed); }

  // --- introspection: only while no other thread calls in ---------------------------------------------------
  struct Snapshot {
    std::vector<Extent> free, busy, lazy, pooled;  // each sorted by start
    uint64_t objects = 0;                          // vmap_area objects held (incl. preloaded ones)
  };
  Snapshot snapshot() const;
  // Checks every tree (red-black rules, order, list = in-order walk, subtree_max_size, free areas coalesced,
  // busy areas on addr_to_node(), pool size classes and lengths), that free + busy + lazy + pooled cover
  // [vstart, vend) exactly with no overlap, that vmap_lazy_nr matches the lazy pages, that no vmap_area object
  // leaked and that find_va_links() never saw an overlap. Throws std::logic_error describing the first problem.
  void verify() const;
  VmallocStats stats() const;  // summed over the contexts
  void reset_stats();          // zeroes the event counters (object accounting is kept)

  VaTree& free_tree() { return free_; }
  VmapNode& node(unsigned id) { return *nodes_[id]; }
  unsigned addr_to_node_id(unsigned long addr) const { return unsigned((addr / VMAP_ZONE_SIZE) % nr_vmap_nodes_); }
  VmapNode* addr_to_node(unsigned long addr) { return nodes_[addr_to_node_id(addr)].get(); }

 private:
  // vn_id encoding in va->flags (encode_vn_id / decode_vn_id / is_vn_id_valid).
  unsigned encode_vn_id(unsigned id) const { return id < nr_vmap_nodes_ ? (id + 1) << 8 : 0; }
  unsigned decode_vn_id(unsigned long flags) const {
    const unsigned id = unsigned((flags >> 8) & 0xffffff) - 1;
    return id < nr_vmap_nodes_ ? id : nr_vmap_nodes_;
  }
  bool is_vn_id_valid(unsigned id) const { return id < nr_vmap_nodes_; }
  // Charges bounce_ns when the data under a lock was last touched by another CPU. Call with the lock held.
  void touch(int& last_cpu, const VmapCpu& c) const {
    if (bounce_ticks_ && last_cpu != c.cpu) spin_for_ticks(bounce_ticks_);
    last_cpu = c.cpu;
  }

  VmapArea* node_alloc(VmapCpu& c, unsigned long size, unsigned long align, unsigned long vstart, unsigned long vend,
                       unsigned long* addr, unsigned* vn_id);
  VmapArea* node_pool_del_va(VmapCpu& c, VmapNode* vn, unsigned long size, unsigned long align, unsigned long vstart,
                             unsigned long vend);
  bool node_pool_add_va(VmapCpu& c, VmapNode* vn, VmapArea* va);
  void decay_va_pool_node(VmapCpu& c, VmapNode* vn, bool full_decay);
  void reclaim_list_global(VmapCpu& c, ListHead* head);
  void setup_vmalloc_vm(VmapCpu& c, VmStruct* vm, VmapArea* va, unsigned long flags, const void* caller);
  VmapArea* find_unlink_vmap_area(VmapCpu& c, unsigned long addr);
  // The busy area starting at addr, looked up under each node's busy lock from addr_to_node_id(addr) round the nodes
  // until one holds it (find_vmap_area's and find_unlink_vmap_area's walk), counting each acquisition in `taken`;
  // with `unlink` it is unlinked from its node's busy tree under that lock. Null when no node holds it.
  VmapArea* busy_lookup(VmapCpu& c, unsigned long addr, uint64_t& taken, bool unlink);
  void free_vmap_area_noflush(VmapCpu& c, VmapArea* va);
  bool purge_lazy_locked(VmapCpu& c, bool full_pool_decay);  // __purge_vmap_area_lazy(), vmap_purge_lock held
  void purge_vmap_node(VmapCpu& c, VmapNode* vn);
  void flush_tlb_kernel_range(VmapCpu& c, unsigned long start, unsigned long end);

  VmallocConfig cfg_;
  unsigned nr_vmap_nodes_;
  unsigned long lazy_max_pages_;
  uint64_t bounce_ticks_, tlb_ticks_;
  // free_vmap_area_root / free_vmap_area_list under free_vmap_area_lock.
  Lock free_lock_;
  VaTree free_;
  int free_last_cpu_ = -1;
  Lock purge_lock_;  // vmap_purge_lock (a mutex)
  std::vector<std::unique_ptr<VmapNode>> nodes_;
  alignas(64) std::atomic<unsigned long> vmap_lazy_nr_{0};
  alignas(64) std::atomic<bool> drain_pending_{false};  // drain_vmap_work queued or running
  std::vector<VmapCpu> cpus_;
};

}  // namespace alloclab::vmalloc
