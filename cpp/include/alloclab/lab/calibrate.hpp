// Calibration: measurements of the machine this process runs on. `alloclab calibrate` (python/alloclab/calibrate.py)
// runs them, converts the results and writes a schema-1 machine profile.
//
// Models: the figures a profile needs, each measured the way its public counterparts were measured:
//   line transfer   CAS ping-pong on one cache line between two pinned threads, as in ccbench (Trigonakis) and
//                   nviennot/core-to-core-latency: one way = round trip / 2, median of the samples;
//   futex wake-up   a thread pinned on one PU wakes a thread sleeping in FUTEX_WAIT on another. The latency runs
//                   from just before FUTEX_WAKE to the wakee running again, median of the samples;
//   bandwidth       STREAM-style copy (memcpy) on pinned threads over buffers much larger than the LLC, counting
//                   bytes read plus bytes written (as likwid-bench/kerncraft "copy" does), best of the trials;
//   MLP             misses one core keeps in flight: K = 1..32 independent random pointer chases interleaved in
//                   one loop over a buffer much larger than the LLC (as lmbench's par_mem), K x t(1) / t(K) by Little's
//                   law, the best K;
//   page work       one thread copies (memcpy) or clears (memset) 4 KiB pages taken in random order from buffers
//                   much larger than the LLC, as migration copies and fault-time clears meet cold pages: the time of
//                   one page op, latency- rather than bandwidth-bound (no prefetcher runs into the next page);
//   core clock      a chain of dependent 64-bit register-to-register adds (one cycle each on every x86-64 core; an
//                   immediate add would be folded by Golden Cove and later cores);
//   op costs        one microbenchmark per op of ALLOCLAB_OPS, pinned and cache-resident: a locked RMW, an L1
//                   pointer chase, ListHead (vmalloc/list.hpp), RbNode lookups (vmalloc/rbtree.hpp), a bitmap word
//                   scan, __init_single_page on struct page (mm/page.hpp), back-to-back PAUSEs (cpu_pause()) and
//                   back-to-back reads of the clock (host_ticks()). Median ns per operation over trials.
// The MLP run with K = 1 is one dependent chase: its time per step is the profile's dram_ns.local.
// Leaves out: clock changes during a measurement (turbo, thermal limits), remote DRAM latency (dram_ns.remote),
// interference from other tenants of the host (the caller records the load average), prefetchers (the pointer chase
// follows a random cycle).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "alloclab/topology/cost_model.hpp"
#include "alloclab/topology/machine_profile.hpp"

namespace alloclab::calibration {

// A synthetic description of the host that Topology::synthetic accepts and that has the host's PU, core and node
// counts and distance classes: "package:P numa:N l3:L core:C pu:T" when the host is uniform, else hwloc's own
// export. Throws std::runtime_error when neither describes the host.
std::string host_synthetic();

// Up to `max_pairs` host PU pairs for each transfer distance class present on the host, nearest class first.
std::vector<std::pair<DistanceClass, std::vector<std::pair<int, int>>>> host_transfer_pairs(size_t max_pairs);

// One PU of each core of host NUMA node `node` (logical indices): the threads of a per-node bandwidth measurement.
std::vector<int> node_core_pus(int node);

// Size in bytes of the host's level-`level` data or unified cache (1 = L1D; the first such cache hwloc reports; 0 when
// none). Throws std::invalid_argument naming "level" outside 1..5.
size_t host_cache_bytes(int level);
// Size in bytes of the host's last-level cache (the largest data or unified cache hwloc reports; 0 when none).
size_t host_llc_bytes();

// One-way line-transfer latency (ns) between host PUs a != b: the median over `samples` samples of the mean of
// `round_trips` CAS round trips, halved. Throws std::invalid_argument naming "pu" for a bad index and
// std::runtime_error when a thread cannot be pinned.
double transfer_ns(int pu_a, int pu_b, int samples, int round_trips);

// Futex wake-up latency (ns), waker on `waker_pu`, sleeper on `wakee_pu` (different PUs): the median over
// `samples`. Before each wake the waker sleeps `sleep_us` so that the wakee is asleep in FUTEX_WAIT.
double futex_wake_ns(int waker_pu, int wakee_pu, int samples, int sleep_us);

// Bandwidth (GB/s, 1e9 B/s, bytes read + bytes written) of one thread per PU of `pus` streaming in pattern `kind`
// over its own `bytes_per_thread` of node-local memory (first touch after pinning): Stream::copy copies one buffer
// into another (memcpy, as likwid-bench 'copy'); Stream::update adds one into every 64-byte line of one buffer, so
// that each line is read and written back (as likwid-bench 'update', and as a pass that checks, then writes struct
// pages); Stream::load loads one word of every line (as likwid-bench 'load', and as a pass reading struct pages);
// Stream::store stores one word into every line, unread (as a pass initialising struct pages; counted as a copy is,
// 2 x the bytes: each line read for ownership, then written back). Best of `trials`.
double bandwidth_gbs(Stream kind, const std::vector<int>& pus, size_t bytes_per_thread, int trials);

// The memory-level parallelism of one core, as misses_in_flight measures it.
struct MissesInFlight {
  double lines = 0;       // misses in flight: K x latency_ns / ns per step, best over K, median over the trials
  double latency_ns = 0;  // ns per step of a single chase (one miss after another), median over the trials
  int best_k = 0;         // the number of chases that gave `lines` in the median trial
};

// L1D misses that one core keeps in flight (line fill buffers, miss address buffers), on host PU `pu`: K independent
// pointer chases (K = 1, 2, 4, ..., 32), advanced together one load each per step, around one random cycle of one
// pointer per 64-byte line of a `bytes` buffer first touched on that PU, the chases n/K lines apart along the cycle.
// Each K runs `misses` / K steps per trial (so `misses` misses); a trial's figure is the largest K x t(1) / t(K)
// (Little's law), t(K) = ns per step with K chases. Median over `trials`. Throws std::invalid_argument naming "bytes"
// for a buffer under 4096 bytes (or over 2^32 lines), "trials" for no trial or no miss, "pu" for a bad index.
MissesInFlight misses_in_flight(int pu, size_t bytes, int trials, size_t misses);

// ns per 4 KiB page op `op` (copy: memcpy, clear: memset to zero) on host PU `pu`, over buffers of `bytes` (source and
// destination each) first touched on that PU, the pages taken in a fixed random order, or (`ascending`) each the next
// page after the one before (page_ns.<op>_ascending): the median over `trials` passes over every page. Throws
// std::invalid_argument naming "bytes" for fewer than two pages or no trial, "pu" for a bad index.
double page_op_ns(PageOp op, bool ascending, int pu, size_t bytes, int trials);

// Core clock (GHz) of host PU `pu` from a dependent add chain timed by the thread's CPU time (so that a busy host's
// other tasks do not slow it), median of `trials`. Returns 0 where no such chain is
// available (not x86-64); the caller then uses /proc/cpuinfo.
double core_ghz(int pu, int trials);

// ns per operation for each op_cycles field, in ALLOCLAB_OPS order (atomic_rmw, line_access, list_op, tree_step,
// bitmap_word, page_init, pause, clock_read), on host PU `pu`: the median over `trials` trials of `ops` operations each
// (bitmap_word runs ops / 16 + 1 scans). Throws std::invalid_argument naming "pu" or "trials" for a bad argument.
std::vector<std::pair<std::string, double>> op_ns(int pu, int trials, size_t ops);

}  // namespace alloclab::calibration
