// EnumNames: the one name table of an enum that Python sees, from which to_string, parse and a choice parameter's
// allowed values are all derived.
//
// Models: nothing of the kernel. Declared once beside its enum:
//   inline constexpr EnumNames<CheckMode, 3> kCheckModeNames{{{{CheckMode::in_lock, "in_lock"}, ...}}};
// Leaves out: flag enums (one value, one name).
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "alloclab/base/suggest.hpp"

namespace alloclab {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E, size_t N>
struct EnumNames {
  std::array<EnumName<E>, N> names;

  // The name of `e` ("?" for a value outside the table).
  constexpr std::string_view operator()(E e) const {
    for (const EnumName<E>& n : names)
      if (n.value == e) return n.name;
    return "?";
  }
  // The value called `name`; throws std::invalid_argument "<param>: invalid value '<name>' (allowed: one of ...)",
  // the format of every choice parameter's error.
  E parse(std::string_view name, std::string_view param) const {
    for (const EnumName<E>& n : names)
      if (n.name == name) return n.value;
    std::string allowed;
    for (const EnumName<E>& n : names) allowed += (allowed.empty() ? "'" : ", '") + std::string(n.name) + "'";
    throw std::invalid_argument(std::string(param) + ": invalid value '" + std::string(name) + "' (allowed: one of " +
                                allowed + ")" + did_you_mean(name, list()));
  }
  // Every name, in table order: a choice parameter's allowed values.
  std::vector<std::string> list() const {
    std::vector<std::string> v;
    for (const EnumName<E>& n : names) v.emplace_back(n.name);
    return v;
  }
};

}  // namespace alloclab
