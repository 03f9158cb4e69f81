#include "service/chat_template/builtins.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace attnscope::chat_template {
namespace {

// The most items range() builds: as many as all loops of one rendering may
// visit (renderer.cc kMaxLoopItems).
constexpr uint64_t kMaxRangeItems = 100000;

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Byte offsets of the characters of s, plus s.size().
std::vector<size_t> CharStarts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t k = 0; k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) starts.push_back(k);
  }
  starts.push_back(s.size());
  return starts;
}

const Value* Arg(std::vector<Value>& args, Kwargs& kwargs, size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  for (auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Strips characters in `chars` (whitespace when null) from the chosen ends.
Value Strip(const Value& v, const Value* chars, bool left, bool right) {
  auto strip = [&](char c) {
    if (chars == nullptr || chars->kind == Value::Kind::kNone) return IsSpace(c);
    return chars->s.find(c) != std::string::npos;
  };
  size_t begin = 0;
  size_t end = v.s.size();
  while (left && begin < end && strip(v.s[begin])) ++begin;
  while (right && end > begin && strip(v.s[end - 1])) --end;
  return Substr(v, begin, end);
}

Value CaseMap(const Value& v, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  Value out = v;
  bool start = true;
  for (size_t k = 0; k < out.s.size(); ++k) {
    const auto c = static_cast<unsigned char>(out.s[k]);
    bool up = mode == 1 || ((mode == 2 || mode == 3) && start);
    if (mode == 3 && k > 0) up = false;
    out.s[k] = static_cast<char>(up ? std::toupper(c) : std::tolower(c));
    start = !std::isalnum(c);
  }
  return out;
}

Value Replace(const Value& v, const std::string& from, const Value& to, int64_t count) {
  if (from.empty()) return v;
  Value out = Value::Str("");
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t hit = v.s.find(from, pos);
    if (hit == std::string::npos) break;
    AppendStr(out, Substr(v, pos, hit));
    AppendStr(out, to);
    pos = hit + from.size();
  }
  AppendStr(out, Substr(v, pos, v.s.size()));
  return out;
}

Value Split(const Value& v, const Value* sep, int64_t max_split) {
  List parts;
  if (sep == nullptr || sep->kind == Value::Kind::kNone) {
    size_t k = 0;
    while (true) {
      while (k < v.s.size() && IsSpace(v.s[k])) ++k;
      if (k >= v.s.size()) break;
      size_t end = k;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        end = v.s.size();
        while (end > k && IsSpace(v.s[end - 1])) --end;
      } else {
        while (end < v.s.size() && !IsSpace(v.s[end])) ++end;
      }
      parts.push_back(Substr(v, k, end));
      k = end;
    }
    return Value::MakeList(std::move(parts));
  }
  size_t pos = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t hit = sep->s.empty() ? std::string::npos : v.s.find(sep->s, pos);
    if (hit == std::string::npos) break;
    parts.push_back(Substr(v, pos, hit));
    pos = hit + sep->s.size();
  }
  parts.push_back(Substr(v, pos, v.s.size()));
  return Value::MakeList(std::move(parts));
}

bool AffixMatch(const Value& v, const Value& affix, bool prefix) {
  if (affix.kind == Value::Kind::kList) {
    for (const Value& a : *affix.list) {
      if (AffixMatch(v, a, prefix)) return true;
    }
    return false;
  }
  const std::string& a = affix.s;
  if (a.size() > v.s.size()) return false;
  return v.s.compare(prefix ? 0 : v.s.size() - a.size(), a.size(), a) == 0;
}

absl::StatusOr<Value> Join(const Value& items, const Value& sep, const Value* attribute) {
  if (items.kind != Value::Kind::kList) return Bad(absl::StrCat("join: expected a list, got ", KindName(items)));
  Value out = Value::Str("");
  for (size_t k = 0; k < items.list->size(); ++k) {
    if (k > 0) AppendStr(out, sep);
    const Value& item = (*items.list)[k];
    AppendStr(out, ToStr(attribute != nullptr ? GetAttr(item, attribute->s) : item));
  }
  return out;
}

