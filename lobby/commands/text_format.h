// Small helpers for the human-readable output of commands: aligned tables, and times (whose
// one home is lobby/base/time_format.h). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lobby/base/time_format.h"

namespace warren {

// Columns separated by two spaces and padded to the widest cell; the last column is not
// padded, so no line ends in blanks. Widths count UTF-8 code points, not bytes.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace warren
