// Parameter declaration and validation (see params.hpp).
#include "alloclab/lab/params.hpp"

#include "alloclab/base/suggest.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace alloclab {

std::string_view to_string(ParamSpec::Type t) {
  switch (t) {
    case ParamSpec::Type::boolean: return "bool";
    case ParamSpec::Type::integer: return "int";
    case ParamSpec::Type::real: return "float";
    case ParamSpec::Type::choice: return "choice";
  }
  return "?";
}

ParamSpec ParamSpec::integer(std::string name, int64_t def, int64_t min, int64_t max, std::string doc) {
  return {std::move(name), Type::integer, def, double(min), double(max), {}, std::move(doc)};
}
ParamSpec ParamSpec::real(std::string name, double def, double min, double max, std::string doc) {
  return {std::move(name), Type::real, def, min, max, {}, std::move(doc)};
}
ParamSpec ParamSpec::boolean(std::string name, bool def, std::string doc) {
  return {std::move(name), Type::boolean, def, 0, 1, {}, std::move(doc)};
}
ParamSpec ParamSpec::choice(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  return {std::move(name), Type::choice, std::move(def), 0, 0, std::move(choices), std::move(doc)};
}

std::string ParamSpec::allowed() const {
  std::ostringstream o;
  switch (type) {
    case Type::boolean: return "True or False";
    case Type::integer: o << int64_t(min) << ".." << int64_t(max); return o.str();
    case Type::real: o << min << ".." << max; return o.str();
    case Type::choice:
      o << "one of ";
      for (size_t i = 0; i < choices.size(); ++i) o << (i ? ", " : "") << "'" << choices[i] << "'";
      return o.str();
  }
  return "";
}

Params Params::resolve(const std::vector<ParamSpec>& specs, const std::map<std::string, Value>& given,
                       const std::string& scenario) {
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const auto& s : specs) known = known || s.name == name;
    if (!known) {
      std::string names;
      std::vector<std::string> known_names;
      for (const auto& s : specs) {
        names += (names.empty() ? "" : ", ") + s.name;
        known_names.push_back(s.name);
      }
      throw std::invalid_argument(name + ": unknown parameter of scenario '" + scenario + "' (parameters: " + names +
                                  ")" + did_you_mean(name, known_names));
    }
  }
  Params p;
  for (const auto& s : specs) {
    auto it = given.find(s.name);
    Value v = it == given.end() ? s.def : it->second;
    const auto bad = [&](const std::string& why) {
      const auto* str = std::get_if<std::string>(&v);
      const std::string hint = s.type == ParamSpec::Type::choice && str ? did_you_mean(*str, s.choices) : "";
      return std::invalid_argument(s.name + ": " + why + " " + to_string(v) + " (allowed: " + s.allowed() + ")" + hint);
    };
    switch (s.type) {
      case ParamSpec::Type::boolean:
        if (!std::holds_alternative<bool>(v)) throw bad("expected a boolean, got");
        break;
      case ParamSpec::Type::integer: {
        if (const auto* d = std::get_if<double>(&v)) {
          if (std::floor(*d) != *d || !std::isfinite(*d)) throw bad("expected an integer, got");
          if (!(*d >= -0x1p63 && *d < 0x1p63)) throw bad("value out of range:");  // int64_t(*d) would be undefined
          v = int64_t(*d);
        }
        if (!std::holds_alternative<int64_t>(v)) throw bad("expected an integer, got");
        const int64_t x = std::get<int64_t>(v);
        if (double(x) < s.min || double(x) > s.max) throw bad("value out of range:");
        break;
      }
      case ParamSpec::Type::real: {
        if (const auto* i = std::get_if<int64_t>(&v)) v = double(*i);
        if (!std::holds_alternative<double>(v)) throw bad("expected a number, got");
        const double x = std::get<double>(v);
        if (!std::isfinite(x) || x < s.min || x > s.max) throw bad("value out of range:");
        break;
      }
      case ParamSpec::Type::choice: {
        const auto* str = std::get_if<std::string>(&v);
        bool ok = false;
        if (str)
          for (const auto& c : s.choices) ok = ok || c == *str;
        if (!ok) throw bad("invalid value");
        break;
      }
    }
    p.values_[s.name] = std::move(v);
  }
  return p;
}

const Value& Params::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("scenario reads undeclared parameter '" + name + "'");
  return it->second;
}

int64_t Params::i(const std::string& name) const { return std::get<int64_t>(at(name)); }
double Params::f(const std::string& name) const {
  const Value& v = at(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return std::get<double>(v);
}
bool Params::b(const std::string& name) const { return std::get<bool>(at(name)); }
const std::string& Params::s(const std::string& name) const { return std::get<std::string>(at(name)); }

}  // namespace alloclab
