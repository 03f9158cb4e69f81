#include "service/rpc/request_validation.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/chat_template/chat_template.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/engine/streaming_cache.h"

namespace attnscope::rpc {
namespace {

// Why a model has no tokenizer, for messages.
std::string NoTokenizerReason(const engine::ModelBundle& bundle) {
  if (bundle.tokenizer_status.ok() || absl::IsNotFound(bundle.tokenizer_status)) {
    return "no tokenizer.json, vocab.json + merges.txt or tokenizer.model";
  }
  return absl::StrCat("its tokenizer failed to load: ", bundle.tokenizer_status.message());
}

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status CheckTokenCount(int64_t tokens, const engine::ModelBundle& bundle,
                             const std::string& model_name, int64_t max_prompt_tokens,
                             bool limit_to_positions = true) {
  if (max_prompt_tokens > 0 && tokens > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt: ", tokens, " tokens is over the server's limit of ", max_prompt_tokens,
        " tokens (--max-prompt-tokens); shorten the prompt"));
  }
  const int64_t positions = bundle.config().max_positions;
  if (limit_to_positions && tokens > positions) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: ", tokens, " tokens is over the ",
                                                   positions, " positions of model '", model_name,
                                                   "'; shorten the prompt"));
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::Prompt> PromptFromText(const std::string& text,
                                              const engine::ModelBundle& bundle,
                                              const std::string& model_name,
                                              bool add_special_tokens) {
  if (text.empty()) {
    return absl::InvalidArgumentError("text: the prompt is empty; give at least one character");
  }
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
  if (bundle.tokenizer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("text: model '", model_name,
                                                   "' has no tokenizer (", NoTokenizerReason(bundle),
                                                   "); give the prompt as ids"));
  }
  return engine::PromptFromText(bundle, text, add_special_tokens);
}

absl::StatusOr<engine::Prompt> PromptFromChat(const v1::Conversation& chat,
                                              const engine::ModelBundle& bundle,
                                              const std::string& model_name) {
  if (chat.messages().empty()) {
    return absl::InvalidArgumentError("chat.messages: no messages; give at least one");
  }
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    if (m.role().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("chat.messages[", i, "].role is empty"));
    }
    messages.push_back({{"role", m.role()}, {"content", m.content()}});
  }
  if (bundle.tokenizer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("chat: model '", model_name,
                                                   "' has no tokenizer (", NoTokenizerReason(bundle),
                                                   "); give the prompt as ids"));
  }
  if (bundle.chat == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("chat: model '", model_name,
                                                   "' has no usable chat template: ",
                                                   bundle.chat_template_status.message()));
  }
  nlohmann::json kwargs = nlohmann::json::object();
  if (!chat.template_kwargs_json().empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(kwargs, chat_template::ParseTemplateKwargs(
                                           chat.template_kwargs_json(), "chat.template_kwargs_json"));
  }
  auto prompt = engine::PromptFromChat(bundle, messages, chat.add_generation_prompt(), kwargs);
  if (!prompt.ok()) return Prefixed(prompt.status(), "chat: ");
  return prompt;
}

// A layer or head list: every entry within [0, limit); empty means all.
// In model order, each once.
absl::StatusOr<std::vector<int64_t>> Selection(
    const google::protobuf::RepeatedField<int32_t>& list, int64_t limit, const char* field,
    const char* what, const std::string& model_name) {
  std::vector<bool> wanted(static_cast<size_t>(limit), list.empty());
  for (int i = 0; i < list.size(); ++i) {
    if (list[i] < 0 || list[i] >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options.", field, "[", i, "]: ", what, " ", list[i], " is outside [0, ", limit,
          ") of model '", model_name, "'"));
    }
    wanted[static_cast<size_t>(list[i])] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < limit; ++i) {
    if (wanted[static_cast<size_t>(i)]) out.push_back(i);
  }
  return out;
}

