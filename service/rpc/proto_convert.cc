#include "service/rpc/proto_convert.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace attnscope::rpc {
namespace {

template <typename T>
std::vector<T> ToVector(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

template <typename T, typename Field>
void Assign(const std::vector<T>& values, Field* field) {
  field->Assign(values.begin(), values.end());
}

absl::Status CheckSize(const char* what, int64_t size, int64_t expected) {
  if (size == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("analysis stream: ", what, " has ", size,
                                                 " values, expected ", expected));
}

// Copies one per-head list of every layer into grid[l][h], checking that each
// layer has `heads` values.
absl::Status FillGrid(const std::vector<v1::LayerStats>& layers, int64_t heads, const char* name,
                      const google::protobuf::RepeatedField<double>& (v1::LayerStats::*list)()
                          const,
                      analysis::HeadGrid* grid) {
  grid->clear();
  for (const v1::LayerStats& layer : layers) {
    const auto& values = (layer.*list)();
    ATTNSCOPE_RETURN_IF_ERROR(
        CheckSize(absl::StrCat("layer ", layer.layer(), " ", name).c_str(), values.size(), heads));
    grid->push_back(ToVector(values));
  }
  return absl::OkStatus();
}

absl::Status FillHeadGrids(const std::vector<v1::LayerStats>& layers, int64_t heads,
                           analysis::PromptStats* s) {
  ATTNSCOPE_RETURN_IF_ERROR(
      FillGrid(layers, heads, "sink_score", &v1::LayerStats::sink_score, &s->sink_score));
  ATTNSCOPE_RETURN_IF_ERROR(FillGrid(layers, heads, "first_token_mass",
                                     &v1::LayerStats::first_token_mass, &s->first_token_mass));
  ATTNSCOPE_RETURN_IF_ERROR(FillGrid(layers, heads, "first_token_importance",
                                     &v1::LayerStats::first_token_importance,
                                     &s->first_token_importance));
  ATTNSCOPE_RETURN_IF_ERROR(FillGrid(layers, heads, "attention_entropy",
                                     &v1::LayerStats::attention_entropy,
                                     &s->attention_entropy));
  ATTNSCOPE_RETURN_IF_ERROR(FillGrid(layers, heads, "prev_token_score",
                                     &v1::LayerStats::prev_token_score, &s->prev_token_score));
  if (layers.front().value_weighted_first_token_share_size() == 0) return absl::OkStatus();
  ATTNSCOPE_RETURN_IF_ERROR(FillGrid(layers, heads, "value_weighted_first_token_share_raw",
                                     &v1::LayerStats::value_weighted_first_token_share_raw,
                                     &s->value_weighted_raw));
  return FillGrid(layers, heads, "value_weighted_first_token_share",
                  &v1::LayerStats::value_weighted_first_token_share,
                  &s->value_weighted_normalized);
}

absl::Status FillTokenStats(const std::vector<v1::LayerStats>& layers, const v1::Summary& sum,
                            analysis::PromptStats* s) {
  const int64_t t = s->num_tokens;
  ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary z", sum.z_size(), t));
  ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary max_norm", sum.max_norm_size(), t));
  ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary embedding_norms", sum.embedding_norms_size(), t));
  ATTNSCOPE_RETURN_IF_ERROR(
      CheckSize("summary next_token_entropy_nats", sum.next_token_entropy_nats_size(), t));
  ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary next_token_entropy_normalized",
                                      sum.next_token_entropy_normalized_size(), t));
  s->token_norms = {ToVector(sum.embedding_norms())};
  for (const v1::LayerStats& layer : layers) {
    ATTNSCOPE_RETURN_IF_ERROR(
        CheckSize(absl::StrCat("layer ", layer.layer(), " hidden_state_norms").c_str(),
                  layer.hidden_state_norms_size(), t));
    s->token_norms.push_back(ToVector(layer.hidden_state_norms()));
  }
  s->received = ToVector(sum.received());
  s->z = ToVector(sum.z());
  s->max_norm = ToVector(sum.max_norm());
  s->next_token_entropy_nats = ToVector(sum.next_token_entropy_nats());
  s->next_token_entropy_normalized = ToVector(sum.next_token_entropy_normalized());
  return absl::OkStatus();
}

