// A prompt resolved against a model: ids, and for each token its vocabulary
// string, its raw bytes, its byte span in the text and whether it is special.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/model_bundle.h"

namespace attnscope::engine {

struct Prompt {
  std::string text;  // as given, or decoded from the ids
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;  // Hugging Face token strings ("ĠThe"), or "#<id>"
  std::vector<std::string> token_bytes;  // the bytes each token stands for
  std::vector<std::pair<int64_t, int64_t>> offsets;  // byte span in `text`
  std::vector<bool> special;

  // What a person should see for token i: its bytes, with bytes that are not
  // part of valid UTF-8 (a byte-level fragment of a character) as <0xNN>.
  std::string Display(size_t i) const;
};

// Tokenizes `text`. InvalidArgument if the text is empty or not valid UTF-8,
// FailedPrecondition if the model directory has no tokenizer.
absl::StatusOr<Prompt> PromptFromText(const ModelBundle& bundle, std::string_view text);

// Takes ids as given. InvalidArgument for no ids or an id outside the
// model's vocabulary (the message names the position, the id and the limit).
absl::StatusOr<Prompt> PromptFromIds(const ModelBundle& bundle, std::vector<int64_t> ids);

}  // namespace attnscope::engine
