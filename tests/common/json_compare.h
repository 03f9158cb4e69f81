// NaN-safe comparison of two JSON documents of numbers (statistics exports,
// CLI output): the largest absolute difference between matching numbers.
//
// The project writes a non-finite statistic as JSON `null` (StatsToJson,
// the CLI's --json), so a `null` stands for NaN here and equals nothing: a
// `null` on either side, against a number or against another `null`, makes
// the difference NaN, which fails every `diff <= tol` check.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/common/float_compare.h"

namespace attnscope::test {

// A JSON number as a double; NaN for anything else (`null` included), which
// no `diff <= tol` check passes.
inline double JsonNumber(const nlohmann::json& j) {
  return j.is_number() ? j.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// Largest |a - b| over the numbers of two JSON values of the same shape
// (arrays element by element, objects key by key, in both directions). +inf
// when shapes, keys or non-numeric values differ; NaN when a number pair is
// NaN (see AbsDiff) or either side is `null`. When `mismatch` is given, it
// receives the JSON path of the first difference that is not a plain
// numeric one ("" if none).
inline double MaxJsonDiff(const nlohmann::json& a, const nlohmann::json& b,
                          std::string* mismatch = nullptr, const std::string& path = "$") {
  auto differ = [&](const std::string& why) {
    if (mismatch != nullptr && mismatch->empty()) *mismatch = path + ": " + why;
    return kInf;
  };
  if (a.is_null() || b.is_null()) {
    if (mismatch != nullptr && mismatch->empty()) {
      *mismatch = path + ": null (a non-finite number) vs " + (a.is_null() ? b : a).dump().substr(0, 80);
    }
    return kNaN;
  }
  if (a.is_number() && b.is_number()) {
    const double d = AbsDiff(a.get<double>(), b.get<double>());
    if (std::isnan(d) && mismatch != nullptr && mismatch->empty()) *mismatch = path + ": NaN";
    return d;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) {
      return differ("array of " + std::to_string(a.size()) + " vs " + std::to_string(b.size()));
    }
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = Worse(worst, MaxJsonDiff(a[i], b[i], mismatch, path + "[" + std::to_string(i) + "]"));
    }
    return worst;
  }
  if (a.is_object() && b.is_object()) {
    double worst = 0.0;
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) return differ("missing key " + it.key());
      worst = Worse(worst, MaxJsonDiff(a[it.key()], it.value(), mismatch, path + "." + it.key()));
    }
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return differ("unexpected key " + it.key());
    }
    return worst;
  }
  return a == b ? 0.0 : differ(a.dump().substr(0, 80) + " vs " + b.dump().substr(0, 80));
}

}  // namespace attnscope::test
