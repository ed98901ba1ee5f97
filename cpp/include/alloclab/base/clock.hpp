// Clock: the time base of every measurement in alloclab.
//
// Models: nothing of the kernel; it is the lab's stopwatch. Where the CPU has an invariant TSC (x86-64 with
// constant_tsc + nonstop_tsc) ticks are raw `rdtsc` reads, calibrated once per process against
// std::chrono::steady_clock; elsewhere ticks are steady_clock nanoseconds. lock_stat hooks store ticks and
// convert to nanoseconds only when statistics are merged, so the hot path pays one rdtsc per timestamp.
// Leaves out: cross-socket TSC skew (Linux refuses unsynchronised TSCs as a clocksource, and so do we).
#pragma once

#include <cstdint>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace alloclab {

struct ClockCalibration {
  bool tsc;             // true: ticks are rdtsc; false: ticks are steady_clock nanoseconds
  double ns_per_tick;   // 1.0 without a TSC
  double ticks_per_ns;  // inverse
};

// Measured once when the library is loaded; immutable afterwards.
const ClockCalibration& clock_calibration() noexcept;

namespace detail {
uint64_t steady_ns() noexcept;
extern const bool kUseTsc;
}  // namespace detail

// Raw timestamp. Cheap (rdtsc or vDSO clock_gettime).
inline uint64_t clock_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (detail::kUseTsc) return __rdtsc();
#endif
  return detail::steady_ns();
}

inline double ticks_to_ns(uint64_t ticks) noexcept { return double(ticks) * clock_calibration().ns_per_tick; }
inline uint64_t ns_to_ticks(uint64_t ns) noexcept { return uint64_t(double(ns) * clock_calibration().ticks_per_ns); }

// Nanoseconds since an arbitrary origin, from the same source as clock_ticks().
inline uint64_t clock_ns() noexcept { return uint64_t(ticks_to_ns(clock_ticks())); }

// "tsc" or "steady_clock": recorded in every result's provenance.
std::string_view clock_source() noexcept;

// Busy-wait for `ns` nanoseconds of wall time (the calibrated cost of work that is modelled, not performed).
// Pure spinning: a waiter preempted meanwhile still ends on time.
void spin_for_ns(uint64_t ns) noexcept;

// The spin-wait hint (PAUSE on x86).
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Busy-wait for a precomputed number of ticks (hot loops convert once with ns_to_ticks).
inline void spin_for_ticks(uint64_t ticks) noexcept {
  if (ticks == 0) return;
  const uint64_t end = clock_ticks() + ticks;
  while (clock_ticks() < end) cpu_pause();
}

// The same, ending early once stop() says so: a calibrated cost that a stopped run does not wait out.
template <class Stop>
void spin_for_ticks(uint64_t ticks, const Stop& stop) {
  if (ticks == 0) return;
  const uint64_t end = clock_ticks() + ticks;
  while (clock_ticks() < end && !stop()) cpu_pause();
}

}  // namespace alloclab
