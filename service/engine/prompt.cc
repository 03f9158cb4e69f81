#include "service/engine/prompt.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/engine/tensor_pieces.h"

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

std::string NoTokenizer(const ModelBundle& bundle) {
  if (bundle.tokenizer_status.ok() || absl::IsNotFound(bundle.tokenizer_status)) {
    return absl::StrCat(bundle.directory,
                        " has no tokenizer (tokenizer.json, vocab.json + merges.txt or "
                        "tokenizer.model): give token ids instead");
  }
  return absl::StrCat("the tokenizer of ", bundle.directory, " failed to load (",
                      bundle.tokenizer_status.message(), "): give token ids instead");
}

absl::StatusOr<Prompt> PromptFromChat(const ModelBundle& bundle, const nlohmann::json& messages,
                                      bool add_generation_prompt, const nlohmann::json& variables) {
  if (bundle.tokenizer == nullptr) return absl::InvalidArgumentError(NoTokenizer(bundle));
  if (bundle.chat == nullptr) {
    return absl::InvalidArgumentError(std::string(bundle.chat_template_status.message()));
  }
  nlohmann::json vars = bundle.chat->variables;
  if (variables.is_object()) {
    for (const auto& [key, value] : variables.items()) vars[key] = value;
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(
      chat_template::RenderedChat rendered,
      bundle.chat->chat_template.Render(messages, add_generation_prompt, vars));
  if (rendered.text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(bundle.chat->chat_template.origin(),
                                                   ": the chat template rendered no text"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(Prompt p, PromptFromText(bundle, rendered.text, false));
  p.from_chat = true;
  p.from_template.assign(p.ids.size(), false);
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const auto [begin, end] = p.offsets[i];
    bool all_template = true;
    for (int64_t k = begin; k < end && all_template; ++k) all_template = !rendered.content[k];
    p.from_template[i] = all_template;
  }
  return p;
}

std::string Prompt::Display(size_t i) const { return analysis::ReadableBytes(token_bytes.at(i)); }

absl::StatusOr<Prompt> PromptFromText(const ModelBundle& bundle, std::string_view text,
                                      bool add_special_tokens) {
  if (text.empty()) return absl::InvalidArgumentError("the prompt text is empty");
  if (bundle.tokenizer == nullptr) return absl::FailedPreconditionError(NoTokenizer(bundle));
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "prompt text"));
  ATTNSCOPE_ASSIGN_OR_RETURN(tokenizer::Encoding enc, bundle.tokenizer->Encode(text));
  if (add_special_tokens) enc = bundle.tokenizer->AddSpecialTokens(std::move(enc));
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

absl::StatusOr<std::vector<int64_t>> ParsePromptPositions(const std::string& text,
                                                          const std::string& flag,
                                                          int64_t tokens, bool all_as_empty) {
  if (text == "last") return std::vector<int64_t>{tokens - 1};
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> out, engine::ParseIndexList(text, flag));
  if (out.empty() && !all_as_empty) {  // "all"
    for (int64_t i = 0; i < tokens; ++i) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (!out.empty() && out.back() >= tokens) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", out.back(),
                                                   " is outside the prompt: its ", tokens,
                                                   " tokens are at 0..", tokens - 1));
  }
  return out;
}

absl::StatusOr<int64_t> SingleTokenId(const engine::ModelBundle& bundle, const std::string& flag,
                                      const std::string& text, const std::string& instead) {
  if (bundle.tokenizer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " needs the model's tokenizer, which this model directory lacks; use ", instead));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(const tokenizer::Encoding e, bundle.tokenizer->Encode(text));
  if (e.ids.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", text, "\" is ", e.ids.size(), " tokens (", absl::StrJoin(e.ids, ","),
        "), not one; give a single token (mind the leading space) or ", instead));
  }
  return e.ids[0];
}

}  // namespace attnscope::engine
