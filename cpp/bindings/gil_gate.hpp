// GilGate: whether a thread of an alloclab run may take the GIL back, and the runs that are outside Python.
//
// Models CPython's rule for daemon threads at interpreter exit: once finalization has begun, a thread that takes the
// GIL is ended with pthread_exit (Python 3.11-3.13), and that forced unwind through C++ frames (pybind11's GIL
// guards have noexcept destructors) calls std::terminate. So the exit hook (alloclab/_lifecycle.py) first stops the
// runs and waits for them to come back to Python (runs_outside()), then closes the gate: a thread that finds it
// closed never takes the GIL again (its run is over, its worker threads joined; it waits for the process to end, as
// Python 3.14 makes daemon threads do), and close() waits, without the GIL, for the threads already past the gate.
// Leaves out: the GIL that the Topology constructors release and take back (short, and never at exit).
#pragma once

#include <condition_variable>
#include <mutex>

namespace alloclab::bindings {

class GilGate {
 public:
  // Before taking the GIL: true when the caller may (it must call taken() once it holds it), false once closed.
  bool enter() {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return false;
    ++entering_;
    return true;
  }
  // The GIL is held again (after enter()).
  void taken() {
    std::lock_guard<std::mutex> g(mu_);
    --entering_;
    cv_.notify_all();
  }
  // Closes the gate for good and waits until every thread that entered holds the GIL. Call it without the GIL.
  void close() {
    std::unique_lock<std::mutex> g(mu_);
    closed_ = true;
    cv_.wait(g, [this] { return entering_ == 0; });
  }

  // A run released the GIL / took it back (what runs_outside() counts).
  void left_python() {
    std::lock_guard<std::mutex> g(mu_);
    ++outside_;
  }
  void back_in_python() {
    std::lock_guard<std::mutex> g(mu_);
    --outside_;
  }
  // Runs that released the GIL and have not taken it back: the exit hook waits for none to be left.
  int runs_outside() {
    std::lock_guard<std::mutex> g(mu_);
    return outside_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int entering_ = 0;  // threads past enter() that do not hold the GIL yet
  int outside_ = 0;
};

// The process's one gate.
GilGate& gil_gate();

// What a thread that may not take the GIL back does: wait for the process to end.
[[noreturn]] void wait_for_process_exit();

}  // namespace alloclab::bindings
