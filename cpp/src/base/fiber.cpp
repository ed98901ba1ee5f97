// Fiber switches: Boost.Context's jump, the exception-handling globals exchanged around it, the sanitizers told.
//
// At every switch, on the side that leaves: keep its exception globals and install the arriving side's, tell ASan
// which stack comes next (start_switch_fiber) and TSan which fiber (switch_to_fiber), jump. On the side that arrives:
// store the left side's suspended context, tell ASan the switch is complete (finish_switch_fiber, which also reports
// the left stack's bounds: that is how the host's are learnt). A fiber that finishes cannot run code after Boost's
// exit jump, so the arriving side tells TSan for it, first thing after the jump.
#include "alloclab/base/fiber.hpp"

#include <cxxabi.h>

#include <boost/context/preallocated.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace alloclab::vt {

namespace {
// Thrown by switch_to() into a fiber being unwound; caught only by its bottom frame.
struct FiberUnwind {};
}  // namespace

Fiber::Fiber() : eh_globals_(abi::__cxa_get_globals()) {
#if defined(__SANITIZE_THREAD__)
  tsan_ = __tsan_get_current_fiber();
#endif
}

Fiber::Fiber(Fiber& parent, std::size_t stack_size, std::function<void()> entry)
    : eh_globals_(abi::__cxa_get_globals()), parent_(&parent), entry_(std::move(entry)) {
  boost::context::protected_fixedsize_stack alloc(stack_size);
  boost::context::stack_context stack = alloc.allocate();
  stack_bottom_ = static_cast<char*>(stack.sp) - stack.size;
  stack_size_ = stack.size;
#if defined(__SANITIZE_THREAD__)
  // Boost's constructor jumps onto the new stack and back once: TSan sees that as the new fiber's code.
  void* const creator = __tsan_get_current_fiber();
  tsan_ = __tsan_create_fiber(0);
  __tsan_switch_to_fiber(tsan_, 0);
#endif
  // The top of the stack is moved down by 0..15 x 256 bytes, picked by the mapping's address: with every top at the
  // same offset from a page boundary, all fibers' hot top-of-stack lines fall in the same few cache sets (512 CPUs
  // switch 25% slower then, bench_vsim). Boost puts its record at the top, 256-byte aligned.
  const std::size_t color = (reinterpret_cast<uintptr_t>(stack.sp) >> 12) % 16 * 256;
  ctx_ = boost::context::fiber(
      std::allocator_arg, boost::context::preallocated(static_cast<char*>(stack.sp) - color, stack.size - color, stack),
      alloc, [this](boost::context::fiber&& from) { return bottom(std::move(from)); });
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(creator, 0);
#endif
}

Fiber::~Fiber() {
  if (!parent_) return;  // a host context
  unwind();
#if defined(__SANITIZE_THREAD__)
  __tsan_destroy_fiber(tsan_);
#endif
}

void Fiber::switch_eh(const Fiber& to) noexcept {
  std::memcpy(&eh_, eh_globals_, sizeof eh_);
  std::memcpy(eh_globals_, &to.eh_, sizeof eh_);
}

void Fiber::switch_to(Fiber& to) {
  if (unwinding_) {
    if (std::uncaught_exceptions() == 0) throw FiberUnwind{};
    return;
  }
  to.from_ = this;
  switch_eh(to);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(&fake_stack_, to.stack_bottom_, to.stack_size_);
#endif
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(to.tsan_, 0);
#endif
  boost::context::fiber from = std::move(to.ctx_).resume();
#if defined(__SANITIZE_THREAD__)
  // Boost's exit ran as the finished fiber: tell TSan before any call, or the calls' entries and exits would land on
  // two different fibers' shadow stacks.
  if (from_->finished_) __tsan_switch_to_fiber(tsan_, 0);
#endif
  arrived(std::move(from));
  if (unwinding_ && std::uncaught_exceptions() == 0) throw FiberUnwind{};
}

void Fiber::arrived(boost::context::fiber&& from) {
  from_->ctx_ = std::move(from);  // empty when from_ finished
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack_, &from_->stack_bottom_, &from_->stack_size_);
  // A finished fiber's stack is unmapped by now, but the redzones of its frames that never returned (the bottom
  // one's) stay poisoned in ASan's shadow: the next mapping at that address (mmap reuses it) would read as stack.
  if (from_->finished_) __asan_unpoison_memory_region(from_->stack_bottom_, from_->stack_size_);
#endif
}

void Fiber::unwind() {
  if (finished_) return;
  unwinding_ = true;
  parent_->switch_to(*this);
}

boost::context::fiber Fiber::bottom(boost::context::fiber&& from) {
  arrived(std::move(from));
  if (!unwinding_) {
    try {
      entry_();
    } catch (const FiberUnwind&) {
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  finished_ = true;
  Fiber& to = *parent_;
  to.from_ = this;
  switch_eh(to);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom_, to.stack_size_);  // nullptr: the fake frames die here
#endif
  return std::move(to.ctx_);
}

}  // namespace alloclab::vt
