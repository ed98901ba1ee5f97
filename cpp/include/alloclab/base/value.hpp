// Value: one parameter or result value, and Column: a named, documented column of a table of rows.
//
// Models: nothing of the kernel; the lab's currency between the engine and Python (bool, int, float, text, or "not
// measured"). Column tables are declared once beside the row type and read by the bindings, so a field is named once.
// Leaves out: nested values (a result that needs structure gets its own table).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace alloclab {

// std::monostate is "not measured" (None in Python): a figure that a run could not give, e.g. a lock_stat count when
// lock_stat was off. Parameters never hold it.
using Value = std::variant<bool, int64_t, double, std::string, std::monostate>;
inline const Value kNotMeasured{std::monostate{}};
std::string to_string(const Value& v);  // "True", "12", "0.5", "'text'", "None"

// A column of a table of Rows: its name, what it means (with its unit), and its value in a row.
template <class Row>
struct Column {
  const char* name;
  const char* doc;
  Value (*get)(const Row&);
};

}  // namespace alloclab
