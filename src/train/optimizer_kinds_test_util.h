// Tests over optimizer kinds, one for every member of an array or one per member: their parameter is a kind
// ("adam") or a comma-separated kind per member ("nesterov,adam,adam").
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dltune {

// Member m's kind of `kinds`.
inline std::string MemberKind(const std::string& kinds, std::size_t m) {
  std::vector<std::string> kind_of;
  for (std::size_t start = 0; start <= kinds.size();) {
    const std::size_t comma = std::min(kinds.find(',', start), kinds.size());
    kind_of.push_back(kinds.substr(start, comma - start));
    start = comma + 1;
  }
  return kind_of.size() == 1 ? kind_of.front() : kind_of.at(m);
}

// The test's name: its kinds joined by '_'.
inline std::string KindsTestName(const ::testing::TestParamInfo<std::string>& param_info) {
  std::string name = param_info.param;
  std::replace(name.begin(), name.end(), ',', '_');
  return name;
}

}  // namespace dltune
