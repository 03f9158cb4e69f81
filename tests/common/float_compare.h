// NaN-safe float comparison for every attnscope test.
//
// The rule: a comparison that sees NaN (or an infinity where a finite value
// is expected) fails. `std::max(worst, diff)` silently drops NaN (NaN < x is
// false), so a statistic that came out entirely NaN would pass; use these
// helpers instead of hand-written loops:
//
//   EXPECT_LE(MaxAbsDiff(actual, expected), 1e-5)   // fails on NaN: NaN <= x is false
//   EXPECT_TRUE(AllClose(actual, expected, 1e-5))   // names the worst element
//   ExpectAllClose(actual, expected, 1e-5);          // the same, as a statement
//
// Header-only; link the CMake target attnscope::test_common.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>
#include <string>

namespace attnscope::test {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The worse of two differences: NaN if either is NaN, else the larger. Use
// it to fold differences (`worst = Worse(worst, d)`); once NaN, stays NaN.
inline double Worse(double worst, double diff) {
  if (std::isnan(worst) || std::isnan(diff)) return kNaN;
  return diff > worst ? diff : worst;
}

// |a - b|, NaN when either is NaN or both are the same infinity (a
// non-finite value never compares close to anything).
inline double AbsDiff(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return std::isnan(a) || std::isnan(b) || a == b ? kNaN : kInf;
  }
  return std::fabs(a - b);
}

// True only when diff <= tol; false for NaN.
inline bool Within(double diff, double tol) { return diff <= tol; }

// Largest |a[i] - b[i]| over two indexable containers of numbers (vector,
// array, span...): +inf when their sizes differ, NaN when any element pair
// gives NaN (see AbsDiff), 0 for two empty containers.
template <typename A, typename B>
double MaxAbsDiff(const A& a, const B& b) {
  if (std::size(a) != std::size(b)) return kInf;
  double worst = 0.0;
  for (std::size_t i = 0; i < std::size(a); ++i) {
    worst = Worse(worst, AbsDiff(static_cast<double>(a[i]), static_cast<double>(b[i])));
  }
  return worst;
}

// Success when sizes agree and every |actual[i] - expected[i]| <= atol +
// rtol * |expected[i]| (NaN and infinities fail). The failure message names
// the sizes or the first offending index, both values and the tolerance.
template <typename A, typename B>
::testing::AssertionResult AllClose(const A& actual, const B& expected, double atol,
                                    double rtol = 0.0) {
  if (std::size(actual) != std::size(expected)) {
    return ::testing::AssertionFailure() << "size " << std::size(actual) << " != expected size "
                                         << std::size(expected);
  }
  for (std::size_t i = 0; i < std::size(actual); ++i) {
    const double x = static_cast<double>(actual[i]), y = static_cast<double>(expected[i]);
    const double tol = atol + rtol * std::fabs(y);
    if (!Within(AbsDiff(x, y), tol)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << x << " vs expected " << y << " (|diff| "
             << AbsDiff(x, y) << " > tolerance " << tol << "; max |diff| over all "
             << MaxAbsDiff(actual, expected) << ")";
    }
  }
  return ::testing::AssertionSuccess() << "max |diff| " << MaxAbsDiff(actual, expected);
}

// EXPECT_TRUE(AllClose(...)) as a statement: a failure is reported at the
// caller's file and line, prefixed with `what`.
template <typename A, typename B>
void ExpectAllClose(const A& actual, const B& expected, double atol, double rtol = 0.0,
                    const std::string& what = "", const char* file = __builtin_FILE(),
                    int line = __builtin_LINE()) {
  const ::testing::AssertionResult close = AllClose(actual, expected, atol, rtol);
  if (!close) ADD_FAILURE_AT(file, line) << what << (what.empty() ? "" : ": ") << close.message();
}

}  // namespace attnscope::test
