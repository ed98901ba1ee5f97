// Virtual time: the clock of one simulated CPU.
//
// Models: a CPU's local time in the virtual-time simulator (scheduler.hpp), as an unsigned count of picoseconds, so
// per-operation costs such as 0.3 ns are exact integers and sums of them never round, on any host. 2^64 ps is about
// 213 days of virtual time.
// Leaves out: clock rates and frequency changes (a machine profile converts its cycles to picoseconds once).
#pragma once

#include <cstdint>
#include <string>

#include "alloclab/base/tls.hpp"

namespace alloclab::vt {

using vtime = uint64_t;  // picoseconds

inline constexpr vtime kNanosecond = 1'000;
inline constexpr vtime kMicrosecond = 1'000 * kNanosecond;
inline constexpr vtime kMillisecond = 1'000 * kMicrosecond;
inline constexpr vtime kSecond = 1'000 * kMillisecond;

// For messages: "1.234 us" in the largest unit (s, ms, us, ns) not above `t`, three decimals truncated (so the text
// is the same on every host); below one nanosecond, whole picoseconds ("300 ps").
std::string format_vtime(vtime t);

namespace detail {
// The virtual CPU whose fiber runs on this host thread, -1 outside the simulator's fibers. Written by the simulator
// (scheduler.cpp) alone.
ALLOCLAB_TLS inline constinit thread_local int tls_vcpu = -1;
}  // namespace detail

// The virtual CPU whose fiber calls, -1 outside the simulator's fibers (e.g. in Simulator::Options::poll): one load,
// for every code that must know which clock it runs on without including the simulator.
inline int current_cpu() noexcept { return detail::tls_vcpu; }

}  // namespace alloclab::vt
