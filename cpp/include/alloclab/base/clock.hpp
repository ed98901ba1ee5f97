// Clock: the time base of every measurement in alloclab.
//
// Models: nothing of the kernel; it is the lab's stopwatch. Where the CPU has an invariant TSC (x86-64 with
// constant_tsc + nonstop_tsc) ticks are raw `rdtsc` reads, calibrated once per process against
// std::chrono::steady_clock; elsewhere ticks are steady_clock nanoseconds. lock_stat hooks store ticks and
// convert to nanoseconds only when statistics are merged, so the hot path pays one rdtsc per timestamp.
// In a virtual-clock run (VirtualClockScope on the thread that runs the simulator) a tick is one picosecond of the
// calling virtual CPU's clock (vt::Simulator): clock_ticks() reads it (and is charged what an RDTSC costs the profile's
// CPU), spin_for_ticks() advances it instead of spinning, and the conversions are exact, so model code times itself the
// same way in both clocks. The lab's own instruments (lock_stat) read instrument_ticks(): the same clock, but free in a
// virtual-clock run, so that turning them on changes no virtual time.
// Leaves out: cross-socket TSC skew (Linux refuses unsynchronised TSCs as a clocksource, and so do we).
#pragma once

#include <cstdint>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "alloclab/base/tls.hpp"

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
// A VirtualClockScope is active on this thread; every clock read tests it (lock_stat's two per acquisition among
// them).
ALLOCLAB_TLS extern constinit thread_local bool tls_virtual;
// The calling virtual CPU's clock in picoseconds after the read's own cost (Simulator::read_clock(); 0 outside the
// simulator's fibers), and charging it.
uint64_t virtual_read() noexcept;
// The same clock, read without a charge (Simulator::now(); 0 outside the simulator's fibers).
uint64_t virtual_now() noexcept;
void virtual_advance(uint64_t ps) noexcept;
}  // namespace detail

// While alive on a thread, that thread's clock is virtual (see the header comment). Scopes nest.
class VirtualClockScope {
 public:
  VirtualClockScope() noexcept : previous_(detail::tls_virtual) { detail::tls_virtual = true; }
  ~VirtualClockScope() { detail::tls_virtual = previous_; }
  VirtualClockScope(const VirtualClockScope&) = delete;
  VirtualClockScope& operator=(const VirtualClockScope&) = delete;

 private:
  bool previous_;
};

// True on a thread that runs a virtual-clock run.
inline bool virtual_clock() noexcept { return detail::tls_virtual; }

// The host's raw timestamp whatever this thread's clock (rdtsc or vDSO clock_gettime): for host-time matters such
// as polling intervals and measured costs. Converts with clock_calibration().
inline uint64_t host_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (detail::kUseTsc) return __rdtsc();
#endif
  return detail::steady_ns();
}

// Raw timestamp of this thread's clock: host_ticks(), or a picosecond count in a virtual-clock run.
inline uint64_t clock_ticks() noexcept {
  if (detail::tls_virtual) [[unlikely]]
    return detail::virtual_read();
  return host_ticks();
}

// The timestamp of an instrument of the lab (lock_stat), not of model code: clock_ticks() in a real run (an RDTSC the
// instrument pays, inside the critical sections it times, as the kernel's lock_stat does), and in a virtual-clock run
// the calling virtual CPU's clock read for nothing: the simulator knows its own time, so a virtual run with lock_stat
// gives the same virtual times as one without.
inline uint64_t instrument_ticks() noexcept {
  if (detail::tls_virtual) [[unlikely]]
    return detail::virtual_now();
  return host_ticks();
}

// Nanoseconds per tick of this thread's clock (exactly 0.001 in a virtual-clock run).
inline double ns_per_tick() noexcept { return detail::tls_virtual ? 1e-3 : clock_calibration().ns_per_tick; }
inline double ticks_to_ns(uint64_t ticks) noexcept { return double(ticks) * ns_per_tick(); }
inline uint64_t ns_to_ticks(uint64_t ns) noexcept {
  return detail::tls_virtual ? ns * 1000 : uint64_t(double(ns) * clock_calibration().ticks_per_ns);
}

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

// Busy-wait for a precomputed number of ticks (hot loops convert once with ns_to_ticks); in a virtual-clock run the
// calling virtual CPU's clock advances by them instead.
inline void spin_for_ticks(uint64_t ticks) noexcept {
  if (ticks == 0) return;
  if (detail::tls_virtual) [[unlikely]] {
    detail::virtual_advance(ticks);
    return;
  }
  const uint64_t end = clock_ticks() + ticks;
  while (clock_ticks() < end) cpu_pause();
}

// The same, ending early once stop() says so: a calibrated cost that a stopped run does not wait out.
template <class Stop>
void spin_for_ticks(uint64_t ticks, const Stop& stop) {
  if (ticks == 0) return;
  if (detail::tls_virtual) [[unlikely]] {
    detail::virtual_advance(ticks);
    return;
  }
  const uint64_t end = clock_ticks() + ticks;
  while (clock_ticks() < end && !stop()) cpu_pause();
}

}  // namespace alloclab
