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
// Lazy-tree locks: lock_stat counts them as "vn->lazy.lock" / "purge_vmap_area_lock" when those classes are in
// the lock catalogue; until then they are uncounted spinlocks (SiteLock below) and only the model's per-CPU
// counter `lazy_lock` sees them.
// Leaves out: the purge_work kworker helpers of __purge_vmap_area_lazy (one CPU purges every node),
// vmap_block_queue / vm_map_ram users of the nodes, the node shrinker.
#pragma once

#include <atomic>
#include <optional>
#include <string_view>

#include "alloclab/locks/lock.hpp"
#include "alloclab/mm/vmalloc/va_tree.hpp"

namespace alloclab::vmalloc {

// A lock site whose class may be missing from the catalogue: a counted Lock when the class exists, otherwise
// a plain test-and-test-and-set spinlock outside lock_stat.
class SiteLock {
 public:
  SiteLock(LockDomain& d, std::string_view cls);
  SiteLock(const SiteLock&) = delete;
  SiteLock& operator=(const SiteLock&) = delete;
  void lock(LockToken& t) {
    if (lock_)
      lock_->lock(t);
    else
      raw_lock();
  }
  void unlock(LockToken& t) {
    if (lock_)
      lock_->unlock(t);
    else
      raw_unlock();
  }
  bool counted() const { return lock_.has_value(); }

 private:
  void raw_lock();
  void raw_unlock() {
    vcost::touch(&raw_, true);  // the releasing store on the lock word
    raw_.store(0, std::memory_order_release);
  }
  std::optional<Lock> lock_;
  std::atomic<uint32_t> raw_{0};
  bool yield_ = false;
};

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
  alignas(64) SiteLock lazy_lock;
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
