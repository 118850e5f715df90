// SPDX-License-Identifier: Apache-2.0
// An array written as numpy's str() writes it with the default print options: nested brackets, elements padded to
// one width (floats with their decimal points lined up, or all in scientific notation when the values span too
// many orders of magnitude), lines wrapped at 75 characters, and arrays of more than 1000 elements summarised to
// the first and last 3 items along each axis.
#pragma once

#include "values.hpp"

#include <functional>
#include <string>

namespace ckpt_tool {

// Writes `a` in pieces to `out`, followed by a newline. `summarise` as numpy does past 1000 elements.
// `written`, when given, is called now and then with the number of elements written so far (for a progress bar).
void write_array(const ArrayView& a, bool summarise, const std::function<void(const std::string&)>& out,
                 const std::function<void(uint64_t)>& written = {});

// numpy's summarisation threshold: arrays with more elements are summarised.
constexpr uint64_t kSummaryThreshold = 1000;

}  // namespace ckpt_tool
