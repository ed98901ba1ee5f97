// Virtual time formatting: integer arithmetic only, so a message is identical on every host.
#include "alloclab/base/vclock.hpp"

namespace alloclab::vt {

std::string format_vtime(vtime t) {
  struct Unit {
    vtime size;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{kSecond, "s"}, {kMillisecond, "ms"}, {kMicrosecond, "us"}, {kNanosecond, "ns"}};
  for (const Unit& u : kUnits) {
    if (t < u.size) continue;
    const vtime thousandths = t % u.size / (u.size / 1000);
    std::string frac = std::to_string(thousandths);
    return std::to_string(t / u.size) + "." + std::string(3 - frac.size(), '0') + frac + " " + u.name;
  }
  return std::to_string(t) + " ps";
}

}  // namespace alloclab::vt