absl::Status PlanAttention(const v1::AnalyzeOptions& o, const model::ModelConfig& config,
                           const std::string& model_name, engine::TensorRequest* tensors) {
  if (!v1::TensorDtype_IsValid(o.attention_dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("options.attention_dtype: ", o.attention_dtype(),
                                                   " is not a TensorDtype; use "
                                                   "TENSOR_DTYPE_FLOAT32 or TENSOR_DTYPE_FLOAT16"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> layers,
                             Selection(o.attention_layers(), config.num_layers,
                                       "attention_layers", "layer", model_name));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> heads,
                             Selection(o.attention_heads(), config.num_heads, "attention_heads",
                                       "head", model_name));
  if (!o.return_attention()) return absl::OkStatus();
  tensors->attention.layers = std::move(layers);
  tensors->attention.heads = std::move(heads);
  tensors->attention_float16 = o.attention_dtype() == v1::TENSOR_DTYPE_FLOAT16;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<engine::Prompt> ResolvePrompt(const PromptInput& input,
                                             const engine::ModelBundle& bundle,
                                             const std::string& model_name,
                                             int64_t max_prompt_tokens) {
  if (input.text != nullptr) {
    ATTNSCOPE_ASSIGN_OR_RETURN(engine::Prompt prompt,
                               PromptFromText(*input.text, bundle, model_name,
                                              input.add_special_tokens));
    ATTNSCOPE_RETURN_IF_ERROR(CheckTokenCount(static_cast<int64_t>(prompt.ids.size()), bundle,
                                              model_name, max_prompt_tokens,
                                              input.limit_to_positions));
    return prompt;
  }
  if (input.chat != nullptr) {
    ATTNSCOPE_ASSIGN_OR_RETURN(engine::Prompt prompt, PromptFromChat(*input.chat, bundle, model_name));
    ATTNSCOPE_RETURN_IF_ERROR(CheckTokenCount(static_cast<int64_t>(prompt.ids.size()), bundle,
                                              model_name, max_prompt_tokens));
    return prompt;
  }
  if (input.ids == nullptr) {
    return absl::InvalidArgumentError(
        "prompt: none of text, ids or chat was given; set one of them");
  }
  if (input.ids->ids().empty()) {
    return absl::InvalidArgumentError("ids: no token ids given; give at least one");
  }
  // Count before building anything, so a huge id list costs nothing.
  ATTNSCOPE_RETURN_IF_ERROR(CheckTokenCount(input.ids->ids_size(), bundle, model_name,
                                            max_prompt_tokens, input.limit_to_positions));
  std::vector<int64_t> ids(input.ids->ids().begin(), input.ids->ids().end());
  auto prompt = engine::PromptFromIds(bundle, std::move(ids));
  if (!prompt.ok()) return Prefixed(prompt.status(), "ids: ");
  return prompt;
}

absl::StatusOr<engine::Prompt> TokenizePrompt(const PromptInput& input,
                                              const engine::ModelBundle& bundle,
                                              const std::string& model_name) {
  if (input.text != nullptr) {
    return PromptFromText(*input.text, bundle, model_name, input.add_special_tokens);
  }
  if (input.chat != nullptr) return PromptFromChat(*input.chat, bundle, model_name);
  return absl::InvalidArgumentError("prompt: neither text nor chat was given; set one of them");
}

absl::StatusOr<AnalyzePlan> PlanAnalysis(const v1::AnalyzeOptions& o,
                                         const engine::ModelBundle& bundle,
                                         const std::string& model_name,
                                         const AnalyzeLimits& limits) {
  AnalyzePlan plan;
  plan.max_attention_bytes = limits.max_attention_bytes;
  if (o.has_threshold()) {
    if (!std::isfinite(o.threshold()) || !(o.threshold() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options.threshold: ", o.threshold(),
          " is not a positive finite z-score; give e.g. 6.0 (the default)"));
    }
    plan.settings.threshold = o.threshold();
  }
  if (o.has_sink_epsilon()) {
    if (!(o.sink_epsilon() >= 0 && o.sink_epsilon() <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options.sink_epsilon: ", o.sink_epsilon(),
          " is not a share of attention in [0, 1]; give e.g. 0.3 (the default)"));
    }
    plan.settings.sink_epsilon = o.sink_epsilon();
  }
  if (!o.template_().empty()) {
    auto structure = analysis::ParseStructure(o.template_());
    if (!structure.ok()) return Prefixed(structure.status(), "options.template: ");
    plan.settings.structure = *structure;
  }
  if (o.query_block_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("options.query_block_size: ",
                                                   o.query_block_size(),
                                                   " must be >= 0 (0: whole layers)"));
  }
  plan.settings.query_block_size = o.query_block_size();
  plan.stream.hidden_state_norms = !o.has_hidden_state_norms() || o.hidden_state_norms();
  plan.stream.chunk_bytes = limits.chunk_bytes;
  plan.stream.tensors.hidden_states = o.return_hidden_states();
  plan.stream.tensors.logits = o.return_logits();
  ATTNSCOPE_RETURN_IF_ERROR(PlanAttention(o, bundle.config(), model_name, &plan.stream.tensors));
  ATTNSCOPE_ASSIGN_OR_RETURN(plan.settings.precision,
                             PrecisionOf(o.precision(), "options.precision",
                                         limits.default_precision));
  return plan;
}

