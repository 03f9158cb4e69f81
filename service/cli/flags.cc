#include "service/cli/flags.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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
  // Separators: whitespace with at most one comma; a comma needs an id on
  // each side.
  bool comma_pending = false;  // a comma since the last id
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == ',') {
      if (ids.empty() || comma_pending) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": empty item at byte ", i, " (", ids.empty() ? "a leading comma" : "two commas",
            "); separate ids by one comma or by spaces"));
      }
      comma_pending = true;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] != ',' && text[end] != ' ' && text[end] != '\t' &&
           text[end] != '\n' && text[end] != '\r') {
      ++end;
    }
    const std::string item = text.substr(i, end - i);
    int64_t v = 0;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": '", item, "' is not an integer token id"));
    }
    ids.push_back(v);
    comma_pending = false;
    i = end;
  }
  if (comma_pending) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a trailing comma; separate ids by one comma or by spaces"));
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no token ids given"));
  return ids;
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace attnscope::cli
