// gfp_t and alloc_flags: what a caller asks of the page allocator, and how the allocator turns that into the
// watermark and fallback rules of one attempt.
//
// Models: include/linux/gfp_types.h and the ALLOC_* flags of mm/internal.h as of v6.2 (the kernel the pcp-refill
// seed patched). Only the bits the model acts on exist: the mobility bits that pick the migratetype
// (gfp_migratetype), __GFP_HIGH and __GFP_ATOMIC (deeper into the reserves: ALLOC_HIGH, ALLOC_HARDER), __GFP_THISNODE
// (no fallback to other nodes), __GFP_COMP (prep_compound_page), __GFP_ZERO (clear_highpage, with real backing).
// Leaves out: reclaim, compaction and OOM (__GFP_DIRECT_RECLAIM, __GFP_KSWAPD_RECLAIM, __GFP_NOFAIL,
// __GFP_NORETRY... are accepted and ignored: an attempt that fails both the low and the min watermark returns
// NULL), cpusets and mempolicies, __GFP_ACCOUNT (no memcg), ALLOC_NOFRAGMENT (needs a DMA32 zone below NORMAL).
#pragma once

#include <cstdint>

namespace alloclab::mm {

using gfp_t = uint32_t;

// Bits (values are the model's; names and meanings are the kernel's).
inline constexpr gfp_t __GFP_MOVABLE = 1u << 0;         // with __GFP_RECLAIMABLE clear: MIGRATE_MOVABLE
inline constexpr gfp_t __GFP_RECLAIMABLE = 1u << 1;     // MIGRATE_RECLAIMABLE
inline constexpr gfp_t __GFP_HIGH = 1u << 2;            // ALLOC_HIGH: may use half of the min reserve
inline constexpr gfp_t __GFP_ATOMIC = 1u << 3;          // ALLOC_HARDER (v6.2): a further quarter, highatomic lists
inline constexpr gfp_t __GFP_THISNODE = 1u << 4;        // only the requested node
inline constexpr gfp_t __GFP_COMP = 1u << 5;            // compound page (PG_head, tails point at the head)
inline constexpr gfp_t __GFP_ZERO = 1u << 6;            // clear the page (only with real backing)
inline constexpr gfp_t __GFP_NOWARN = 1u << 7;          // accepted, ignored
inline constexpr gfp_t __GFP_DIRECT_RECLAIM = 1u << 8;  // accepted, ignored (no reclaim is modelled)
inline constexpr gfp_t __GFP_KSWAPD_RECLAIM = 1u << 9;  // accepted, ignored
inline constexpr gfp_t __GFP_NORETRY = 1u << 10;        // accepted, ignored
inline constexpr gfp_t __GFP_RETRY_MAYFAIL = 1u << 11;  // accepted, ignored
inline constexpr gfp_t __GFP_HARDWALL = 1u << 12;       // accepted, ignored
inline constexpr gfp_t __GFP_IO = 1u << 13;             // accepted, ignored
inline constexpr gfp_t __GFP_FS = 1u << 14;             // accepted, ignored
inline constexpr gfp_t __GFP_MODEL_MASK = (1u << 15) - 1;

inline constexpr gfp_t __GFP_RECLAIM = __GFP_DIRECT_RECLAIM | __GFP_KSWAPD_RECLAIM;
inline constexpr gfp_t GFP_ATOMIC = __GFP_HIGH | __GFP_ATOMIC | __GFP_KSWAPD_RECLAIM;
inline constexpr gfp_t GFP_KERNEL = __GFP_RECLAIM | __GFP_IO | __GFP_FS;
inline constexpr gfp_t GFP_NOWAIT = __GFP_KSWAPD_RECLAIM;
inline constexpr gfp_t GFP_USER = __GFP_RECLAIM | __GFP_IO | __GFP_FS | __GFP_HARDWALL;
inline constexpr gfp_t GFP_HIGHUSER = GFP_USER;  // no highmem in the model
inline constexpr gfp_t GFP_HIGHUSER_MOVABLE = GFP_HIGHUSER | __GFP_MOVABLE;
inline constexpr gfp_t GFP_TRANSHUGE_LIGHT = (GFP_HIGHUSER_MOVABLE | __GFP_COMP | __GFP_NOWARN) & ~__GFP_RECLAIM;
inline constexpr gfp_t GFP_TRANSHUGE = GFP_TRANSHUGE_LIGHT | __GFP_DIRECT_RECLAIM;

// alloc_flags (mm/internal.h, v6.2).
inline constexpr unsigned ALLOC_WMARK_MIN = 0;  // WMARK_MIN
inline constexpr unsigned ALLOC_WMARK_LOW = 1;  // WMARK_LOW
inline constexpr unsigned ALLOC_WMARK_HIGH = 2;
inline constexpr unsigned ALLOC_NO_WATERMARKS = 0x04;
inline constexpr unsigned ALLOC_WMARK_MASK = ALLOC_NO_WATERMARKS - 1;
inline constexpr unsigned ALLOC_OOM = 0x08;
inline constexpr unsigned ALLOC_HARDER = 0x10;
inline constexpr unsigned ALLOC_HIGH = 0x20;
inline constexpr unsigned ALLOC_CPUSET = 0x40;
inline constexpr unsigned ALLOC_CMA = 0x80;
inline constexpr unsigned ALLOC_NOFRAGMENT = 0x100;
inline constexpr unsigned ALLOC_KSWAPD = 0x800;

// gfp_migratetype(): the mobility bits pick the free lists (0 UNMOVABLE, 1 MOVABLE, 2 RECLAIMABLE; both bits set is
// a caller bug the kernel warns about, treated here as MOVABLE).
inline int gfp_migratetype(gfp_t gfp) {
  const unsigned mt = gfp & (__GFP_MOVABLE | __GFP_RECLAIMABLE);
  return mt == 3 ? 1 : int(mt);
}

}  // namespace alloclab::mm
