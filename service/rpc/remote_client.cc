#include "service/rpc/remote_client.h"

#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "service/core/status_macros.h"
#include "service/engine/streaming_cache.h"
#include "service/rpc/client_channel.h"
#include "service/rpc/head_scan_convert.h"
#include "service/rpc/lens_convert.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/remote_tensors.h"
#include "service/rpc/status_codes.h"
#include "service/rpc/transport_security.h"

namespace attnscope::rpc {
namespace {

template <typename Request>
void SetPrompt(const PromptSpec& spec, Request* request) {
  if (spec.text.has_value()) {
    request->set_text(*spec.text);
    if (spec.add_special_tokens.has_value()) request->set_add_special_tokens(*spec.add_special_tokens);
  } else if (spec.chat.has_value()) {
    v1::Conversation* chat = request->mutable_chat();
    for (const auto& m : *spec.chat) {
      v1::ChatMessage* message = chat->add_messages();
      message->set_role(m.value("role", ""));
      message->set_content(m.value("content", ""));
    }
    chat->set_add_generation_prompt(spec.add_generation_prompt);
    if (!spec.chat_kwargs.empty()) chat->set_template_kwargs_json(spec.chat_kwargs.dump());
  } else {
    request->mutable_ids()->mutable_ids()->Assign(spec.ids.begin(), spec.ids.end());
  }
}

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError("the server's stream is malformed: " + what);
}

// Reads an Analyze stream; tensor chunks are only asked for with
// record_tensors.
struct AnalyzeEvents {
  std::optional<v1::Tokens> tokens;
  std::vector<v1::LayerStats> layers;
  std::optional<v1::Summary> summary;
  StreamedTensors tensors;
  absl::Status tensor_status;  // the first malformed chunk
};

void SetOptions(const engine::AnalysisSettings& settings, v1::AnalyzeOptions* options) {
  options->set_threshold(settings.threshold);
  options->set_sink_epsilon(settings.sink_epsilon);
  options->set_template_(std::string(analysis::StructureName(settings.structure)));
  options->set_query_block_size(static_cast<int32_t>(settings.query_block_size));
  options->set_hidden_state_norms(true);
  if (settings.precision) options->set_precision(model::PrecisionName(*settings.precision));
  if (settings.record_tensors) {
    // Every layer and head in float32, as a local recorder keeps them.
    options->set_return_attention(true);
    options->set_attention_dtype(v1::TENSOR_DTYPE_FLOAT32);
    options->set_return_hidden_states(true);
    options->set_return_logits(true);
  } else if (settings.tensor_sink != nullptr) {
    const engine::TensorRequest& r = settings.tensor_request;
    if (r.attention.size() > 0) {
      options->set_return_attention(true);
      options->set_attention_dtype(r.attention_float16 ? v1::TENSOR_DTYPE_FLOAT16
                                                       : v1::TENSOR_DTYPE_FLOAT32);
      for (int64_t l : r.attention.layers) options->add_attention_layers(static_cast<int32_t>(l));
      for (int64_t h : r.attention.heads) options->add_attention_heads(static_cast<int32_t>(h));
    }
    options->set_return_hidden_states(r.hidden_states);
    options->set_return_logits(r.logits);
  }
}

// A TensorChunk as the piece of a tensor that a local pass would publish.
absl::StatusOr<engine::TensorPiece> PieceOf(const v1::TensorChunk& c) {
  engine::TensorPiece p;
  if (c.name() == "attention") {
    p.kind = engine::TensorPiece::Kind::kAttention;
  } else if (c.name() == "hidden_state") {
    p.kind = engine::TensorPiece::Kind::kHiddenState;
  } else if (c.name() == "logits") {
    p.kind = engine::TensorPiece::Kind::kLogits;
  } else {
    return Malformed("a TensorChunk named '" + c.name() + "'");
  }
  const bool half = c.dtype() == v1::TENSOR_DTYPE_FLOAT16;
  if (c.shape_size() != 2 || (!half && c.dtype() != v1::TENSOR_DTYPE_FLOAT32) ||
      (half && p.kind != engine::TensorPiece::Kind::kAttention)) {
    return Malformed("a " + c.name() + " chunk of an unexpected shape or dtype");
  }
  p.layer = c.layer();
  p.head = c.head();
  p.rows = c.shape(0);
  p.cols = c.shape(1);
  p.float16 = half;
  p.offset = c.offset();
  p.data = c.data().data();
  p.size = static_cast<int64_t>(c.data().size());
  return p;
}

// One layer's per-head numbers appended to those of the layers before it.
void AppendLayer(const v1::LayerStats& l, analysis::HeadStats* h) {
  const auto row = [](const google::protobuf::RepeatedField<double>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  h->sink_score.push_back(row(l.sink_score()));
  h->first_token_mass.push_back(row(l.first_token_mass()));
  h->first_token_importance.push_back(row(l.first_token_importance()));
  h->attention_entropy.push_back(row(l.attention_entropy()));
  h->prev_token_score.push_back(row(l.prev_token_score()));
  if (l.value_weighted_first_token_share_size() > 0) {
    h->value_weighted_normalized.push_back(row(l.value_weighted_first_token_share()));
    h->value_weighted_raw.push_back(row(l.value_weighted_first_token_share_raw()));
  }
}

void SetProbe(const ProbeSource& source, v1::InductionProbe* probe) {
  if (source.random.has_value()) {
    probe->mutable_random()->set_n(source.random->n);
    probe->mutable_random()->set_num_sequences(source.random->num_sequences);
    probe->mutable_random()->set_seed(source.random->seed);
  } else if (source.sequences.has_value()) {
    v1::ProbeSequences* given = probe->mutable_sequences();
    given->set_n(source.sequences->n);
    for (const std::vector<int64_t>& ids : source.sequences->sequences) {
      given->add_sequences()->mutable_ids()->Add(ids.begin(), ids.end());
    }
  } else if (source.text.has_value()) {
    probe->set_text(*source.text);
  }
}

// Calls `on_slow` from a thread of its own unless Arrived() comes first
// (within `seconds`).
class FirstEventWatch {
 public:
  FirstEventWatch(double seconds, const std::function<void()>& on_slow) {
    if (!on_slow || !(seconds > 0)) return;
    thread_ = std::thread([this, seconds, on_slow] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        on_slow();
      }
    });
  }
  FirstEventWatch(const FirstEventWatch&) = delete;
  FirstEventWatch& operator=(const FirstEventWatch&) = delete;
  ~FirstEventWatch() {
    Arrived();
    if (thread_.joinable()) thread_.join();
  }
  void Arrived() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

void ApplyDeadline(const CallOptions& options, grpc::ClientContext* context) {
  if (options.deadline_seconds > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(options.deadline_seconds)));
  }
}

}  // namespace

