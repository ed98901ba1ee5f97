// The cohort lock's hand-off in virtual time (see kinds/cohort.hpp; its real code is cohort_base.hpp's).
#include "alloclab/locks/kinds/cohort.hpp"

#include <array>

namespace alloclab {

VHandoff CohortSpinlock::vhandoff(const VRelease& r) {
  VHandoff h;
  if (r.batch < kBatchLimit)
    if (const vt::Waiter* w = oldest_on_node(r, r.node_of(r.releaser))) {
      h.wake(w->cpu, mcs_pass_at(r, *w));  // the node's MCS lock passes on
      h.owned = true;
      h.batch = true;
      return h;
    }
  // Each node's local head: the oldest waiter of its node (profiles have at most kMaxNodes nodes).
  std::array<const vt::Waiter*, kMaxNodes> heads{};
  for (const vt::Waiter& w : r.waiters)
    if (const vt::Waiter*& head = heads[size_t(r.node_of(w.cpu))]; !head) head = &w;
  const auto look = [&](const vt::Waiter& w) {
    return ttas_next_look(r, r.states[size_t(w.cpu)].began, TtasSpinlock::kMaxBackoff);
  };
  const vt::Waiter* win = first_to_look(
      r, [&](const vt::Waiter& w) { return heads[size_t(r.node_of(w.cpu))] == &w ? int64_t(look(w)) : int64_t(-1); });
  h.wake(win->cpu, look(*win));
  return h;
}

}  // namespace alloclab
