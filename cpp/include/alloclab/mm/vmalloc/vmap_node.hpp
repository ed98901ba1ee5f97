// struct vmap_node: the busy tree, the lazy tree and the size-class pools of one vmap node.
//
// Models Linux v6.9+ mm/vmalloc.c (Uladzislau Rezki's "vmap node" series, merged for v6.9):
//   * nr_vmap_nodes busy trees `vn->busy` {root, head, lock}, chosen by address: addr_to_node(addr) =
//     &vmap_nodes[(addr / vmap_zone_size) % nr_vmap_nodes] with vmap_zone_size = 16 pages;
//   * lazy trees `vn->lazy` (freed areas waiting for a purge), chosen by the vn_id the area was allocated with
//     (encode_vn_id/decode_vn_id in va->flags bits 8 and up) so that it returns to that node's pool;
//   * pool[MAX_VA_SIZE_PAGES] of free areas of exactly (i + 1) pages under vn->pool_lock:
//     node_pool_add_va(), node_pool_del_va() (pops the head if it is aligned, else rotates it to the tail),
//     decay_va_pool_node() (gives ~25 % of each pool back to the free tree per purge; all of it on a full
//     decay), size_to_va_pool().
// The v6.7 shape is one node (nr_vmap_nodes = 1): its busy tree is the global vmap_area_root under
// vmap_area_lock and its lazy tree is purge_vmap_area_root (areas merged on insert) under purge_vmap_area_lock;
// it has no pools. The busy-lock class is "vmap_area_lock" in that shape and "vn->busy.lock" otherwise.
// The lazy-tree lock's class is "purge_vmap_area_lock" in the v6.7 shape and "vn->lazy.lock" otherwise.
// Leaves out: the purge_work kworker helpers of __purge_vmap_area_lazy (one CPU purges every node),
// vmap_block_queue / vm_map_ram users of the nodes, the node shrinker.
#pragma once

#include <atomic>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/vmalloc/va_tree.hpp"

namespace alloclab::vmalloc {

// Holds a lock for a scope (spin_lock/spin_unlock pair) on anything with lock(LockToken&)/unlock(LockToken&).
template <class L>
class ScopedLock {
 public:
  explicit ScopedLock(L& l) : l_(l) { l_.lock(t_); }
  ~ScopedLock() { l_.unlock(t_); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  L& l_;
  LockToken t_;
};

struct VmapPool {
  ListHead head;
  std::atomic<unsigned long> len{0};  // READ_ONCE/WRITE_ONCE in the kernel; read without the lock
};

struct alignas(64) VmapNode {
  VmapNode(LockDomain& d, bool v67_shape);
  VmapNode(const VmapNode&) = delete;
  VmapNode& operator=(const VmapNode&) = delete;

  // busy: allocated areas, looked up by vfree.
  Lock busy_lock;
  VaTree busy;
  int busy_last_cpu = -1;  // under busy_lock: the CPU that last pulled the tree's cache lines (bounce_ns)
  // lazy: freed areas waiting for the TLB flush of a purge.
  alignas(64) Lock lazy_lock;
  VaTree lazy;
  int lazy_last_cpu = -1;
  std::atomic<uint64_t> lazy_count{0};  // !RB_EMPTY_ROOT(&vn->lazy.root), read without the lock by the purge
  // Size-class pools (v6.9+ only).
  alignas(64) Lock pool_lock;
  int pool_last_cpu = -1;
  VmapPool pool[MAX_VA_SIZE_PAGES];
  // Purge state (under vmap_purge_lock).
  ListHead purge_list;
  unsigned long nr_purged = 0;
  bool skip_populate = false;
};

// size_to_va_pool(): the pool for areas of exactly `size` bytes, or null above MAX_VA_SIZE_PAGES pages.
inline VmapPool* size_to_va_pool(VmapNode* vn, unsigned long size) {
  const unsigned long idx = (size - 1) / PAGE_SIZE;
  return idx < MAX_VA_SIZE_PAGES ? &vn->pool[idx] : nullptr;
}

}  // namespace alloclab::vmalloc
