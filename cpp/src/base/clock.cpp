// Clock calibration: rdtsc against steady_clock over ~20 ms, once, at library load.
#include "alloclab/base/clock.hpp"

#include <chrono>
#include <thread>

#include "alloclab/base/scheduler.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace alloclab {
namespace detail {

uint64_t steady_ns() noexcept {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

static bool has_invariant_tsc() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d & (1u << 8)) != 0;  // "Invariant TSC"
#else
  return false;
#endif
}

const bool kUseTsc = has_invariant_tsc();

ALLOCLAB_TLS constinit thread_local bool tls_virtual = false;

// The simulator whose fiber calls, or nullptr on any other thread or outside its fibers.
static vt::Simulator* fiber_simulator() noexcept {
  vt::Simulator* s = vt::Simulator::current();
  return s && vt::current_cpu() >= 0 ? s : nullptr;
}

uint64_t virtual_read() noexcept {
  vt::Simulator* s = fiber_simulator();
  return s ? s->read_clock() : 0;
}

uint64_t virtual_now() noexcept {
  vt::Simulator* s = fiber_simulator();
  return s ? s->now() : 0;
}

void virtual_advance(uint64_t ps) noexcept {
  if (vt::Simulator* s = fiber_simulator()) s->advance(ps);
}

static ClockCalibration calibrate() noexcept {
  if (!kUseTsc) return {false, 1.0, 1.0};
#if defined(__x86_64__) || defined(__i386__)
  // Two back-to-back samples; the longer interval dominates the error of each endpoint read.
  const uint64_t n0 = steady_ns();
  const uint64_t t0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t n1 = steady_ns();
  const uint64_t t1 = __rdtsc();
  const double ns_per_tick = double(n1 - n0) / double(t1 - t0);
  return {true, ns_per_tick, 1.0 / ns_per_tick};
#else
  return {false, 1.0, 1.0};
#endif
}

}  // namespace detail

const ClockCalibration& clock_calibration() noexcept {
  static const ClockCalibration cal = detail::calibrate();
  return cal;
}

std::string_view clock_source() noexcept { return detail::kUseTsc ? "tsc" : "steady_clock"; }

void spin_for_ns(uint64_t ns) noexcept { spin_for_ticks(ns_to_ticks(ns)); }

}  // namespace alloclab
