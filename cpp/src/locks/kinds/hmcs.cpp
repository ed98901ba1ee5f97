// The HMCS lock's hand-off in virtual time (see kinds/hmcs.hpp; its real code is cohort_base.hpp's).
#include "alloclab/locks/kinds/hmcs.hpp"

namespace alloclab {

VHandoff HmcsSpinlock::vhandoff(const VRelease& r) {
  VHandoff h;
  const int node = r.node_of(r.releaser);
  const vt::Waiter* win = r.batch < kBatchLimit ? oldest_on_node(r, node) : nullptr;
  if (win) {
    h.batch = true;
  } else {
    for (const vt::Waiter& w : r.waiters)
      if (r.node_of(w.cpu) != node) {
        win = &w;
        break;
      }
    if (!win) win = &r.waiters.front();
  }
  h.wake(win->cpu, r.now + r.transfer_to(win->cpu));
  h.owned = true;
  return h;
}

}  // namespace alloclab
