// Checks and translates the fields of Analyze and Generate requests. Every
// error is InvalidArgument (NotFound for models, from ModelRegistry) with a
// message that names the field, the value and the limit, and says what to do.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/engine/analysis_run.h"
#include "service/engine/generation.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"
#include "service/rpc/layer_streamer.h"

namespace attnscope::rpc {

// The `prompt` oneof of a request, whatever its message type.
struct PromptInput {
  const std::string* text = nullptr;                // set for text prompts
  const attnscope::v1::TokenIds* ids = nullptr;     // set for id prompts
  const attnscope::v1::Conversation* chat = nullptr;  // set for conversations
  bool add_special_tokens = true;                   // text prompts
  // False: the prompt may be longer than the model's positions (a text read
  // through a bounded KV cache); the server's max_prompt_tokens still holds.
  bool limit_to_positions = true;
};

template <typename Request>
PromptInput PromptOf(const Request& request) {
  PromptInput in;
  if (request.prompt_case() == Request::kText) in.text = &request.text();
  if (request.prompt_case() == Request::kIds) in.ids = &request.ids();
  if (request.prompt_case() == Request::kChat) in.chat = &request.chat();
  if (request.has_add_special_tokens()) in.add_special_tokens = request.add_special_tokens();
  return in;
}

// A Tokenize request has no ids.
inline PromptInput PromptOf(const attnscope::v1::TokenizeRequest& request) {
  PromptInput in;
  if (request.prompt_case() == attnscope::v1::TokenizeRequest::kText) in.text = &request.text();
  if (request.prompt_case() == attnscope::v1::TokenizeRequest::kChat) in.chat = &request.chat();
  if (request.has_add_special_tokens()) in.add_special_tokens = request.add_special_tokens();
  return in;
}

// The prompt checked and resolved against the model `model_name`: exactly one
// of text (non-empty, valid UTF-8, the model has a tokenizer), ids
// (non-empty, within the vocabulary) or chat (at least one message, each
// with a role; the model has a tokenizer and a chat template that renders
// it; errors name the message or the template line); then at most max_prompt_tokens tokens
// (0: no server limit) and at most the model's max_positions.
absl::StatusOr<engine::Prompt> ResolvePrompt(const PromptInput& input,
                                             const engine::ModelBundle& bundle,
                                             const std::string& model_name,
                                             int64_t max_prompt_tokens);

// The text or chat of `input` through the model's tokenizer (and chat
// template), checked as ResolvePrompt does but with no limit on the token
// count (nothing runs the model). InvalidArgument for ids or no prompt.
absl::StatusOr<engine::Prompt> TokenizePrompt(const PromptInput& input,
                                              const engine::ModelBundle& bundle,
                                              const std::string& model_name);

// The server's settings an Analyze request is planned against.
struct AnalyzeLimits {
  int64_t chunk_bytes = 1 << 20;  // TensorChunk data size
  model::Precision default_precision = model::Precision::kFloat32;  // --precision
  int64_t max_attention_bytes = 0;  // raw attention per response; 0: no limit
};

// The raw attention bytes `stream` asks for on a prompt of `num_tokens`
// tokens: selected layers x selected heads x T x T x the dtype's size (0
// when no attention is requested). InvalidArgument naming the limit, the
// flag --max-attention-bytes and how to ask for less when over
// `max_bytes` (0: no limit).
absl::Status CheckAttentionBytes(const StreamOptions& stream, int64_t num_tokens,
                                 int64_t max_bytes);

// Everything an Analyze request asks for, checked and resolved in one place:
// threshold (finite), sink_epsilon (in [0, 1]), template, query_block_size
// (>= 0), precision (the server's default when unset), attention layers and
// heads (within the model), the attention dtype, and the limit its prompt
// must then meet.
struct AnalyzePlan {
  engine::AnalysisSettings settings;
  StreamOptions stream;
  int64_t max_attention_bytes = 0;

  // What is left to check once the prompt is tokenized: the attention bytes
  // of `num_tokens` (CheckAttentionBytes).
  absl::Status CheckPromptLength(int64_t num_tokens) const {
    return CheckAttentionBytes(stream, num_tokens, max_attention_bytes);
  }
};
absl::StatusOr<AnalyzePlan> PlanAnalysis(const attnscope::v1::AnalyzeOptions& options,
                                         const engine::ModelBundle& bundle,
                                         const std::string& model_name,
                                         const AnalyzeLimits& limits);

// InvalidArgument naming max_new_tokens, the value, the limit and
// --max-new-tokens when `max_new_tokens` is over `limit` (0: no limit).
absl::Status CheckNewTokenLimit(int64_t max_new_tokens, int64_t limit);

// ResourceExhausted naming the size, the limit and --max-message-bytes
// when a request's serialized size is over `max_bytes`.
absl::Status CheckMessageSize(size_t bytes, int64_t max_bytes);

// The precision a request's `field` ("options.precision", "precision")
// names: `fallback` (the server's --precision) when empty; InvalidArgument
// naming the field, the value and the accepted ones otherwise.
absl::StatusOr<model::Precision> PrecisionOf(const std::string& value, const std::string& field,
                                             model::Precision fallback);

// The generation settings of a request (num_alternatives unset: 5,
// stop_at_eos unset: true). Range checks are engine::ValidateGenerationSettings'.
engine::GenerationSettings GenerationSettingsOf(const attnscope::v1::GenerateRequest& request);

// cache_policy and cache_positions of a Generate request into `settings`:
// InvalidArgument naming the field for a malformed policy or positions value
// (the model-dependent checks are engine::ValidateGenerationSettings').
absl::Status ApplyCachePolicy(const attnscope::v1::GenerateRequest& request,
                              engine::GenerationSettings& settings);

}  // namespace attnscope::rpc