absl::StatusOr<Value> StringMethod(const Value& self, const std::string& name,
                                   std::vector<Value>& args, Kwargs& kwargs) {
  const Value* a0 = Arg(args, kwargs, 0, "");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Strip(self, a0, name != "rstrip", name != "lstrip");
  }
  if (name == "startswith" || name == "endswith") {
    if (a0 == nullptr) return Bad(absl::StrCat(name, "() needs an argument"));
    return Value::Bool(AffixMatch(self, *a0, name == "startswith"));
  }
  if (name == "split") {
    const Value* sep = Arg(args, kwargs, 0, "sep");
    const Value* max = Arg(args, kwargs, 1, "maxsplit");
    return Split(self, sep, max != nullptr ? max->i : -1);
  }
  if (name == "replace") {
    if (args.size() < 2) return Bad("replace() needs two arguments");
    return Replace(self, args[0].s, args[1], args.size() > 2 ? args[2].i : -1);
  }
  if (name == "upper") return CaseMap(self, 1);
  if (name == "lower") return CaseMap(self, 0);
  if (name == "title") return CaseMap(self, 2);
  if (name == "capitalize") return CaseMap(self, 3);
  if (name == "join") {
    if (a0 == nullptr) return Bad("join() needs an argument");
    return Join(*a0, self, nullptr);
  }
  if (name == "find") {
    if (a0 == nullptr) return Bad("find() needs an argument");
    const size_t hit = self.s.find(a0->s);
    return Value::Int(hit == std::string::npos ? -1 : static_cast<int64_t>(hit));
  }
  if (name == "count") {
    if (a0 == nullptr || a0->s.empty()) return Bad("count() needs a non-empty argument");
    int64_t n = 0;
    for (size_t p = self.s.find(a0->s); p != std::string::npos; p = self.s.find(a0->s, p + a0->s.size())) ++n;
    return Value::Int(n);
  }
  return Bad(absl::StrCat("unsupported string method '", name, "'"));
}

absl::StatusOr<Value> DictMethod(const Value& self, const std::string& name,
                                 std::vector<Value>& args, Kwargs& kwargs) {
  List out;
  if (name == "items" || name == "keys" || name == "values") {
    for (const auto& [k, v] : *self.dict) {
      if (name == "items") out.push_back(Value::MakeList({Value::Str(k), v}));
      if (name == "keys") out.push_back(Value::Str(k));
      if (name == "values") out.push_back(v);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "get") {
    if (args.empty()) return Bad("get() needs a key");
    const Value* hit = self.Find(args[0].s);
    if (hit != nullptr) return *hit;
    return args.size() > 1 ? args[1] : Value::None();
  }
  return Bad(absl::StrCat("unsupported dict method '", name, "'"));
}

int64_t Length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return static_cast<int64_t>(CharStarts(v.s).size() - 1);
    case Value::Kind::kList: return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict->size());
    default: return 0;
  }
}