absl::Status CheckAttentionBytes(const StreamOptions& stream, int64_t num_tokens,
                                 int64_t max_bytes) {
  const engine::HeadSelection& attention = stream.tensors.attention;
  const auto layers = static_cast<int64_t>(attention.layers.size());
  const auto heads = static_cast<int64_t>(attention.heads.size());
  const int64_t element = stream.tensors.attention_float16 ? 2 : 4;
  // In double: 1e6 tokens squared times a few hundred heads overflows int64.
  const double bytes = static_cast<double>(layers) * static_cast<double>(heads) *
                       static_cast<double>(num_tokens) * static_cast<double>(num_tokens) *
                       static_cast<double>(element);
  if (max_bytes <= 0 || bytes <= static_cast<double>(max_bytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "options.return_attention: ", layers, " layers x ", heads, " heads x ", num_tokens, "^2 x ",
      element, " bytes = ", static_cast<int64_t>(bytes),
      " bytes is over the server's limit of ", max_bytes,
      " attention bytes per response (--max-attention-bytes); select fewer "
      "options.attention_layers or options.attention_heads, use TENSOR_DTYPE_FLOAT16, or send a "
      "shorter prompt"));
}

absl::Status CheckNewTokenLimit(int64_t max_new_tokens, int64_t limit) {
  if (limit <= 0 || max_new_tokens <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "max_new_tokens: ", max_new_tokens, " is over the server's limit of ", limit,
      " generated tokens (--max-new-tokens); ask for at most ", limit));
}

absl::Status CheckMessageSize(size_t bytes, int64_t max_bytes) {
  if (static_cast<int64_t>(bytes) <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "request: ", bytes, " bytes is over the server's limit of ", max_bytes,
      " bytes per request message (--max-message-bytes); send a shorter prompt"));
}

absl::StatusOr<model::Precision> PrecisionOf(const std::string& value, const std::string& field,
                                             model::Precision fallback) {
  if (value.empty()) return fallback;
  absl::StatusOr<model::Precision> precision = model::ParsePrecision(value);
  if (!precision.ok()) return Prefixed(precision.status(), field + ": ");
  return *precision;
}

engine::GenerationSettings GenerationSettingsOf(const v1::GenerateRequest& r) {
  engine::GenerationSettings s;
  s.max_new_tokens = r.max_new_tokens();
  s.sampling.temperature = r.sampling().temperature();
  s.sampling.top_k = r.sampling().top_k();
  s.sampling.top_p = r.sampling().top_p();
  s.sampling.seed = r.sampling().seed();
  s.num_alternatives = r.has_num_alternatives() ? r.num_alternatives() : 5;
  s.layer_sink_scores = r.layer_sink_scores();
  s.stop_at_eos = !r.has_stop_at_eos() || r.stop_at_eos();
  return s;
}

absl::Status ApplyCachePolicy(const v1::GenerateRequest& r, engine::GenerationSettings& s) {
  if (!r.cache_policy().empty()) {
    absl::StatusOr<engine::EvictionPolicy> p = engine::ParseEvictionPolicy(r.cache_policy());
    if (!p.ok()) return Prefixed(p.status(), "cache_policy: ");
    s.cache_policy = *p;
  }
  if (!r.cache_positions().empty()) {
    absl::StatusOr<model::CachePositions> p = engine::ParseCachePositions(r.cache_positions());
    if (!p.ok()) return Prefixed(p.status(), "cache_");
    s.cache_positions = *p;
  }
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