// Surprisal ([T-1] or empty) and top predictions ([T] or empty).
absl::Status FillPredictions(const v1::Summary& sum, analysis::PromptStats* s) {
  const int64_t t = s->num_tokens;
  if (sum.next_token_surprisal_nats_size() != 0) {
    ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary next_token_surprisal_nats",
                                        sum.next_token_surprisal_nats_size(), t - 1));
  }
  if (sum.top_predictions_size() != 0) {
    ATTNSCOPE_RETURN_IF_ERROR(CheckSize("summary top_predictions", sum.top_predictions_size(), t));
  }
  s->next_token_surprisal_nats = ToVector(sum.next_token_surprisal_nats());
  for (const v1::TopPredictions& top : sum.top_predictions()) {
    std::vector<analysis::Prediction> position;
    for (const v1::NextTokenPrediction& p : top.predictions()) {
      position.push_back({p.id(), p.p(), p.token()});
    }
    s->top_predictions.push_back(std::move(position));
  }
  return absl::OkStatus();
}

}  // namespace

v1::ModelInfo ModelToProto(const ModelDescription& m) {
  v1::ModelInfo info;
  info.set_name(m.name);
  info.set_architecture(m.architecture);
  info.set_num_layers(static_cast<int32_t>(m.num_layers));
  info.set_num_heads(static_cast<int32_t>(m.num_heads));
  info.set_num_kv_heads(static_cast<int32_t>(m.num_kv_heads));
  info.set_hidden_size(static_cast<int32_t>(m.hidden_size));
  info.set_vocab_size(static_cast<int32_t>(m.vocab_size));
  info.set_max_positions(static_cast<int32_t>(m.max_positions));
  info.set_dtype(m.dtype);
  info.set_has_tokenizer(m.has_tokenizer);
  info.set_head_dim(static_cast<int32_t>(m.head_dim));
  info.set_intermediate_size(static_cast<int32_t>(m.intermediate_size));
  info.set_rope_kind(m.rope_kind);
  info.set_rope_theta(m.rope_theta);
  info.set_rotary_dim(static_cast<int32_t>(m.rotary_dim));
  info.set_sliding_window(static_cast<int32_t>(m.sliding_window));
  info.set_sliding_layers(static_cast<int32_t>(m.sliding_layers));
  info.set_norm(m.norm);
  info.set_tied_head(m.tied_head);
  return info;
}

ModelDescription ModelFromProto(const v1::ModelInfo& info) {
  ModelDescription m;
  m.name = info.name();
  m.architecture = info.architecture();
  m.num_layers = info.num_layers();
  m.num_heads = info.num_heads();
  m.num_kv_heads = info.num_kv_heads();
  m.hidden_size = info.hidden_size();
  m.vocab_size = info.vocab_size();
  m.max_positions = info.max_positions();
  m.dtype = info.dtype();
  m.has_tokenizer = info.has_tokenizer();
  m.head_dim = info.head_dim();
  m.intermediate_size = info.intermediate_size();
  m.rope_kind = info.rope_kind();
  m.rope_theta = info.rope_theta();
  m.rotary_dim = info.rotary_dim();
  m.sliding_window = info.sliding_window();
  m.sliding_layers = info.sliding_layers();
  m.norm = info.norm();
  m.tied_head = info.tied_head();
  return m;
}