struct RemoteClient::Impl {
  std::string target;
  ClientSecurity security;
  absl::Status setup;  // why no channel could be made (an unreadable file)
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Analyzer::Stub> stub;

  // The call's status; gRPC reports a target it cannot parse only as an
  // UNKNOWN "Failed to create ... channel", so that one names the target.
  absl::Status Finish(const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::UNKNOWN &&
        status.error_message().find("Failed to create") != std::string::npos) {
      return absl::InvalidArgumentError(
          "--server '" + target +
          "' is not a gRPC target: use HOST:PORT, dns:///HOST:PORT or "
          "ipv4:ADDR:PORT,ADDR:PORT,... (gRPC logs the reason above)");
    }
    return ExplainTransportError(FromGrpcStatus(status), security);
  }

  CallOptions call_options;

  // A unary call with the call options: the deadline, and the waiting line
  // when no answer came within slow_start_seconds.
  absl::Status Unary(const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
    ATTNSCOPE_RETURN_IF_ERROR(setup);
    grpc::ClientContext context;
    ApplyDeadline(call_options, &context);
    FirstEventWatch watch(call_options.slow_start_seconds, call_options.on_slow_start);
    const grpc::Status status = call(&context);
    watch.Arrived();
    return Finish(status);
  }
};

void RemoteClient::SetCallOptions(CallOptions options) { impl_->call_options = std::move(options); }

