// Scenario parameters: declared with a type, a default, an allowed range and a one-line doc; validated before
// anything is built, so bad input is a std::invalid_argument naming the parameter, its value and what is allowed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "alloclab/base/value.hpp"

namespace alloclab {

struct ParamSpec {
  enum class Type { boolean, integer, real, choice };
  std::string name;
  Type type;
  Value def;
  double min = 0, max = 0;           // integer and real: inclusive range
  std::vector<std::string> choices;  // choice
  std::string doc;

  static ParamSpec integer(std::string name, int64_t def, int64_t min, int64_t max, std::string doc);
  static ParamSpec real(std::string name, double def, double min, double max, std::string doc);
  static ParamSpec boolean(std::string name, bool def, std::string doc);
  static ParamSpec choice(std::string name, std::string def, std::vector<std::string> choices, std::string doc);
  std::string allowed() const;  // "1..1024", "one of 'a', 'b'", "True or False"
};
std::string_view to_string(ParamSpec::Type t);  // "bool", "int", "float", "choice"

// Resolved parameters of one run: every declared parameter, given or defaulted.
class Params {
 public:
  int64_t i(const std::string& name) const;
  double f(const std::string& name) const;  // accepts integer values too
  bool b(const std::string& name) const;
  const std::string& s(const std::string& name) const;
  const std::map<std::string, Value>& values() const { return values_; }

  // Checks `given` against `specs` (unknown names, types, ranges, choices) and fills in defaults.
  static Params resolve(const std::vector<ParamSpec>& specs, const std::map<std::string, Value>& given,
                        const std::string& scenario);

 private:
  const Value& at(const std::string& name) const;
  std::map<std::string, Value> values_;
};

}  // namespace alloclab