v1::Tokens TokensToProto(const engine::Prompt& prompt) {
  v1::Tokens out;
  Assign(prompt.ids, out.mutable_ids());
  for (size_t i = 0; i < prompt.ids.size(); ++i) {
    out.add_tokens(i < prompt.tokens.size() ? prompt.tokens[i] : "");
    out.add_texts(i < prompt.token_bytes.size() ? prompt.Display(i) : "");
    v1::ByteSpan* span = out.add_offsets();
    if (i < prompt.offsets.size()) {
      span->set_begin(prompt.offsets[i].first);
      span->set_end(prompt.offsets[i].second);
    }
    out.add_special(i < prompt.special.size() && prompt.special[i]);
  }
  out.set_text(prompt.text);
  return out;
}

engine::Prompt PromptFromProto(const v1::Tokens& tokens) {
  engine::Prompt p;
  p.ids = ToVector(tokens.ids());
  p.tokens.assign(tokens.tokens().begin(), tokens.tokens().end());
  p.token_bytes.assign(tokens.texts().begin(), tokens.texts().end());
  for (const v1::ByteSpan& span : tokens.offsets()) p.offsets.emplace_back(span.begin(), span.end());
  p.special.assign(tokens.special().begin(), tokens.special().end());
  p.text = tokens.text();
  return p;
}

v1::LayerStats LayerStatsToProto(int layer, const analysis::HeadStats& heads,
                                 const std::vector<double>* hidden_norms) {
  const auto l = static_cast<size_t>(layer);
  v1::LayerStats out;
  out.set_layer(layer);
  Assign(heads.sink_score[l], out.mutable_sink_score());
  Assign(heads.first_token_mass[l], out.mutable_first_token_mass());
  Assign(heads.first_token_importance[l], out.mutable_first_token_importance());
  Assign(heads.attention_entropy[l], out.mutable_attention_entropy());
  Assign(heads.prev_token_score[l], out.mutable_prev_token_score());
  if (heads.value_weighted_normalized.size() > l) {
    Assign(heads.value_weighted_normalized[l], out.mutable_value_weighted_first_token_share());
    Assign(heads.value_weighted_raw[l], out.mutable_value_weighted_first_token_share_raw());
  }
  if (hidden_norms != nullptr) Assign(*hidden_norms, out.mutable_hidden_state_norms());
  return out;
}

v1::Summary SummaryToProto(const analysis::PromptStats& s, analysis::Structure structure,
                           const engine::Prompt& prompt) {
  v1::Summary out;
  out.set_health(s.health);
  for (int64_t position : s.sinks) {
    v1::Sink* sink = out.add_sinks();
    sink->set_position(position);
    sink->set_z(s.z.at(static_cast<size_t>(position)));
    if (static_cast<size_t>(position) < prompt.token_bytes.size()) {
      sink->set_text(prompt.Display(static_cast<size_t>(position)));
    }
  }
  Assign(s.structural, out.mutable_structural());
  out.set_threshold(s.threshold);
  out.set_template_(std::string(analysis::StructureName(structure)));
  out.set_num_candidates(static_cast<int32_t>(s.num_candidates));
  Assign(s.received, out.mutable_received());
  Assign(s.z, out.mutable_z());
  Assign(s.max_norm, out.mutable_max_norm());
  if (!s.token_norms.empty()) Assign(s.token_norms.front(), out.mutable_embedding_norms());
  out.set_massive_ratio(s.massive_ratio);
  out.set_massive_argmax(s.massive_argmax);
  Assign(s.next_token_entropy_nats, out.mutable_next_token_entropy_nats());
  Assign(s.next_token_entropy_normalized, out.mutable_next_token_entropy_normalized());
  out.set_back_half_sink_share(s.back_half_sink_share);
  out.set_sink_eps(s.sink_eps);
  out.set_sink_epsilon(s.sink_epsilon);
  for (int64_t position : s.expected_sinks) {
    v1::Sink* sink = out.add_expected_sinks();
    sink->set_position(position);
    sink->set_z(s.z.at(static_cast<size_t>(position)));
    if (static_cast<size_t>(position) < prompt.token_bytes.size()) {
      sink->set_text(prompt.Display(static_cast<size_t>(position)));
    }
  }
  Assign(s.next_token_surprisal_nats, out.mutable_next_token_surprisal_nats());
  for (const auto& position : s.top_predictions) {
    v1::TopPredictions* top = out.add_top_predictions();
    for (const analysis::Prediction& p : position) {
      v1::NextTokenPrediction* prediction = top->add_predictions();
      prediction->set_id(p.id);
      prediction->set_token(p.token);
      prediction->set_p(p.p);
    }
  }
  return out;
}

