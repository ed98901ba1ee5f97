// The process's GilGate (see gil_gate.hpp).
#include "gil_gate.hpp"

#include <unistd.h>

namespace alloclab::bindings {

GilGate& gil_gate() {
  static GilGate* gate = new GilGate;  // never destroyed: threads may use it while the process exits
  return *gate;
}

void wait_for_process_exit() {
  for (;;) pause();
}

}  // namespace alloclab::bindings
