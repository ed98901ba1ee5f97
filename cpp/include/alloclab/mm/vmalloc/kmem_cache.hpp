// KmemCache: a kmem_cache of one object type for one CPU context (vmap_area_cachep, and vm_struct's kmalloc slab).
//
// Models SLUB's per-CPU fast path: objects are carved from slabs of kSlabObjects, and a freed object goes onto the
// freeing CPU's freelist, which that CPU's next allocation takes first (LIFO, so the hottest object is reused).
// An object may be freed on another CPU than the one whose slab it came from, as in the kernel; all caches of one
// VmallocSpace therefore live as long as the space, and their slabs go with them without visiting a single object:
// a stopped run of millions of areas is released at once.
// Leaves out: slab pages' own freelists and partial lists (memory only returns when the cache goes), object
// constructors, debugging, memory-pressure failure (an allocation never fails).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace alloclab::vmalloc {

template <class T>
class KmemCache {
  static_assert(std::is_trivially_destructible_v<T>, "slabs are released without running destructors");

 public:
  static constexpr size_t kSlabObjects = 1024;

  KmemCache() = default;
  KmemCache(KmemCache&& o) noexcept
      : slabs_(std::move(o.slabs_)),
        next_(std::exchange(o.next_, nullptr)),
        left_(std::exchange(o.left_, 0)),
        free_(std::exchange(o.free_, nullptr)) {}
  KmemCache(const KmemCache&) = delete;
  KmemCache& operator=(const KmemCache&) = delete;
  KmemCache& operator=(KmemCache&&) = delete;

  // kmem_cache_alloc(): the last object freed on this CPU, else the next one of the current slab.
  T* alloc() {
    void* p;
    if (free_) {
      p = free_;
      free_ = free_->next;
    } else {
      if (left_ == 0) {
        slabs_.push_back(std::make_unique<Object[]>(kSlabObjects));
        next_ = slabs_.back().get();
        left_ = kSlabObjects;
      }
      p = next_++;
      --left_;
    }
    return new (p) T;
  }
  // kmem_cache_free(): onto this CPU's freelist.
  void free(T* obj) {
    obj->~T();
    auto* f = new (obj) Free{free_};
    free_ = f;
  }

 private:
  struct Free {
    Free* next;
  };
  union Object {
    Free free;
    alignas(T) unsigned char bytes[sizeof(T)];
  };
  std::vector<std::unique_ptr<Object[]>> slabs_;
  Object* next_ = nullptr;  // the current slab's next uncarved object
  size_t left_ = 0;         // uncarved objects left in it
  Free* free_ = nullptr;    // freed objects, most recent first
};

}  // namespace alloclab::vmalloc