RemoteClient::RemoteClient(const std::string& target, ClientSecurity security)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = target;
  impl_->security = std::move(security);
  auto channel = CreateClientChannel(target, impl_->security);
  if (!channel.ok()) {
    // Calls still need a channel to fail on; they return the reason first.
    impl_->setup = channel.status();
    channel = CreateClientChannel(target);
  }
  impl_->channel = *std::move(channel);
  impl_->stub = v1::Analyzer::NewStub(impl_->channel);
}

RemoteClient::~RemoteClient() = default;

absl::StatusOr<std::vector<ModelDescription>> RemoteClient::ListModels() {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ATTNSCOPE_RETURN_IF_ERROR(
      impl_->Finish(impl_->stub->ListModels(&context, v1::ListModelsRequest(), &response)));
  std::vector<ModelDescription> out;
  for (const v1::ModelInfo& info : response.models()) out.push_back(ModelFromProto(info));
  return out;
}

absl::StatusOr<std::string> RemoteClient::CheckHealth(const std::string& service,
                                                      double timeout_seconds) {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::microseconds(static_cast<int64_t>(timeout_seconds * 1e6)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Finish(
      grpc::health::v1::Health::NewStub(impl_->channel)->Check(&context, request, &response)));
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

absl::StatusOr<std::pair<engine::Prompt, engine::AnalysisRun>> RemoteClient::Analyze(
    const std::string& model, const PromptSpec& prompt, const engine::AnalysisSettings& settings,
    std::string* served_model, std::string* peer) {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  v1::AnalyzeRequest request;
  request.set_model(model);
  SetPrompt(prompt, &request);
  SetOptions(settings, request.mutable_options());
  if (impl_->call_options.batch) request.set_origin(v1::REQUEST_ORIGIN_BATCH);

  grpc::ClientContext context;
  ApplyDeadline(impl_->call_options, &context);
  FirstEventWatch watch(impl_->call_options.slow_start_seconds, impl_->call_options.on_slow_start);
  auto reader = impl_->stub->Analyze(&context, request);
  AnalyzeEvents events;
  analysis::HeadStats heads_so_far;  // for settings.layer_listener, as a local pass tells it
  v1::AnalyzeEvent event;
  while (reader->Read(&event)) {
    watch.Arrived();
    if (event.has_tokens()) events.tokens = event.tokens();
    if (event.has_layer()) {
      events.layers.push_back(event.layer());
      if (settings.layer_listener != nullptr) {
        AppendLayer(event.layer(), &heads_so_far);
        settings.layer_listener->OnLayerDone(
            event.layer().layer(), heads_so_far,
            std::vector<double>(event.layer().hidden_state_norms().begin(),
                                event.layer().hidden_state_norms().end()));
      }
    }
    if (event.has_attention() && events.tensor_status.ok()) {
      if (settings.record_tensors) {
        events.tensor_status = events.tensors.Add(event.attention());
      } else if (settings.tensor_sink != nullptr) {
        absl::StatusOr<engine::TensorPiece> piece = PieceOf(event.attention());
        events.tensor_status = piece.ok() ? settings.tensor_sink->Add(*piece) : piece.status();
      }
      // The tensors cannot be used: stop the server sending the rest.
      if (!events.tensor_status.ok()) context.TryCancel();
    }
    if (event.has_summary()) events.summary = event.summary();
  }
  const grpc::Status finished = reader->Finish();
  if (peer != nullptr) *peer = context.peer();
  ATTNSCOPE_RETURN_IF_ERROR(events.tensor_status);
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Finish(finished));
  if (!events.tokens || !events.summary) return Malformed("no tokens or no summary event");

  engine::AnalysisRun run;
  ATTNSCOPE_ASSIGN_OR_RETURN(run.stats, StatsFromProto(events.layers, *events.summary));
  auto structure = analysis::ParseStructure(events.summary->template_());
  if (!structure.ok()) return Malformed(std::string(structure.status().message()));
  run.structure = *structure;
  run.forward_seconds = events.summary->timings().compute_seconds();
  engine::Prompt resolved = PromptFromProto(*events.tokens);
  if (prompt.text.has_value()) resolved.text = *prompt.text;
  if (settings.record_tensors) {
    const int64_t heads =
        run.stats.sink_score.empty() ? 0 : static_cast<int64_t>(run.stats.sink_score[0].size());
    ATTNSCOPE_ASSIGN_OR_RETURN(
        run.tensors, events.tensors.Replay(static_cast<int64_t>(events.layers.size()), heads,
                                           static_cast<int64_t>(resolved.ids.size())));
  }
  if (served_model != nullptr) *served_model = events.summary->model();
  return std::make_pair(std::move(resolved), std::move(run));
}

