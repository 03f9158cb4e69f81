#include "service/chat_template/value.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace attnscope::chat_template {

Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.b = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.i = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = f;
  return v;
}
Value Value::Str(std::string s, bool content) {
  Value v;
  v.kind = Kind::kString;
  if (content && !s.empty()) v.mask.assign(s.size(), '\1');
  v.s = std::move(s);
  return v;
}
Value Value::MakeList(List items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeDict(Dict items) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::Func(Function fn) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(std::move(fn));
  return v;
}

const Value* Value::Find(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Set(const std::string& key, Value v) {
  for (auto& [k, old] : *dict) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  dict->emplace_back(key, std::move(v));
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.b;
    case Value::Kind::kInt: return v.i != 0;
    case Value::Kind::kFloat: return v.f != 0;
    case Value::Kind::kString: return !v.s.empty();
    case Value::Kind::kList: return !v.list->empty();
    case Value::Kind::kDict: return !v.dict->empty() || v.is_namespace;
    case Value::Kind::kFunction: return true;
  }
  return false;
}

bool Equal(const Value& a, const Value& b) {
  const auto num = [](const Value& v) { return v.IsNumber() || v.kind == Value::Kind::kBool; };
  if (num(a) && num(b)) {
    const double x = a.kind == Value::Kind::kBool ? a.b : a.AsDouble();
    const double y = b.kind == Value::Kind::kBool ? b.b : b.AsDouble();
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!Equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    default: return a.fn == b.fn;
  }
}

namespace {

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest repr that round-trips, as Python prints floats.
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string out = buf;
  if (out.find_first_of(".einn") == std::string::npos) out += ".0";
  return out;
}

std::string QuoteRepr(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

void JsonString(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

absl::Status JsonValue(const Value& v, int indent, int depth, std::string& out) {
  const std::string newline =
      indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
  const std::string close =
      indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * depth), ' ');
  const std::string comma = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Value::Kind::kNone: out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: out += std::to_string(v.i); return absl::OkStatus();
    case Value::Kind::kFloat:
      out += std::isfinite(v.f) ? FloatRepr(v.f) : (std::isnan(v.f) ? "NaN" : (v.f > 0 ? "Infinity" : "-Infinity"));
      return absl::OkStatus();
    case Value::Kind::kString: JsonString(v.s, out); return absl::OkStatus();
    case Value::Kind::kList:
      if (v.list->empty()) {
        out += "[]";
        return absl::OkStatus();
      }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += k ? comma + newline : newline;
        if (auto st = JsonValue((*v.list)[k], indent, depth + 1, out); !st.ok()) return st;
      }
      out += close + "]";
      return absl::OkStatus();
    case Value::Kind::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return absl::OkStatus();
      }
      out += "{";
      size_t k = 0;
      for (const auto& [key, item] : *v.dict) {
        out += k++ ? comma + newline : newline;
        JsonString(key, out);
        out += ": ";
        if (auto st = JsonValue(item, indent, depth + 1, out); !st.ok()) return st;
      }
      out += close + "}";
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("tojson: a ", KindName(v), " is not JSON serializable"));
  }
}

}  // namespace

std::string Repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return FloatRepr(v.f);
    case Value::Kind::kString: return QuoteRepr(v.s);
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + Repr((*v.list)[k]);
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      size_t k = 0;
      for (const auto& [key, item] : *v.dict) {
        out += (k++ ? ", " : "") + QuoteRepr(key) + ": " + Repr(item);
      }
      return out + (v.is_namespace ? "}>" : "}");
    }
    case Value::Kind::kFunction: return "<function>";
  }
  return "";
}

Value ToStr(const Value& v) {
  if (v.kind == Value::Kind::kString) return v;
  return Value::Str(Repr(v));
}

absl::StatusOr<std::string> ToJson(const Value& v, int indent) {
  std::string out;
  if (auto st = JsonValue(v, indent, 0, out); !st.ok()) return st;
  return out;
}

Value FromJson(const nlohmann::json& json, bool content) {
  if (json.is_null()) return Value::None();
  if (json.is_boolean()) return Value::Bool(json.get<bool>());
  if (json.is_number_integer()) return Value::Int(json.get<int64_t>());
  if (json.is_number()) return Value::Float(json.get<double>());
  if (json.is_string()) return Value::Str(json.get<std::string>(), content);
  if (json.is_array()) {
    List items;
    for (const auto& item : json) items.push_back(FromJson(item, content));
    return Value::MakeList(std::move(items));
  }
  Dict items;
  for (const auto& [k, item] : json.items()) items.emplace_back(k, FromJson(item, content));
  return Value::MakeDict(std::move(items));
}

std::string KindName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNone: return "none";
    case Value::Kind::kBool: return "boolean";
    case Value::Kind::kInt: return "integer";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "string";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.is_namespace ? "namespace" : "dict";
    case Value::Kind::kFunction: return "function";
  }
  return "value";
}

Value Concat(const Value& a, const Value& b) {
  Value out = a;
  AppendStr(out, b);
  return out;
}

Value Substr(const Value& v, size_t begin, size_t end) {
  Value out = Value::Str(v.s.substr(begin, end - begin));
  if (!v.mask.empty()) {
    out.mask = v.mask.substr(begin, end - begin);
    if (out.mask.find('\1') == std::string::npos) out.mask.clear();
  }
  return out;
}

void AppendStr(Value& out, const Value& piece) {
  if (piece.mask.empty()) {
    if (!out.mask.empty()) out.mask.append(piece.s.size(), '\0');
  } else {
    if (out.mask.empty()) out.mask.assign(out.s.size(), '\0');
    out.mask += piece.mask;
  }
  out.s += piece.s;
}

}  // namespace attnscope::chat_template
