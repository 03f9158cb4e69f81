#include "service/tokenizer/hf_pretokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/tokenizer/byte_level.h"
#include "service/tokenizer/hf_json.h"
#include "service/tokenizer/hf_normalizer.h"
#include "service/tokenizer/regex.h"

namespace attnscope::tokenizer {
namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Splits every piece at the matches of `regex`.
absl::Status SplitPieces(const Regex& regex, SplitBehavior behavior, bool invert,
                         std::vector<Piece>& pieces) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& piece : pieces) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Spans matches, regex.FindAll(piece.text));
    const Spans spans = SplitSpans(piece.text.size(), matches, behavior, invert);
    if (spans.size() == 1 && spans[0].first == 0 && spans[0].second == piece.text.size()) {
      out.push_back(std::move(piece));
      continue;
    }
    for (const auto& [begin, end] : spans) out.push_back(piece.Sub(begin, end));
  }
  pieces = std::move(out);
  return absl::OkStatus();
}

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}

  absl::Status Split(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (p.text.empty() || p.text[0] == ' ') continue;
        p.text.insert(0, " ");
        p.align.insert(p.align.begin(), p.align.front());
      }
    }
    if (regex_ != nullptr) {
      ATTNSCOPE_RETURN_IF_ERROR(SplitPieces(*regex_, SplitBehavior::kIsolated, false, pieces));
    }
    for (Piece& p : pieces) {
      Piece mapped;
      mapped.origin = p.origin;
      mapped.text.reserve(p.text.size() * 2);
      for (size_t i = 0; i < p.text.size(); ++i) {
        const std::string symbol = ByteSymbolUtf8(static_cast<uint8_t>(p.text[i]));
        mapped.text += symbol;
        mapped.align.insert(mapped.align.end(), symbol.size(), p.align[i]);
      }
      p = std::move(mapped);
    }
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // nullptr with use_regex false
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  absl::Status Split(std::vector<Piece>& pieces) const override {
    return SplitPieces(*regex_, behavior_, invert_, pieces);
  }

 private:
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split,
                        std::unique_ptr<Regex> space, std::unique_ptr<Regex> marker)
      : replacement_(std::move(replacement)),
        prepend_(prepend),
        split_(split),
        space_(std::move(space)),
        marker_(std::move(marker)) {}

  absl::Status Split(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      ATTNSCOPE_RETURN_IF_ERROR(ReplaceAll(*space_, replacement_, p));
      const bool wants = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.origin == 0);
      if (wants && !p.text.empty() && p.text.compare(0, replacement_.size(), replacement_) != 0) {
        p.text.insert(0, replacement_);
        p.align.insert(p.align.begin(), replacement_.size(), p.align.front());
      }
    }
    if (split_) return SplitPieces(*marker_, SplitBehavior::kMergedWithNext, false, pieces);
    return absl::OkStatus();
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  std::unique_ptr<Regex> space_;
  std::unique_ptr<Regex> marker_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  absl::Status Split(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) ATTNSCOPE_RETURN_IF_ERROR(p->Split(pieces));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

absl::StatusOr<SplitBehavior> ParseBehavior(const nlohmann::json& json, const std::string& path,
                                            const std::string& file) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string name, StringField(json, "behavior", path, file, "Isolated"));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Malformed(file, path + ".behavior", absl::StrCat("unknown value \"", name, "\""));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> RegexSplit(const std::string& pattern,
                                                         SplitBehavior behavior, bool invert,
                                                         const std::string& where) {
  ATTNSCOPE_ASSIGN_OR_RETURN(auto regex, Regex::Compile(pattern, where));
  return std::make_unique<SplitPreTokenizer>(std::move(regex), behavior, invert);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParseMetaspace(const nlohmann::json& json,
                                                             const std::string& path,
                                                             const std::string& file) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string replacement,
                             StringField(json, "replacement", path, file, "\xE2\x96\x81"));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string scheme,
                             StringField(json, "prepend_scheme", path, file, ""));
  ATTNSCOPE_ASSIGN_OR_RETURN(bool split, BoolField(json, "split", path, file, true));
  MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::kAlways;
  if (scheme.empty()) {
    // Older files: add_prefix_space (default true) instead of a scheme.
    ATTNSCOPE_ASSIGN_OR_RETURN(bool add, BoolField(json, "add_prefix_space", path, file, true));
    if (!add) prepend = MetaspacePreTokenizer::Prepend::kNever;
  } else if (scheme == "first") {
    prepend = MetaspacePreTokenizer::Prepend::kFirst;
  } else if (scheme == "never") {
    prepend = MetaspacePreTokenizer::Prepend::kNever;
  } else if (scheme != "always") {
    return Malformed(file, path + ".prepend_scheme", absl::StrCat("unknown value \"", scheme, "\""));
  }
  const std::string where = absl::StrCat(file, ": ", path);
  ATTNSCOPE_ASSIGN_OR_RETURN(auto space, Regex::Literal(" ", where));
  ATTNSCOPE_ASSIGN_OR_RETURN(auto marker, Regex::Literal(replacement, where));
  return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), prepend, split,
                                                 std::move(space), std::move(marker));
}

}  // namespace

