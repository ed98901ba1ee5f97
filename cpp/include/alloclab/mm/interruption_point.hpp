// InterruptionPoint: how model code learns that the run it belongs to is being stopped.
//
// Models: what the kernel's long loops do with cond_resched() and fatal_signal_pending(): a loop over millions of
// pages, folios or areas asks, every so often, whether to give up. Here the answer comes from the lab (the run's
// RunEnv::interruption_point: Ctrl-C, or a timeout during set-up), which throws to unwind the whole set-up or
// teardown; the objects of a run stopped that way are destroyed with it, never used again.
// Leaves out: everything else of scheduling (the model's loops run on the controlling thread, which nothing preempts
// on purpose).
#pragma once

#include <functional>

namespace alloclab::mm {

// Called once per pageblock, folio or list entry by the loops that run while no worker does: MemorySystem's
// construction and check(), and the set-up and teardown of the subsystems built on it. Throws to stop; does nothing
// on a worker's thread (workers stop through their own stop flag). Empty: nothing stops those loops.
using InterruptionPoint = std::function<void()>;

}  // namespace alloclab::mm
