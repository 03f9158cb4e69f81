// A small command-line flag parser: "--name value", "--name=value" and
// boolean "--name". Unknown flags and missing values are usage errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace attnscope::cli {

struct FlagSpec {
  std::string name;  // without the leading "--"
  bool takes_value = true;
};

class Flags {
 public:
  // InvalidArgument for an unknown flag, a value-taking flag at the end, a
  // boolean flag given a value, a flag given twice, or a positional argument.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // The flag as an integer in [min, max]; `fallback` when absent.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback, int64_t min,
                                 int64_t max) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // Sets (or replaces) the value of `name`, e.g. --text from --text-file.
  void Set(const std::string& name, std::string value) { values_[name] = std::move(value); }
  // Removes `name` if present.
  void Erase(const std::string& name) { values_.erase(name); }

 private:
  std::map<std::string, std::string> values_;
};

// "1,2,3" (or "1 2 3", or one id a line) -> {1,2,3}: ids separated by one
// comma and/or whitespace. InvalidArgument naming `what` and the bad item for
// a non-integer, an empty item ("1,,2", a leading or trailing comma) or no
// ids at all.
absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text, const std::string& what);

// True if `args` holds --help or -h.
bool WantsHelp(const std::vector<std::string>& args);

}  // namespace attnscope::cli