absl::StatusOr<engine::Prompt> RemoteClient::Tokenize(const std::string& model,
                                                      const PromptSpec& prompt,
                                                      std::string* served_model) {
  v1::TokenizeRequest request;
  request.set_model(model);
  if (prompt.text.has_value()) {
    request.set_text(*prompt.text);
    if (prompt.add_special_tokens.has_value()) {
      request.set_add_special_tokens(*prompt.add_special_tokens);
    }
  } else if (prompt.chat.has_value()) {
    v1::AnalyzeRequest carrier;  // SetPrompt fills a Conversation the same way
    SetPrompt(prompt, &carrier);
    *request.mutable_chat() = carrier.chat();
  }
  v1::TokenizeResponse response;
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Unary(
      [&](grpc::ClientContext* c) { return impl_->stub->Tokenize(c, request, &response); }));
  if (served_model != nullptr) *served_model = response.model();
  return PromptFromProto(response.tokens());
}

absl::StatusOr<RemoteHeadScan> RemoteClient::ScanHeads(const std::string& model,
                                                       const ProbeSource& probe) {
  v1::HeadScanRequest request;
  request.set_model(model);
  SetProbe(probe, request.mutable_probe());
  v1::HeadScanResponse response;
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Unary(
      [&](grpc::ClientContext* c) { return impl_->stub->ScanHeads(c, request, &response); }));
  RemoteHeadScan out;
  out.model = response.model();
  out.probe = ProbeRunFromProto(response.probe());
  ATTNSCOPE_ASSIGN_OR_RETURN(out.scan, HeadScanFromProto(response));
  return out;
}

absl::StatusOr<RemoteAblation> RemoteClient::Ablate(const std::string& model,
                                                    const ProbeSource& probe,
                                                    const std::vector<model::HeadRef>& heads,
                                                    model::AblationMode mode) {
  v1::AblateRequest request;
  request.set_model(model);
  SetProbe(probe, request.mutable_probe());
  for (const model::HeadRef& head : heads) *request.add_heads() = HeadRefToProto(head);
  request.set_mode(mode == model::AblationMode::kMean ? v1::ABLATION_MODE_MEAN
                                                      : v1::ABLATION_MODE_ZERO);
  v1::AblateResponse response;
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Unary(
      [&](grpc::ClientContext* c) { return impl_->stub->Ablate(c, request, &response); }));
  RemoteAblation out;
  out.model = response.model();
  out.probe = ProbeRunFromProto(response.probe());
  if (out.probe.sequences.empty()) return Malformed("an AblateResponse without its probe");
  out.rows = AblationRowsFromProto(response);
  return out;
}

absl::StatusOr<RemoteGeneration> RemoteClient::Generate(const std::string& model,
                                                        const PromptSpec& prompt,
                                                        const engine::GenerationSettings& s) {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  v1::GenerateRequest request;
  request.set_model(model);
  SetPrompt(prompt, &request);
  request.set_max_new_tokens(s.max_new_tokens);
  request.mutable_sampling()->set_temperature(s.sampling.temperature);
  request.mutable_sampling()->set_top_k(s.sampling.top_k);
  request.mutable_sampling()->set_top_p(s.sampling.top_p);
  request.mutable_sampling()->set_seed(s.sampling.seed);
  request.set_num_alternatives(s.num_alternatives);
  request.set_layer_sink_scores(s.layer_sink_scores);
  if (s.precision) request.set_precision(model::PrecisionName(*s.precision));
  request.set_stop_at_eos(s.stop_at_eos);
  if (s.cache_policy.bounded()) request.set_cache_policy(engine::PolicyName(s.cache_policy));
  if (s.cache_positions.has_value()) {
    request.set_cache_positions(engine::CachePositionsName(*s.cache_positions));
  }

  grpc::ClientContext context;
  ApplyDeadline(impl_->call_options, &context);
  FirstEventWatch watch(impl_->call_options.slow_start_seconds, impl_->call_options.on_slow_start);
  auto reader = impl_->stub->Generate(&context, request);
  RemoteGeneration out;
  bool have_prompt = false, have_summary = false;
  v1::GenerateEvent event;
  while (reader->Read(&event)) {
    watch.Arrived();
    if (event.has_prompt()) {
      out.prompt = PromptFromProto(event.prompt());
      have_prompt = true;
    }
    if (event.has_token()) out.result.tokens.push_back(GeneratedTokenFromProto(event.token()));
    if (event.has_summary()) {
      out.result.text = event.summary().text();
      out.result.stop_reason = event.summary().stop_reason();
      out.result.decode_seconds = event.summary().timings().compute_seconds();
      out.tokens_per_second = event.summary().tokens_per_second();
      have_summary = true;
    }
  }
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Finish(reader->Finish()));
  if (!have_prompt || !have_summary) return Malformed("no prompt or no summary event");
  if (prompt.text.has_value()) out.prompt.text = *prompt.text;
  return out;
}

