// Lock construction and the lock_stat hooks (see lock.hpp; the kinds' own code is in kinds/).
#include "alloclab/locks/lock.hpp"

#include <algorithm>

namespace alloclab {

Lock::Lock(LockDomain& domain, std::string_view cls) : Lock(domain, domain.class_id(cls)) {}

Lock::Lock(LockDomain& domain, LockClassId cls)
    : domain_(&domain),
      cls_(cls),
      kind_(domain.kind_of(cls)),
      stat_(domain.lockstat()),
      yield_(domain.spin_yield()),
      read_side_(lock_kinds()[size_t(kind_)].read_side) {
  if (domain.costs()) vlock_ = std::make_unique<VirtualLock>(std::string(lock_class_catalogue()[cls].name));
  switch (kind_) {
#define ALLOCLAB_KIND_CONSTRUCT(name, Type) \
  case LockKind::name: new (&state_.name) Type(); break;
    ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_CONSTRUCT)
#undef ALLOCLAB_KIND_CONSTRUCT
  }
}

Lock::~Lock() {
  switch (kind_) {
#define ALLOCLAB_KIND_DESTROY(name, Type) \
  case LockKind::name: state_.name.~Type(); break;
    ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_DESTROY)
#undef ALLOCLAB_KIND_DESTROY
  }
}

void Lock::stat_acquired(LockToken& t, uint64_t contended_at, uint64_t acquired_at, bool read) {
  LockStatThread& th = domain_->stat_thread();
  if (th.domain != domain_) return;
  LockStatCounters& c = (read ? th.read_slots : th.slots)[cls_];
  const int32_t prev_cpu = last_cpu_.load(std::memory_order_relaxed);
  const int32_t prev_node = last_node_.load(std::memory_order_relaxed);
  if (contended_at != 0) {
    const uint64_t waited = acquired_at - contended_at;
    ++c.contentions;
    if (prev_cpu != th.cpu) ++c.con_bounces;
    ++(prev_node == th.node ? c.handoffs_local : c.handoffs_remote);
    c.wait_total += waited;
    c.wait_min = std::min(c.wait_min, waited);
    c.wait_max = std::max(c.wait_max, waited);
  }
  ++c.acquisitions;
  if (prev_cpu != th.cpu) {
    ++c.acq_bounces;
    last_cpu_.store(th.cpu, std::memory_order_relaxed);
  }
  if (prev_node != th.node) last_node_.store(th.node, std::memory_order_relaxed);
  t.acquired_at = contended_at != 0 ? acquired_at : instrument_ticks();
}

void Lock::stat_released(LockToken& t, bool read) {
  LockStatThread& th = domain_->stat_thread();
  if (th.domain != domain_) return;
  const uint64_t held = instrument_ticks() - t.acquired_at;
  LockStatCounters& c = (read ? th.read_slots : th.slots)[cls_];
  c.hold_total += held;
  c.hold_min = std::min(c.hold_min, held);
  c.hold_max = std::max(c.hold_max, held);
}

}  // namespace alloclab
