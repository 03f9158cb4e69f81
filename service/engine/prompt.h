// A prompt resolved against a model: ids, and for each token its vocabulary
// string, its raw bytes, its byte span in the text and whether it is special.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/engine/model_bundle.h"

namespace attnscope::engine {

struct Prompt {
  std::string text;  // as given, or decoded from the ids
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;  // Hugging Face token strings ("ĠThe"), or "#<id>"
  std::vector<std::string> token_bytes;  // the bytes each token stands for
  std::vector<std::pair<int64_t, int64_t>> offsets;  // byte span in `text`
  std::vector<bool> special;
  // Prompts rendered from a conversation (PromptFromChat): from_template[i]
  // is true when every byte of token i came from the chat template (role
  // markers, role names, separators), none from a message's content. Empty
  // for other prompts.
  std::vector<bool> from_template;
  bool from_chat = false;

  // What a person should see for token i: its bytes, with bytes that are not
  // part of valid UTF-8 (a byte-level fragment of a character) as <0xNN>.
  std::string Display(size_t i) const;
};

// Tokenizes `text`; with add_special_tokens, adds what the tokenizer's
// post-processor adds (Hugging Face's default: Llama's BOS, nothing for
// GPT-2). InvalidArgument if the text is empty or not valid UTF-8,
// FailedPrecondition if the model directory has no (loadable) tokenizer,
// naming the reason.
absl::StatusOr<Prompt> PromptFromText(const ModelBundle& bundle, std::string_view text,
                                      bool add_special_tokens = true);

// Renders `messages` ([{"role","content"}, ...]) with the model's chat
// template as Hugging Face's apply_chat_template does (with
// add_generation_prompt and the special-token variables, plus `variables`
// such as enable_thinking), then tokenizes the text without adding special
// tokens (the template writes them). InvalidArgument naming the model
// directory when it has no tokenizer or no chat template, or the template's
// or the messages' error.
absl::StatusOr<Prompt> PromptFromChat(const ModelBundle& bundle, const nlohmann::json& messages,
                                      bool add_generation_prompt,
                                      const nlohmann::json& variables = nlohmann::json::object());

// Why `bundle` has no tokenizer, and what to do instead (for messages).
std::string NoTokenizer(const ModelBundle& bundle);

// Takes ids as given. InvalidArgument for no ids or an id outside the
// model's vocabulary (the message names the position, the id and the limit).
absl::StatusOr<Prompt> PromptFromIds(const ModelBundle& bundle, std::vector<int64_t> ids);

// Positions of a prompt of `tokens` tokens: "last", "all" (every
// position) or a list of indices and ranges ("0,5,10-13"), sorted, without
// repeats. InvalidArgument naming `flag` for bad syntax or a position
// outside the prompt (`flag`: a CLI flag or a request field).
// `all_as_empty`: "all" gives the empty list (for
// callers to whom empty means every position).
absl::StatusOr<std::vector<int64_t>> ParsePromptPositions(const std::string& text,
                                                          const std::string& flag,
                                                          int64_t tokens,
                                                          bool all_as_empty = false);

// The one token id `text` encodes to with the model's tokenizer (no special
// tokens), for a flag such as --target or a request's target field. InvalidArgument naming `flag`, the
// ids and `instead` (the flag to use for ids) when it is not exactly one
// token; FailedPrecondition without a tokenizer.
absl::StatusOr<int64_t> SingleTokenId(const ModelBundle& bundle, const std::string& flag,
                                      const std::string& text, const std::string& instead);

}  // namespace attnscope::engine
