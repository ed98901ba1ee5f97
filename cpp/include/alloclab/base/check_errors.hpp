// CheckErrors: the failures a model's consistency check reports, capped so that one broken invariant repeated over
// a million pages does not flood the report.
//
// Models: nothing of the kernel (the model's own self-checks, MemorySystem::check() and the like): the first
// kMaxShown messages are kept, the rest counted, and close() says how many were left out.
// Leaves out: ordering or grouping of the messages (they come in the order the check finds them).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace alloclab {

class CheckErrors {
 public:
  static constexpr size_t kMaxShown = 20;

  // Reports into a check result's `ok` flag and `errors` list.
  CheckErrors(bool& ok, std::vector<std::string>& errors) : ok_(ok), errors_(errors) {}

  // A failure: `ok` becomes false; the message is kept while fewer than kMaxShown are.
  void operator()(const std::string& e) {
    ok_ = false;
    if (errors_.size() < kMaxShown)
      errors_.push_back(e);
    else
      ++dropped_;
  }
  // The end of the check: appends "... and N more" when failures were left out.
  void close() {
    if (dropped_) errors_.push_back("... and " + std::to_string(dropped_) + " more");
  }

 private:
  bool& ok_;
  std::vector<std::string>& errors_;
  size_t dropped_ = 0;
};

}  // namespace alloclab
