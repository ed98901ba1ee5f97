// "Did you mean": see suggest.hpp.
#include "alloclab/base/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <utility>

namespace alloclab {

namespace {

char lower(char c) { return char(std::tolower(static_cast<unsigned char>(c))); }

// Optimal-string-alignment distance (Damerau-Levenshtein with each substring edited once), case ignored.
size_t distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& candidates) {
  std::vector<std::pair<size_t, size_t>> near;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] == name) return {};
    const size_t limit = std::max<size_t>(1, std::max(name.size(), candidates[i].size()) / 3);
    const size_t dist = distance(name, candidates[i]);
    if (dist <= limit) near.emplace_back(dist, i);
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t k = 0; k < near.size() && k < 3; ++k) out.push_back(candidates[near[k].second]);
  return out;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string> near = closest_names(name, candidates);
  if (near.empty()) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < near.size(); ++i)
    out += (i == 0 ? "'" : i + 1 == near.size() ? " or '" : ", '") + near[i] + "'";
  return out + "?";
}

}  // namespace alloclab