Spans SplitSpans(size_t length, const Spans& matches, SplitBehavior behavior, bool invert) {
  // Every span of the text, flagged as a match or not.
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> all;
  size_t prev = 0;
  for (const auto& m : matches) {
    if (m.first > prev) all.push_back({{prev, m.first}, invert});
    all.push_back({m, !invert});
    prev = m.second;
  }
  if (prev < length) all.push_back({{prev, length}, invert});
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> kept;  // bool: remove
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      kept = all;
      break;
    case SplitBehavior::kIsolated:
      for (const auto& a : all) kept.push_back({a.first, false});
      break;
    case SplitBehavior::kContiguous:
      for (const auto& [span, is_match] : all) {
        if (is_match == previous_match && !kept.empty()) {
          kept.back().first.second = span.second;
        } else {
          kept.push_back({span, false});
        }
        previous_match = is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& [span, is_match] : all) {
        if (is_match && !previous_match && !kept.empty()) {
          kept.back().first.second = span.second;
        } else {
          kept.push_back({span, false});
        }
        previous_match = is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        if (it->second && !previous_match && !kept.empty()) {
          kept.back().first.first = it->first.first;
        } else {
          kept.push_back({it->first, false});
        }
        previous_match = it->second;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  Spans out;
  for (const auto& [span, remove] : kept) {
    if (!remove && span.second > span.first) out.push_back(span);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& json,
                                                                const std::string& path,
                                                                const std::string& file) {
  if (json.is_null()) return nullptr;
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, path, file));
  const std::string where = absl::StrCat(file, ": ", path);
  if (type == "ByteLevel") {
    ATTNSCOPE_ASSIGN_OR_RETURN(bool prefix, BoolField(json, "add_prefix_space", path, file, true));
    ATTNSCOPE_ASSIGN_OR_RETURN(bool use_regex, BoolField(json, "use_regex", path, file, true));
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      ATTNSCOPE_ASSIGN_OR_RETURN(regex, Regex::Compile(kGpt2Pattern, where));
    }
    return std::make_unique<ByteLevelPreTokenizer>(prefix, std::move(regex));
  }
  if (type == "Split") {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        auto regex, ParsePattern(json.value("pattern", nlohmann::json()), path + ".pattern", file));
    ATTNSCOPE_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(json, path, file));
    ATTNSCOPE_ASSIGN_OR_RETURN(bool invert, BoolField(json, "invert", path, file, false));
    return std::make_unique<SplitPreTokenizer>(std::move(regex), behavior, invert);
  }
  if (type == "Metaspace") return ParseMetaspace(json, path, file);
  if (type == "Sequence") {
    ATTNSCOPE_ASSIGN_OR_RETURN(const nlohmann::json* list,
                               ArrayField(json, "pretokenizers", path, file));
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      ATTNSCOPE_ASSIGN_OR_RETURN(
          auto part,
          ParsePreTokenizer((*list)[i], absl::StrCat(path, ".pretokenizers[", i, "]"), file));
      if (part != nullptr) parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Whitespace") {
    return RegexSplit(R"(\w+|[^\w\s]+)", SplitBehavior::kIsolated, false, where);
  }
  if (type == "WhitespaceSplit") return RegexSplit(R"(\s+)", SplitBehavior::kRemoved, false, where);
  if (type == "Digits") {
    ATTNSCOPE_ASSIGN_OR_RETURN(bool single, BoolField(json, "individual_digits", path, file, false));
    return RegexSplit(R"(\p{N})",
                      single ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, where);
  }
  if (type == "Punctuation") {
    ATTNSCOPE_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(json, path, file));
    return RegexSplit(R"([\p{P}$+<=>^`|~])", behavior, false, where);
  }
  return UnsupportedType(file, path, type);
}

}  // namespace attnscope::tokenizer
