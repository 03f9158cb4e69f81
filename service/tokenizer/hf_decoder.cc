#include "service/tokenizer/hf_decoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/tokenizer/byte_level.h"
#include "service/tokenizer/hf_json.h"
#include "service/tokenizer/hf_normalizer.h"
#include "service/tokenizer/regex.h"

namespace attnscope::tokenizer {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteLevelDecoder : public Decoder {
 public:
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string b;
      if (SymbolsToBytes(t, &b)) {
        bytes += b;
      } else {
        bytes += t;
      }
    }
    tokens.assign(1, SanitizeUtf8(bytes));
    return absl::OkStatus();
  }
  bool IsByteLevel() const override { return true; }
};

class ByteFallbackDecoder : public Decoder {
 public:
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (ValidateUtf8(pending).ok()) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& t : tokens) {
      const int b = ByteFallbackValue(t);
      if (b >= 0) {
        pending += static_cast<char>(b);
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
    return absl::OkStatus();
  }
};

class FuseDecoder : public Decoder {
 public:
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, all);
    return absl::OkStatus();
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string literal, std::string content)
      : pattern_(std::move(pattern)), literal_(std::move(literal)), content_(std::move(content)) {}
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      Piece p = Piece::Original(t, 0);
      ATTNSCOPE_RETURN_IF_ERROR(ReplaceAll(*pattern_, content_, p));
      t = std::move(p.text);
    }
    return absl::OkStatus();
  }
  std::string SpaceMarker() const override { return content_ == " " ? literal_ : ""; }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string literal_;  // the String pattern, "" for a Regex
  std::string content_;
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return absl::OkStatus();
    for (std::string& t : tokens) {
      size_t begin = 0;
      for (size_t n = 0; n < start_ && t.compare(begin, content_.size(), content_) == 0; ++n) {
        begin += content_.size();
      }
      size_t end = t.size();
      for (size_t n = 0; n < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++n) {
        end -= content_.size();
      }
      t = t.substr(begin, end - begin);
    }
    return absl::OkStatus();
  }

 private:
  std::string content_;
  size_t start_;
  size_t stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (!replacement_.empty() && t.compare(k, replacement_.size(), replacement_) == 0) {
          out += ' ';
          k += replacement_.size();
        } else {
          out += t[k++];
        }
      }
      if (i == 0 && strip_first_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
    return absl::OkStatus();
  }
  std::string SpaceMarker() const override { return replacement_; }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  absl::Status DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) ATTNSCOPE_RETURN_IF_ERROR(p->DecodeChain(tokens));
    return absl::OkStatus();
  }
  bool IsByteLevel() const override {
    for (const auto& p : parts_) {
      if (p->IsByteLevel()) return true;
    }
    return false;
  }
  std::string SpaceMarker() const override {
    for (const auto& p : parts_) {
      if (std::string m = p->SpaceMarker(); !m.empty()) return m;
    }
    return "";
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

absl::StatusOr<size_t> CountField(const nlohmann::json& json, const char* key,
                                  const std::string& path, const std::string& file) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned()) {
    return Malformed(file, absl::StrCat(path, ".", key), "expected a non-negative integer");
  }
  return it->get<size_t>();
}

}  // namespace

int ByteFallbackValue(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  const int hi = HexDigit(token[3]);
  const int lo = HexDigit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& json,
                                                      const std::string& path,
                                                      const std::string& file) {
  if (json.is_null()) return nullptr;
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, path, file));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    const nlohmann::json pattern = json.value("pattern", nlohmann::json());
    ATTNSCOPE_ASSIGN_OR_RETURN(auto regex, ParsePattern(pattern, path + ".pattern", file));
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string content, StringField(json, "content", path, file));
    std::string literal = pattern.contains("String") ? pattern["String"].get<std::string>() : "";
    return std::make_unique<ReplaceDecoder>(std::move(regex), std::move(literal), std::move(content));
  }
  if (type == "Strip") {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string content, StringField(json, "content", path, file, " "));
    ATTNSCOPE_ASSIGN_OR_RETURN(size_t start, CountField(json, "start", path, file));
    ATTNSCOPE_ASSIGN_OR_RETURN(size_t stop, CountField(json, "stop", path, file));
    return std::make_unique<StripDecoder>(std::move(content), start, stop);
  }
  if (type == "Metaspace") {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string replacement,
                               StringField(json, "replacement", path, file, "\xE2\x96\x81"));
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string scheme,
                               StringField(json, "prepend_scheme", path, file, "always"));
    ATTNSCOPE_ASSIGN_OR_RETURN(bool add, BoolField(json, "add_prefix_space", path, file, true));
    return std::make_unique<MetaspaceDecoder>(std::move(replacement), scheme != "never" && add);
  }
  if (type == "Sequence") {
    ATTNSCOPE_ASSIGN_OR_RETURN(const nlohmann::json* list, ArrayField(json, "decoders", path, file));
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      ATTNSCOPE_ASSIGN_OR_RETURN(
          auto part, ParseDecoder((*list)[i], absl::StrCat(path, ".decoders[", i, "]"), file));
      if (part != nullptr) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  return UnsupportedType(file, path, type);
}

}  // namespace attnscope::tokenizer
