// Digest: an order-sensitive hash of a sequence of addresses, to check that two runs did the same thing.
//
// Models: nothing of the kernel. Two runs with the same seed whose workers got the same addresses (pfns, vmalloc
// addresses) in the same order have equal digests (WorkerCtx::record_alloc, hugetlb_boot's pool_digest).
// Leaves out: collision resistance against an adversary (a multiply-xorshift mix is enough to catch divergence).
#pragma once

#include <cstdint>

namespace alloclab {

// One step: folds `addr` into `digest`; the result depends on every earlier step and on their order.
inline uint64_t digest_step(uint64_t digest, uint64_t addr) {
  digest = (digest ^ addr) * 0x9e3779b97f4a7c15ull;
  return digest ^ (digest >> 29);
}

}  // namespace alloclab
