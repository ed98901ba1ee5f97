// "Did you mean": the known names closest to a mistyped one, for error messages that name a scenario, a parameter, a
// choice value, a lock kind or a lock class. The one place this logic lives: the Python package calls it too
// (alloclab._core.did_you_mean) for the names it checks itself (studies).
//
// Models: nothing of the kernel. Closeness is the Damerau-Levenshtein distance (insertions, deletions, substitutions
// and swaps of two neighbours each count 1; case is ignored), as git's "did you mean" uses.
// Leaves out: phonetic or keyboard-layout similarity.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace alloclab {

// The candidates at most max(1, len/3) edits from `name` (len: the longer of the two), closest first (ties in
// candidate order), at most three; none for an exact match.
std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& candidates);

// The tail an error message ends with: "; did you mean 'ticket'?" ("'a' or 'b'" for several), or "" when no
// candidate is close.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace alloclab