absl::StatusOr<Value> ToList(const Value& v) {
  if (v.kind == Value::Kind::kList) return v;
  List out;
  if (v.kind == Value::Kind::kDict) {
    for (const auto& [k, item] : *v.dict) out.push_back(Value::Str(k));
  } else if (v.kind == Value::Kind::kString) {
    const auto starts = CharStarts(v.s);
    for (size_t k = 0; k + 1 < starts.size(); ++k) out.push_back(Substr(v, starts[k], starts[k + 1]));
  } else {
    return Bad(absl::StrCat("a ", KindName(v), " is not iterable"));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Indent(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  const Value* width = Arg(args, kwargs, 0, "width");
  const Value* first = Arg(args, kwargs, 1, "first");
  const Value* blank = Arg(args, kwargs, 2, "blank");
  const Value pad = width != nullptr && width->IsString()
                        ? *width
                        : Value::Str(std::string(width != nullptr ? width->i : 4, ' '));
  Value out = Value::Str("");
  if (first != nullptr && Truthy(*first)) AppendStr(out, pad);
  size_t pos = 0;
  while (true) {
    const size_t nl = v.s.find('\n', pos);
    if (nl == std::string::npos) {
      AppendStr(out, Substr(v, pos, v.s.size()));
      return out;
    }
    AppendStr(out, Substr(v, pos, nl + 1));
    const size_t next_end = v.s.find('\n', nl + 1);
    const bool next_blank = (next_end == std::string::npos ? v.s.size() : next_end) == nl + 1;
    if (nl + 1 < v.s.size() && (!next_blank || (blank != nullptr && Truthy(*blank)))) AppendStr(out, pad);
    pos = nl + 1;
  }
}

// select/reject/selectattr/rejectattr: keep items whose test passes (or fails).
absl::StatusOr<Value> FilterItems(const Value& v, bool by_attr, bool keep, std::vector<Value>& args) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value list, ToList(v));
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty()) return Bad("selectattr/rejectattr need an attribute name");
    attr = args[k++].s;
  }
  const std::string test = k < args.size() ? args[k++].s : "";
  std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(std::min(k, args.size())), args.end());
  List out;
  for (const Value& item : *list.list) {
    const Value subject = by_attr ? GetAttr(item, attr) : item;
    bool pass = Truthy(subject);
    if (!test.empty()) {
      ATTNSCOPE_ASSIGN_OR_RETURN(pass, ApplyTest(test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

bool HasContent(const Value& v) {
  if (!v.mask.empty()) return true;
  if (v.kind == Value::Kind::kList) return std::any_of(v.list->begin(), v.list->end(), HasContent);
  if (v.kind == Value::Kind::kDict) {
    return std::any_of(v.dict->begin(), v.dict->end(), [](const auto& e) { return HasContent(e.second); });
  }
  return false;
}


// The filters, one function each: value | name(args, kwargs).
using Filter = absl::StatusOr<Value> (*)(const Value& v, std::vector<Value>& args, Kwargs& kwargs);

absl::StatusOr<Value> TrimFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  return Strip(ToStr(v), Arg(args, kwargs, 0, ""), true, true);
}

absl::StatusOr<Value> ToJsonFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  const Value* indent = Arg(args, kwargs, 0, "indent");
  ATTNSCOPE_ASSIGN_OR_RETURN(
      std::string json,
      ToJson(v, indent != nullptr && indent->kind == Value::Kind::kInt ? static_cast<int>(indent->i) : -1));
  // Serialised data that holds message content counts as content.
  return Value::Str(std::move(json), HasContent(v));
}

absl::StatusOr<Value> LengthFilter(const Value& v, std::vector<Value>&, Kwargs&) { return Value::Int(Length(v)); }

absl::StatusOr<Value> DefaultFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  const Value* fallback = Arg(args, kwargs, 0, "");
  const Value* boolean = Arg(args, kwargs, 1, "boolean");
  const bool use_default = v.IsUndefined() || (boolean != nullptr && Truthy(*boolean) && !Truthy(v));
  return use_default ? (fallback != nullptr ? *fallback : Value::Str("")) : v;
}

absl::StatusOr<Value> JoinFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  const Value* sep = Arg(args, kwargs, 0, "d");
  return Join(v, sep != nullptr ? *sep : Value::Str(""), Arg(args, kwargs, 1, "attribute"));
}

absl::StatusOr<Value> UpperFilter(const Value& v, std::vector<Value>&, Kwargs&) { return CaseMap(ToStr(v), 1); }
absl::StatusOr<Value> LowerFilter(const Value& v, std::vector<Value>&, Kwargs&) { return CaseMap(ToStr(v), 0); }
absl::StatusOr<Value> TitleFilter(const Value& v, std::vector<Value>&, Kwargs&) { return CaseMap(ToStr(v), 2); }
absl::StatusOr<Value> CapitalizeFilter(const Value& v, std::vector<Value>&, Kwargs&) {
  return CaseMap(CaseMap(ToStr(v), 0), 3);
}

absl::StatusOr<Value> ItemsFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  if (v.kind != Value::Kind::kDict) return Bad("items: expected a dict");
  return DictMethod(v, "items", args, kwargs);
}

// first and last: undefined for an empty sequence.
absl::StatusOr<Value> EndItem(const Value& v, bool first) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value list, ToList(v));
  if (list.list->empty()) return Value{};
  return first ? list.list->front() : list.list->back();
}
absl::StatusOr<Value> FirstFilter(const Value& v, std::vector<Value>&, Kwargs&) { return EndItem(v, true); }
absl::StatusOr<Value> LastFilter(const Value& v, std::vector<Value>&, Kwargs&) { return EndItem(v, false); }

