// LineAligned: storage that starts on a 64-byte cache line, wherever the host's heap puts it.
//
// Models: nothing of the kernel. A virtual-clock run keeps coherence state per cache line of the model's own memory
// (cost_model.hpp), so which elements of an array share a line must not depend on where malloc put the array (16-byte
// aligned, at an offset that changes from run to run): that would make virtual times depend on the host's heap.
// Arrays the cost model tracks are line_vectors, and objects it tracks are alignas(64) or live in node memory.
// Leaves out: page alignment (a line is what coherence cares about).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace alloclab {

inline constexpr std::size_t kCacheLine = 64;

// An allocator whose blocks start on a cache line.
template <class T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <class U>
  LineAligned(const LineAligned<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine))); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const LineAligned<U>&) const noexcept {
    return true;
  }
};

// A vector whose first element starts a cache line.
template <class T>
using line_vector = std::vector<T, LineAligned<T>>;

}  // namespace alloclab
