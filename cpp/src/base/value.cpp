// Value's text form (see value.hpp).
#include "alloclab/base/value.hpp"

#include <sstream>

namespace alloclab {

std::string to_string(const Value& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    std::ostringstream o;
    o << *d;
    return o.str();
  }
  if (const auto* s = std::get_if<std::string>(&v)) return "'" + *s + "'";
  return "None";
}

}  // namespace alloclab