absl::StatusOr<Value> ListFilter(const Value& v, std::vector<Value>&, Kwargs&) { return ToList(v); }
absl::StatusOr<Value> ReverseFilter(const Value& v, std::vector<Value>&, Kwargs&) {
  return Slice(v, Value{}, Value{}, Value::Int(-1));
}
absl::StatusOr<Value> StringFilter(const Value& v, std::vector<Value>&, Kwargs&) { return ToStr(v); }
absl::StatusOr<Value> SafeFilter(const Value& v, std::vector<Value>&, Kwargs&) { return v; }

absl::StatusOr<Value> IntFilter(const Value& v, std::vector<Value>&, Kwargs&) {
  if (v.kind == Value::Kind::kFloat) return Value::Int(static_cast<int64_t>(v.f));
  if (v.kind == Value::Kind::kBool) return Value::Int(v.b);
  if (v.kind == Value::Kind::kString) return Value::Int(std::strtoll(v.s.c_str(), nullptr, 10));
  return v.kind == Value::Kind::kInt ? v : Value::Int(0);
}

absl::StatusOr<Value> FloatFilter(const Value& v, std::vector<Value>&, Kwargs&) {
  if (v.kind == Value::Kind::kString) return Value::Float(std::strtod(v.s.c_str(), nullptr));
  return Value::Float(v.IsNumber() ? v.AsDouble() : 0.0);
}

absl::StatusOr<Value> AbsFilter(const Value& v, std::vector<Value>&, Kwargs&) {
  return v.kind == Value::Kind::kInt ? Value::Int(std::llabs(v.i)) : Value::Float(std::fabs(v.f));
}

absl::StatusOr<Value> ReplaceFilter(const Value& v, std::vector<Value>& args, Kwargs&) {
  if (args.size() < 2) return Bad("replace needs two arguments");
  return Replace(ToStr(v), args[0].s, ToStr(args[1]), args.size() > 2 ? args[2].i : -1);
}

absl::StatusOr<Value> IndentFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  return Indent(ToStr(v), args, kwargs);
}

absl::StatusOr<Value> SelectFilter(const Value& v, std::vector<Value>& args, Kwargs&) {
  return FilterItems(v, false, true, args);
}
absl::StatusOr<Value> RejectFilter(const Value& v, std::vector<Value>& args, Kwargs&) {
  return FilterItems(v, false, false, args);
}
absl::StatusOr<Value> SelectAttrFilter(const Value& v, std::vector<Value>& args, Kwargs&) {
  return FilterItems(v, true, true, args);
}
absl::StatusOr<Value> RejectAttrFilter(const Value& v, std::vector<Value>& args, Kwargs&) {
  return FilterItems(v, true, false, args);
}

