// The HMCS lock's hand-off in virtual time (see kinds/hmcs.hpp; its real code is there and in cohort_base.hpp).
#include "alloclab/locks/kinds/hmcs.hpp"

namespace alloclab {

VHandoff HmcsSpinlock::vhandoff(const VRelease& r) {
  VHandoff h;
  const int node = r.node_of(r.releaser);
  const vt::Waiter* win = nullptr;
  if (r.taken_free) {
    win = &r.waiters.front();  // the fast path's root release: the root's next entry is the oldest waiter's node
  } else if (r.batch < kBatchLimit) {
    win = oldest_on_node(r, node);
    h.batch = win != nullptr;
  }
  if (!win) {
    for (const vt::Waiter& w : r.waiters)
      if (r.node_of(w.cpu) != node) {
        win = &w;
        break;
      }
    if (!win) win = &r.waiters.front();
  }
  h.wake(win->cpu, mcs_pass_at(r, *win));  // an MCS pass at the node's level or the root's
  h.owned = true;
  return h;
}

}  // namespace alloclab