absl::StatusOr<RemoteLens> RemoteClient::Lens(const std::string& model, const PromptSpec& prompt,
                                              const LensQuery& q) {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  v1::LensRequest request;
  request.set_model(model);
  SetPrompt(prompt, &request);
  request.set_logit_lens(q.lens);
  request.set_attribution(q.attribution);
  request.set_rollout(q.rollout);
  request.set_lens_positions(q.lens_positions);
  if (q.top_k.has_value()) request.set_top_k(static_cast<int32_t>(*q.top_k));
  request.set_attribution_positions(q.attribution_positions);
  request.mutable_target_ids()->Add(q.target_ids.begin(), q.target_ids.end());
  request.set_target_text(q.target_text);
  request.set_rollout_queries(q.rollout_queries);
  if (q.precision) request.set_precision(model::PrecisionName(*q.precision));
  request.set_query_block_size(static_cast<int32_t>(q.query_block_size));

  grpc::ClientContext context;
  ApplyDeadline(impl_->call_options, &context);
  FirstEventWatch watch(impl_->call_options.slow_start_seconds, impl_->call_options.on_slow_start);
  auto reader = impl_->stub->Lens(&context, request);
  LensCollector collector;
  std::optional<v1::Tokens> tokens;
  std::optional<v1::LensSummary> summary;
  absl::Status malformed;
  v1::LensEvent event;
  while (reader->Read(&event)) {
    watch.Arrived();
    absl::Status added;
    if (event.has_tokens()) tokens = event.tokens();
    if (event.has_lens()) added = collector.AddLens(event.lens());
    if (event.has_attribution()) added = collector.AddAttribution(event.attribution());
    if (event.has_rollout()) added = collector.AddRollout(event.rollout());
    if (event.has_summary()) summary = event.summary();
    if (!added.ok() && malformed.ok()) {
      malformed = added;
      context.TryCancel();
    }
  }
  const grpc::Status finished = reader->Finish();
  ATTNSCOPE_RETURN_IF_ERROR(malformed);
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Finish(finished));
  if (!tokens || !summary) return Malformed("no tokens or no summary event");
  RemoteLens out;
  out.model = summary->model();
  out.num_layers = summary->num_layers();
  out.prompt = PromptFromProto(*tokens);
  if (prompt.text.has_value()) out.prompt.text = *prompt.text;
  ATTNSCOPE_ASSIGN_OR_RETURN(
      out.run, collector.Finish(*summary, static_cast<int64_t>(out.prompt.ids.size()), q.lens,
                                q.attribution, q.rollout));
  return out;
}

