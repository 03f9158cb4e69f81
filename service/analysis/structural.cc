#include "service/analysis/structural.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace attnscope::analysis {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
// A role name longer than this is not a role name but a malformed template.
constexpr size_t kMaxRoleTokens = 8;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool IsNewlineToken(const std::string& bytes) {
  return !bytes.empty() && std::all_of(bytes.begin(), bytes.end(), IsSpace) &&
         bytes.find('\n') != std::string::npos;
}

bool IsRoleToken(const std::string& bytes) {
  return !bytes.empty() && std::none_of(bytes.begin(), bytes.end(), IsSpace);
}

// The concatenated bytes of the tokens and the end offset of each token.
struct Layout {
  std::string text;
  std::vector<size_t> ends;
};

Layout MakeLayout(const std::vector<std::string>& token_bytes) {
  Layout layout;
  layout.ends.reserve(token_bytes.size());
  for (const std::string& bytes : token_bytes) {
    layout.text += bytes;
    layout.ends.push_back(layout.text.size());
  }
  return layout;
}

// Marks every token overlapping an occurrence of `marker` in in_marker and
// returns the index of the last overlapping token of each occurrence.
std::vector<size_t> MarkOccurrences(const Layout& layout, std::string_view marker,
                                    std::vector<bool>* in_marker) {
  std::vector<size_t> last_tokens;
  for (size_t p = layout.text.find(marker); p != std::string::npos;
       p = layout.text.find(marker, p + marker.size())) {
    const size_t q = p + marker.size();
    // First token ending after p: tokens are contiguous, so it starts <= p.
    auto it = std::upper_bound(layout.ends.begin(), layout.ends.end(), p);
    size_t k = static_cast<size_t>(it - layout.ends.begin());
    size_t last = k;
    for (; k < layout.ends.size(); ++k) {
      const size_t begin = k == 0 ? 0 : layout.ends[k - 1];
      if (begin >= q) break;
      if (layout.ends[k] > begin) {
        (*in_marker)[k] = true;
        last = k;
      }
    }
    last_tokens.push_back(last);
  }
  return last_tokens;
}

void MarkChatml(const std::vector<std::string>& token_bytes, std::vector<bool>* structural) {
  const Layout layout = MakeLayout(token_bytes);
  const size_t t = token_bytes.size();
  std::vector<bool> in_marker(t, false);
  const std::vector<size_t> starts = MarkOccurrences(layout, kImStart, &in_marker);
  const std::vector<size_t> ends = MarkOccurrences(layout, kImEnd, &in_marker);
  for (size_t k = 0; k < t; ++k) {
    if (in_marker[k]) (*structural)[k] = true;
  }
  for (size_t last : starts) {
    size_t k = last + 1;
    for (size_t n = 0; n < kMaxRoleTokens && k < t && !in_marker[k] &&
                       IsRoleToken(token_bytes[k]);
         ++n, ++k) {
      (*structural)[k] = true;
    }
    if (k < t && !in_marker[k] && IsNewlineToken(token_bytes[k])) (*structural)[k] = true;
  }
  for (size_t last : ends) {
    const size_t k = last + 1;
    if (k < t && !in_marker[k] && IsNewlineToken(token_bytes[k])) (*structural)[k] = true;
  }
}

}  // namespace

absl::StatusOr<Structure> ParseStructure(std::string_view name) {
  if (name == "none") return Structure::kNone;
  if (name == "chatml") return Structure::kChatml;
  if (name == "auto") return Structure::kAuto;
  if (name == "chat") return Structure::kChat;
  return absl::InvalidArgumentError(absl::StrCat("template: unknown value \"", std::string(name),
                                                 "\"; expected none, chatml, auto or chat"));
}

std::string_view StructureName(Structure t) {
  switch (t) {
    case Structure::kNone:
      return "none";
    case Structure::kChatml:
      return "chatml";
    case Structure::kAuto:
      return "auto";
    case Structure::kChat:
      return "chat";
  }
  return "none";
}

Structure ResolveStructure(const std::vector<std::string>& token_bytes, Structure t, bool is_chat) {
  if (t != Structure::kAuto) return t;
  if (is_chat) return Structure::kChat;
  return MakeLayout(token_bytes).text.find(kImStart) != std::string::npos ? Structure::kChatml
                                                                         : Structure::kNone;
}

std::vector<int64_t> StructuralPositions(const std::vector<std::string>& token_bytes,
                                         const std::vector<bool>& is_special, Structure t,
                                         const std::vector<bool>& from_template) {
  const size_t num_tokens = token_bytes.size();
  std::vector<bool> structural(num_tokens, false);
  if (num_tokens > 0) structural[0] = true;
  for (size_t i = 0; i < num_tokens && i < is_special.size(); ++i) {
    if (is_special[i]) structural[i] = true;
  }
  const Structure resolved = ResolveStructure(token_bytes, t, !from_template.empty());
  if (resolved == Structure::kChatml) MarkChatml(token_bytes, &structural);
  if (resolved == Structure::kChat) {
    for (size_t i = 0; i < num_tokens && i < from_template.size(); ++i) {
      if (from_template[i]) structural[i] = true;
    }
  }
  std::vector<int64_t> positions;
  for (size_t i = 0; i < num_tokens; ++i) {
    if (structural[i]) positions.push_back(static_cast<int64_t>(i));
  }
  return positions;
}

}  // namespace attnscope::analysis
