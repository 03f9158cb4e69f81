#include "service/cli/flags.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace attnscope::cli {
namespace {

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, const std::string& name) {
  for (const FlagSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   const std::vector<FlagSpec>& specs) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = FindSpec(specs, name);
    if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (flags.Has(name)) return absl::InvalidArgumentError(absl::StrCat("--", name, " given twice"));
    if (!spec->takes_value && inline_value) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    if (spec->takes_value && !inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    flags.values_[name] = value;
  }
  return flags;
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback, int64_t min,
                                      int64_t max) const {
  if (!Has(name)) return fallback;
  int64_t v = 0;
  if (!absl::SimpleAtoi(Get(name), &v) || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer in [", min,
                                                   ", ", max, "], got '", Get(name), "'"));
  }
  return v;
}

absl::StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  double v = 0;
  if (!absl::SimpleAtod(Get(name), &v) || !(v == v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a number, got '", Get(name), "'"));
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text,
                                                 const std::string& what) {
  std::vector<int64_t> ids;
  for (absl::string_view item : absl::StrSplit(text, absl::ByAnyChar(", \n\t"), absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": '", std::string(item), "' is not an integer token id"));
    }
    ids.push_back(v);
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no token ids given"));
  return ids;
}

}  // namespace attnscope::cli