absl::StatusOr<analysis::PromptStats> StatsFromProto(const std::vector<v1::LayerStats>& layers,
                                                     const v1::Summary& sum) {
  if (layers.empty()) return absl::InvalidArgumentError("analysis stream: no layer events");
  analysis::PromptStats s;
  s.num_layers = static_cast<int64_t>(layers.size());
  s.num_heads = layers.front().sink_score_size();
  s.num_tokens = sum.received_size();
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].layer() != static_cast<int>(l)) {
      return absl::InvalidArgumentError(absl::StrCat("analysis stream: layer event ", l,
                                                     " is for layer ", layers[l].layer()));
    }
  }
  ATTNSCOPE_RETURN_IF_ERROR(FillHeadGrids(layers, s.num_heads, &s));
  ATTNSCOPE_RETURN_IF_ERROR(FillTokenStats(layers, sum, &s));
  s.back_half_sink_share = sum.back_half_sink_share();
  s.sink_eps = sum.sink_eps();
  s.sink_epsilon = sum.sink_epsilon();
  s.massive_ratio = sum.massive_ratio();
  s.massive_argmax = sum.massive_argmax();
  s.structural = ToVector(sum.structural());
  s.threshold = sum.threshold();
  s.num_candidates = sum.num_candidates();
  for (const v1::Sink& sink : sum.sinks()) s.sinks.push_back(sink.position());
  for (const v1::Sink& sink : sum.expected_sinks()) s.expected_sinks.push_back(sink.position());
  s.health = sum.health();
  ATTNSCOPE_RETURN_IF_ERROR(FillPredictions(sum, &s));
  return s;
}

v1::GeneratedToken GeneratedTokenToProto(const engine::GeneratedToken& t) {
  v1::GeneratedToken out;
  out.set_index(t.index);
  out.set_position(static_cast<int32_t>(t.position));
  out.set_id(t.id);
  out.set_text(t.text);
  out.set_probability(t.probability);
  out.set_entropy_nats(t.entropy_nats);
  out.set_entropy_normalized(t.entropy_normalized);
  for (const engine::Alternative& a : t.alternatives) {
    v1::TokenAlternative* alt = out.add_alternatives();
    alt->set_id(a.id);
    alt->set_text(a.text);
    alt->set_probability(a.probability);
  }
  Assign(t.sink_scores, out.mutable_sink_scores());
  out.set_cache_tokens(static_cast<int32_t>(t.cache_tokens));
  Assign(t.evicted_positions, out.mutable_evicted_positions());
  return out;
}

engine::GeneratedToken GeneratedTokenFromProto(const v1::GeneratedToken& t) {
  engine::GeneratedToken out;
  out.index = t.index();
  out.position = t.position();
  out.id = t.id();
  out.text = t.text();
  out.probability = t.probability();
  out.entropy_nats = t.entropy_nats();
  out.entropy_normalized = t.entropy_normalized();
  for (const v1::TokenAlternative& a : t.alternatives()) {
    out.alternatives.push_back({a.id(), a.text(), a.probability()});
  }
  out.sink_scores = ToVector(t.sink_scores());
  out.cache_tokens = t.cache_tokens();
  out.evicted_positions = ToVector(t.evicted_positions());
  return out;
}

}  // namespace attnscope::rpc
