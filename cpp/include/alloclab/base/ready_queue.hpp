// ReadyQueue: the runnable virtual CPUs of the simulator, earliest (clock, cpu) first.
//
// Models: nothing of the machine; it is the simulator's scheduling order. A binary min-heap over one 128-bit key per
// CPU, clock in the high half and CPU id in the low one, so (clock, cpu) order is one integer comparison and the
// choice between two children is a conditional move, not a branch. replace_top() (a CPU that yields is pushed while
// the earliest is popped, in one pass down the heap) is why this is not std::push_heap/std::pop_heap: a yield is
// one sift-down instead of a sift-down and a sift-up, about 10% less per switch at 64 and 512 CPUs (bench_vsim).
// Leaves out: decrease-key (a ready CPU's clock never changes until it runs).
#pragma once

#include <cstddef>
#include <vector>

#include "alloclab/base/vclock.hpp"

namespace alloclab::vt {

class ReadyQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  void clear() noexcept { heap_.clear(); }
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }

  // Whether some ready CPU comes before (clock, cpu).
  bool before(vtime clock, int cpu) const noexcept { return !heap_.empty() && heap_[0] < key(clock, cpu); }
  // The earliest ready CPU. Not when empty.
  int top_cpu() const noexcept { return cpu_of(heap_[0]); }

  void push(vtime clock, int cpu) {
    heap_.push_back(key(clock, cpu));
    std::size_t i = heap_.size() - 1;
    const Key k = heap_[i];
    while (i > 0 && k < heap_[(i - 1) / 2]) {
      heap_[i] = heap_[(i - 1) / 2];
      i = (i - 1) / 2;
    }
    heap_[i] = k;
  }
  // Removes the earliest ready CPU and returns it. Not when empty.
  int pop() {
    const Key top = heap_[0];
    const Key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(last);
    return cpu_of(top);
  }
  // push(clock, cpu) then pop(), in one pass. Requires before(clock, cpu): returns the CPU that was earliest.
  int replace_top(vtime clock, int cpu) {
    const Key top = heap_[0];
    sift_down(key(clock, cpu));
    return cpu_of(top);
  }
  // Whether pred(cpu) holds for some ready CPU (any order).
  template <class Pred>
  bool any(Pred&& pred) const {
    for (const Key k : heap_)
      if (pred(cpu_of(k))) return true;
    return false;
  }

 private:
  using Key = unsigned __int128;
  static Key key(vtime clock, int cpu) noexcept { return Key(clock) << 64 | Key(unsigned(cpu)); }
  static int cpu_of(Key k) noexcept { return int(uint64_t(k)); }
  // Puts `k` at the root's place and moves it down to where it belongs.
  void sift_down(Key k) noexcept {
    const std::size_t n = heap_.size();
    std::size_t i = 0;
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n) child += heap_[child + 1] < heap_[child];
      if (!(heap_[child] < k)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = k;
  }

  std::vector<Key> heap_;
};

}  // namespace alloclab::vt