// map(attribute="x") takes an attribute of each item; map("name", args...)
// applies a filter to each.
absl::StatusOr<Value> MapFilter(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  const Value* attribute = Arg(args, kwargs, 99, "attribute");
  ATTNSCOPE_ASSIGN_OR_RETURN(Value list, ToList(v));
  List out;
  for (const Value& item : *list.list) {
    if (attribute != nullptr) {
      out.push_back(GetAttr(item, attribute->s));
      continue;
    }
    if (args.empty()) return Bad("map needs a filter name or attribute=");
    std::vector<Value> rest(args.begin() + 1, args.end());
    Kwargs none;
    ATTNSCOPE_ASSIGN_OR_RETURN(Value mapped, ApplyFilter(args[0].s, item, rest, none));
    out.push_back(std::move(mapped));
  }
  return Value::MakeList(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  Filter apply;
};

constexpr FilterEntry kFilters[] = {
    {"trim", TrimFilter},
    {"tojson", ToJsonFilter},
    {"length", LengthFilter},
    {"count", LengthFilter},
    {"default", DefaultFilter},
    {"d", DefaultFilter},
    {"join", JoinFilter},
    {"upper", UpperFilter},
    {"lower", LowerFilter},
    {"title", TitleFilter},
    {"capitalize", CapitalizeFilter},
    {"items", ItemsFilter},
    {"first", FirstFilter},
    {"last", LastFilter},
    {"list", ListFilter},
    {"reverse", ReverseFilter},
    {"string", StringFilter},
    {"safe", SafeFilter},
    {"int", IntFilter},
    {"float", FloatFilter},
    {"abs", AbsFilter},
    {"replace", ReplaceFilter},
    {"indent", IndentFilter},
    {"select", SelectFilter},
    {"reject", RejectFilter},
    {"selectattr", SelectAttrFilter},
    {"rejectattr", RejectAttrFilter},
    {"map", MapFilter},
};


// The global functions (AddGlobalFunctions).
absl::StatusOr<Value> Namespace(std::vector<Value>& args, Kwargs& kwargs) {
  Value ns = Value::MakeDict();
  ns.is_namespace = true;
  for (const Value& a : args) {
    if (a.kind == Value::Kind::kDict) {
      for (const auto& [k, v] : *a.dict) ns.Set(k, v);
    }
  }
  for (auto& [k, v] : kwargs) ns.Set(k, v);
  return ns;
}

absl::StatusOr<Value> DictOf(std::vector<Value>&, Kwargs& kwargs) {
  return Value::MakeDict(Dict(kwargs.begin(), kwargs.end()));
}

absl::StatusOr<Value> RaiseException(std::vector<Value>& args, Kwargs&) {
  return absl::InvalidArgumentError(absl::StrCat(kRaisedPrefix, args.empty() ? "" : ToStr(args[0]).s));
}

absl::StatusOr<Value> Range(std::vector<Value>& args, Kwargs&) {
  int64_t start = 0, stop = 0, step = 1;
  if (args.size() == 1) stop = args[0].i;
  if (args.size() >= 2) {
    start = args[0].i;
    stop = args[1].i;
  }
  if (args.size() >= 3) step = args[2].i;
  if (step == 0 || args.empty()) return Bad("range: bad arguments");
  // Counted before anything is built, in unsigned arithmetic: building a
  // huge range first made it slow to refuse, and `k += step` could overflow
  // near the ends of int64.
  const bool up = step > 0;
  const uint64_t span = up ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                           : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
  const uint64_t stride = up ? uint64_t(step) : 0 - uint64_t(step);
  const uint64_t count = span == 0 ? 0 : (span - 1) / stride + 1;
  if (count > kMaxRangeItems) {
    return Bad(absl::StrCat("range: ", count, " items is more than ", kMaxRangeItems));
  }
  List out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    out.push_back(Value::Int(static_cast<int64_t>(uint64_t(start) + i * uint64_t(step))));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> StrftimeNow(std::vector<Value>& args, Kwargs&) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), args.empty() ? "%d %B %Y" : args[0].s.c_str(), &tm);
  return Value::Str(std::string(buf, n));
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.kind == Value::Kind::kDict) {
    if (const Value* hit = obj.Find(name)) return *hit;
    if (!obj.is_namespace && (name == "items" || name == "keys" || name == "values" || name == "get")) {
      return Value::Func([obj, name](std::vector<Value>& args, Kwargs& kwargs) {
        return DictMethod(obj, name, args, kwargs);
      });
    }
    return Value{};
  }
  if (obj.kind == Value::Kind::kString) {
    return Value::Func([obj, name](std::vector<Value>& args, Kwargs& kwargs) {
      return StringMethod(obj, name, args, kwargs);
    });
  }
  return Value{};
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.kind == Value::Kind::kDict) {
    return key.IsString() ? GetAttr(obj, key.s) : Value{};
  }
  if (key.kind != Value::Kind::kInt) return Value{};
  if (obj.kind == Value::Kind::kList) {
    const auto n = static_cast<int64_t>(obj.list->size());
    const int64_t k = key.i < 0 ? key.i + n : key.i;
    return k >= 0 && k < n ? (*obj.list)[k] : Value{};
  }
  if (obj.kind == Value::Kind::kString) {
    const auto starts = CharStarts(obj.s);
    const auto n = static_cast<int64_t>(starts.size() - 1);
    const int64_t k = key.i < 0 ? key.i + n : key.i;
    return k >= 0 && k < n ? Substr(obj, starts[k], starts[k + 1]) : Value{};
  }
  return Value{};
}