absl::StatusOr<RemotePatch> RemoteClient::Patch(
    const std::string& model, const PatchQuery& q,
    const std::function<void(const engine::PatchStep&)>& progress) {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->setup);
  v1::PatchRequest request;
  request.set_model(model);
  if (q.clean.text.has_value()) {
    request.set_clean_text(*q.clean.text);
  } else {
    request.mutable_clean_ids()->mutable_ids()->Add(q.clean.ids.begin(), q.clean.ids.end());
  }
  if (q.corrupted.text.has_value()) {
    request.set_corrupted_text(*q.corrupted.text);
  } else {
    request.mutable_corrupted_ids()->mutable_ids()->Add(q.corrupted.ids.begin(),
                                                        q.corrupted.ids.end());
  }
  // One setting for both text prompts (the CLI's --no-special-tokens).
  const std::optional<bool> special = q.clean.add_special_tokens.has_value()
                                          ? q.clean.add_special_tokens
                                          : q.corrupted.add_special_tokens;
  if (special.has_value()) request.set_add_special_tokens(*special);
  request.set_kind(PatchKindToProto(q.what));
  if (q.target_a_id) request.set_target_a_id(*q.target_a_id);
  if (q.target_b_id) request.set_target_b_id(*q.target_b_id);
  request.set_target_a_text(q.target_a_text);
  request.set_target_b_text(q.target_b_text);
  if (q.precision) request.set_precision(model::PrecisionName(*q.precision));
  request.set_query_block_size(static_cast<int32_t>(q.query_block_size));

  grpc::ClientContext context;
  ApplyDeadline(impl_->call_options, &context);
  FirstEventWatch watch(impl_->call_options.slow_start_seconds, impl_->call_options.on_slow_start);
  auto reader = impl_->stub->Patch(&context, request);
  RemotePatch out;
  bool have_baseline = false, have_summary = false;
  absl::Status malformed;
  v1::PatchEvent event;
  while (reader->Read(&event)) {
    watch.Arrived();
    if (event.has_baseline()) {
      const v1::PatchBaseline& b = event.baseline();
      out.clean = PromptFromProto(b.clean());
      out.corrupted = PromptFromProto(b.corrupted());
      engine::PatchRun& run = out.run;
      run.what = b.kind() == v1::PATCH_KIND_RESIDUAL ? engine::PatchTarget::kResidual
                                                     : engine::PatchTarget::kHeads;
      run.num_tokens = static_cast<int64_t>(out.clean.ids.size());
      run.token_a = b.target_a();
      run.token_b = b.target_b();
      run.text_a = b.target_a_token();
      run.text_b = b.target_b_token();
      run.clean_metric = b.clean_metric();
      run.corrupted_metric = b.corrupted_metric();
      if (b.num_layers() < 1 || b.num_columns() < 1 || b.num_layers() > 4096 ||
          b.num_columns() > (1 << 20)) {
        malformed = Malformed("a patch baseline of an impossible shape");
        context.TryCancel();
        continue;
      }
      const auto nan = std::numeric_limits<double>::quiet_NaN();
      run.metric.assign(static_cast<size_t>(b.num_layers()),
                        std::vector<double>(static_cast<size_t>(b.num_columns()), nan));
      run.recovery = run.metric;
      have_baseline = true;
    }
    if (event.has_step()) {
      const v1::PatchStep& s = event.step();
      if (!have_baseline || s.layer() < 0 || s.layer() >= static_cast<int>(out.run.metric.size()) ||
          s.column() < 0 || s.column() >= static_cast<int64_t>(out.run.metric[0].size())) {
        if (malformed.ok()) malformed = Malformed("a patch step outside the baseline's grid");
        context.TryCancel();
        continue;
      }
      out.run.metric[static_cast<size_t>(s.layer())][static_cast<size_t>(s.column())] = s.metric();
      out.run.recovery[static_cast<size_t>(s.layer())][static_cast<size_t>(s.column())] =
          s.recovery();
      engine::PatchStep step;
      step.layer = s.layer();
      step.column = s.column();
      step.metric = s.metric();
      step.recovery = s.recovery();
      step.done = s.done();
      step.total = s.total();
      if (progress) progress(step);
    }
    if (event.has_summary()) {
      out.model = event.summary().model();
      out.run.passes = event.summary().passes();
      out.run.seconds = event.summary().timings().compute_seconds();
      have_summary = true;
    }
  }
  const grpc::Status finished = reader->Finish();
  ATTNSCOPE_RETURN_IF_ERROR(malformed);
  ATTNSCOPE_RETURN_IF_ERROR(impl_->Finish(finished));
  if (!have_baseline || !have_summary) return Malformed("no baseline or no summary event");
  if (q.clean.text.has_value()) out.clean.text = *q.clean.text;
  if (q.corrupted.text.has_value()) out.corrupted.text = *q.corrupted.text;
  return out;
}

}  // namespace attnscope::rpc
