#include "service/engine/prompt.h"

#include "absl/strings/str_cat.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"

namespace attnscope::engine {
namespace {

// Token strings, bytes and special flags from the tokenizer, or "#id"
// placeholders when the model has none.
absl::Status DescribeTokens(const ModelBundle& bundle, Prompt& p) {
  for (int64_t id : p.ids) {
    if (bundle.tokenizer == nullptr) {
      p.tokens.push_back(absl::StrCat("#", id));
      p.token_bytes.push_back(absl::StrCat("#", id));
      p.special.push_back(false);
      continue;
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string token, bundle.tokenizer->TokenString(id));
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string bytes, bundle.tokenizer->TokenBytes(id));
    p.tokens.push_back(std::move(token));
    p.token_bytes.push_back(std::move(bytes));
    p.special.push_back(bundle.tokenizer->IsSpecial(id));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Prompt::Display(size_t i) const { return analysis::ReadableBytes(token_bytes.at(i)); }

absl::StatusOr<Prompt> PromptFromText(const ModelBundle& bundle, std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("the prompt text is empty");
  if (bundle.tokenizer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        bundle.directory, " has no tokenizer (vocab.json + merges.txt): give token ids instead"));
  }
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "prompt text"));
  ATTNSCOPE_ASSIGN_OR_RETURN(tokenizer::Encoding enc, bundle.tokenizer->Encode(text));
  Prompt p;
  p.text = std::string(text);
  p.ids = std::move(enc.ids);
  p.offsets = std::move(enc.offsets);
  ATTNSCOPE_RETURN_IF_ERROR(DescribeTokens(bundle, p));
  return p;
}

absl::StatusOr<Prompt> PromptFromIds(const ModelBundle& bundle, std::vector<int64_t> ids) {
  if (ids.empty()) return absl::InvalidArgumentError("the prompt has no token ids");
  const int64_t vocab = bundle.config().vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
    if (bundle.tokenizer != nullptr && ids[i] >= bundle.tokenizer->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", ids[i], " at position ", i, " is outside the tokenizer's vocabulary [0, ",
          bundle.tokenizer->vocab_size(), ")"));
    }
  }
  Prompt p;
  p.ids = std::move(ids);
  ATTNSCOPE_RETURN_IF_ERROR(DescribeTokens(bundle, p));
  for (const std::string& bytes : p.token_bytes) {
    const int64_t begin = p.text.size();
    p.text += bytes;
    p.offsets.emplace_back(begin, static_cast<int64_t>(p.text.size()));
  }
  return p;
}

}  // namespace attnscope::engine
