// Fiber: a thread of control that switches directly to another — a stackful coroutine on its own guarded stack, or
// the host thread's own context — carrying everything a switch must carry.
//
// Models: one virtual CPU's thread of control in the virtual-time simulator (scheduler.hpp), which switches from the
// CPU that stops to the CPU that runs next without passing through the host (one jump per scheduling decision). The
// jump is Boost.Context's (boost::context::fiber over fcontext: callee-saved registers, a few nanoseconds); the stack
// is boost::context::protected_fixedsize_stack (mmap with a PROT_NONE guard page below it: an overflow faults at once
// instead of writing into a neighbour). Besides registers, a switch here carries
//   * the C++ exception-handling globals (__cxa_eh_globals: the stack of caught exceptions and the uncaught count),
//     which the Itanium C++ ABI keeps per host thread: each context keeps its own, so a fiber that switches inside a
//     catch block or during stack unwinding neither sees nor corrupts another's (`throw;`, std::current_exception()
//     and std::uncaught_exceptions() stay per fiber), as Mordor's and YT's fibers do;
//   * AddressSanitizer's fiber annotations (__sanitizer_start/finish_switch_fiber: ASan learns which stack is live)
//     and ThreadSanitizer's (__tsan_create/switch_to/destroy_fiber: each fiber is a TSan thread of its own and every
//     switch orders the two sides), compiled in only under those sanitizers. Debian's Boost 1.74 annotates only its
//     ucontext back-end (a system call per switch), so this file annotates the fcontext one itself.
// A fiber runs until its entry returns or throws, then switches to its parent (the host context that started it),
// keeping what it threw. Unwinding: unwind() switches into a started fiber with its pending switch_to() throwing
// FiberUnwind, which only the fiber's bottom frame catches, so every object on its stack is destroyed (what
// destroying a suspended boost::context::fiber does with Boost's forced_unwind, but through this file's annotated
// switch); a fiber never started never runs its entry. Bodies that catch (...) must rethrow what they do not know,
// as with forced_unwind or thread cancellation.
// Leaves out: moving contexts between host threads (all contexts that switch to each other live on the thread that
// created them); Boost's first jump into a new stack, inside its constructor, is not annotated for ASan (a few
// instructions that touch no stack object) and runs as the new fiber for TSan.
#pragma once

#include <boost/context/fiber.hpp>
#include <cstddef>
#include <exception>
#include <functional>

namespace alloclab::vt {

namespace detail {
// The Itanium C++ ABI's per-thread exception-handling state, laid out as libstdc++ and libc++abi lay it out.
struct EhGlobals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
#if defined(__ARM_EABI_UNWINDER__)
  void* propagating_exceptions;
#endif
};
}  // namespace detail

class Fiber {
 public:
  // The calling host thread's own context: the parent that starts fibers and that they switch to when they finish.
  Fiber();
  // A fiber that will run `entry` on a stack of `stack_size` bytes (rounded up to whole pages; up to 3.75 KiB of it
  // skipped at the top so that the fibers' busiest lines spread over the cache) with a guard page below it, on the
  // thread that creates it, and switch to `parent` when `entry` is done; does not start it. Throws std::bad_alloc
  // when the stack cannot be mapped.
  Fiber(Fiber& parent, std::size_t stack_size, std::function<void()> entry);
  // A fiber: unwinds it first if it has started and not finished (see unwind()). Not while it runs.
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Switches from this context, which must be the running one, to `to`, which must be suspended in switch_to() or
  // not started; returns when some context switches back to this one. While this fiber is being unwound it never
  // switches: it throws FiberUnwind, or returns at once when called from a destructor that the unwinding runs (an
  // exception is in flight) so that destructor can finish.
  void switch_to(Fiber& to);
  // From the parent, running: destroys every object on this fiber's stack by switching to it with its pending
  // switch_to() throwing FiberUnwind (a fiber never started finishes without running its entry). Afterwards
  // finished() is true. No-op once finished.
  void unwind();

  bool finished() const noexcept { return finished_; }
  // The exception the entry ended with; nullptr when it returned or was unwound.
  const std::exception_ptr& error() const noexcept { return error_; }

 private:
  // The fiber's bottom frame: runs the entry, keeps what it throws, and hands the parent's context to Boost, which
  // switches to it and unmaps this stack there.
  boost::context::fiber bottom(boost::context::fiber&& from);
  // On arrival in this context: `from` is the suspended context of the one that switched here (from_).
  void arrived(boost::context::fiber&& from);
  // Before leaving for `to`: keeps this context's exception globals, installs `to`'s.
  void switch_eh(const Fiber& to) noexcept;

  // What every switch reads and writes comes first.
  Fiber* from_ = nullptr;      // the context that last switched to this one
  boost::context::fiber ctx_;  // this context while suspended (or not started); empty while it runs
  detail::EhGlobals eh_{};     // this context's exception globals while it does not run
  void* eh_globals_;           // the thread's live exception globals (__cxa_get_globals(), looked up once)
  bool finished_ = false;
  bool unwinding_ = false;
  Fiber* parent_ = nullptr;      // where a finished fiber switches to (nullptr: this is a host context)
  std::function<void()> entry_;  // a fiber's work
  std::exception_ptr error_;
  const void* stack_bottom_ = nullptr;  // lowest address of the stack's mapping (the guard page); learnt for the host
  std::size_t stack_size_ = 0;          // bytes of the mapping, guard page included
#if defined(__SANITIZE_ADDRESS__)
  void* fake_stack_ = nullptr;  // ASan's fake stack of this context while it does not run
#endif
#if defined(__SANITIZE_THREAD__)
  void* tsan_;  // this context's TSan fiber
#endif
};

}  // namespace alloclab::vt