absl::StatusOr<Value> Slice(const Value& obj, const Value& start, const Value& stop,
                            const Value& step) {
  const int64_t st = step.kind == Value::Kind::kInt ? step.i : 1;
  if (st == 0) return Bad("slice step cannot be zero");
  ATTNSCOPE_ASSIGN_OR_RETURN(Value items, ToList(obj));
  const auto n = static_cast<int64_t>(items.list->size());
  auto clamp = [&](const Value& v, int64_t fallback, int64_t lo, int64_t hi) {
    if (v.kind != Value::Kind::kInt) return fallback;
    const int64_t k = v.i < 0 ? v.i + n : v.i;
    return std::clamp(k, lo, hi);
  };
  const int64_t begin = st > 0 ? clamp(start, 0, 0, n) : clamp(start, n - 1, -1, n - 1);
  const int64_t end = st > 0 ? clamp(stop, n, 0, n) : clamp(stop, -1, -1, n - 1);
  List out;
  for (int64_t k = begin; st > 0 ? k < end : k > end; k += st) out.push_back((*items.list)[k]);
  if (obj.kind != Value::Kind::kString) return Value::MakeList(std::move(out));
  Value s = Value::Str("");
  for (const Value& c : out) AppendStr(s, c);
  return s;
}

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& v,
                                  std::vector<Value>& args, Kwargs& kwargs) {
  for (const FilterEntry& filter : kFilters) {
    if (filter.name == name) return filter.apply(v, args, kwargs);
  }
  return Bad(absl::StrCat("unsupported filter '", name, "'"));
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v,
                               const std::vector<Value>& args) {
  using K = Value::Kind;
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "none") return v.kind == K::kNone;
  if (name == "string") return v.kind == K::kString;
  if (name == "mapping") return v.kind == K::kDict;
  if (name == "iterable") return v.kind == K::kList || v.kind == K::kDict || v.kind == K::kString;
  if (name == "sequence") return v.kind == K::kList || v.kind == K::kDict || v.kind == K::kString;
  if (name == "number") return v.IsNumber();
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "callable") return v.kind == K::kFunction;
  if (name == "even" || name == "odd") return v.kind == K::kInt && (v.i % 2 == 0) == (name == "even");
  if (name == "lower" || name == "upper") {
    const Value mapped = CaseMap(v, name == "upper" ? 1 : 0);
    return v.IsString() && mapped.s == v.s;
  }
  if (args.empty()) return Bad(absl::StrCat("unsupported test '", name, "' (or missing argument)"));
  const Value& a = args[0];
  if (name == "eq" || name == "equalto" || name == "sameas") return Equal(v, a);
  if (name == "ne") return !Equal(v, a);
  if (name == "divisibleby") return v.kind == K::kInt && a.kind == K::kInt && a.i != 0 && v.i % a.i == 0;
  if (name == "lt" || name == "lessthan") return v.AsDouble() < a.AsDouble();
  if (name == "gt" || name == "greaterthan") return v.AsDouble() > a.AsDouble();
  if (name == "le") return v.AsDouble() <= a.AsDouble();
  if (name == "ge") return v.AsDouble() >= a.AsDouble();
  if (name == "in") {
    if (a.kind == K::kString) return v.IsString() && a.s.find(v.s) != std::string::npos;
    if (a.kind == K::kDict) return v.IsString() && a.Find(v.s) != nullptr;
    if (a.kind == K::kList) {
      return std::any_of(a.list->begin(), a.list->end(), [&](const Value& x) { return Equal(x, v); });
    }
    return false;
  }
  return Bad(absl::StrCat("unsupported test '", name, "'"));
}

void AddGlobalFunctions(Value& globals) {
  globals.Set("namespace", Value::Func(Namespace));
  globals.Set("dict", Value::Func(DictOf));
  globals.Set("raise_exception", Value::Func(RaiseException));
  globals.Set("range", Value::Func(Range));
  globals.Set("strftime_now", Value::Func(StrftimeNow));
}

}  // namespace attnscope::chat_template
