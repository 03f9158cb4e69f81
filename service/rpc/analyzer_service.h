// attnscope.v1.Analyzer on gRPC's synchronous API: one handler thread per
// call, server-streaming writers. Requests are validated, admitted (or turned
// away), run on the engine with cancellation and deadlines wired into
// should_stop, streamed as they are computed, announced on the Subscribe
// feed and recorded in the metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "service/metrics/service_metrics.h"
#include "service/rpc/admission.h"
#include "service/rpc/compute_threads.h"
#include "service/rpc/client_streams.h"
#include "service/rpc/feed_hub.h"
#include "service/rpc/model_registry.h"
#include "service/rpc/request_scope.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {

struct ServiceConfig {
  int max_concurrent = 4;         // Analyze/Generate computing at once
  int max_queue = 64;             // waiting beyond that; more: RESOURCE_EXHAUSTED
  int64_t max_prompt_tokens = 0;  // 0: only the model's positions
  int64_t tensor_chunk_bytes = 1 << 20;  // TensorChunk data size, at most 1 MiB
  int max_subscribers = 64;
  size_t feed_queue = 256;  // events buffered per subscriber before dropping
  int64_t max_new_tokens = 1024;  // per Generate request; 0: only the model's positions
  int64_t max_attention_bytes = int64_t{256} << 20;  // raw attention per Analyze; 0: no limit
  int max_streams_per_client = 32;  // Analyze+Generate+Subscribe open per client host; 0: none
  int64_t max_message_bytes = 4 << 20;  // largest request message
  std::string auth_token;  // non-empty: every Analyzer call must carry it as a bearer token
  // For requests that name no precision (attnscope-server --precision).
  model::Precision default_precision = model::Precision::kFloat32;
};

class AnalyzerService final : public attnscope::v1::Analyzer::Service {
 public:
  // `models` (not empty) and `metrics` must outlive the service. Publishes
  // every model's info to the metrics.
  AnalyzerService(const ModelRegistry& models, metrics::ServiceMetrics& metrics,
                  ServiceConfig config);

  grpc::Status ListModels(grpc::ServerContext* context,
                          const attnscope::v1::ListModelsRequest* request,
                          attnscope::v1::ListModelsResponse* response) override;
  grpc::Status Analyze(grpc::ServerContext* context, const attnscope::v1::AnalyzeRequest* request,
                       grpc::ServerWriter<attnscope::v1::AnalyzeEvent>* writer) override;
  grpc::Status Generate(grpc::ServerContext* context,
                        const attnscope::v1::GenerateRequest* request,
                        grpc::ServerWriter<attnscope::v1::GenerateEvent>* writer) override;
  grpc::Status EvaluateEviction(grpc::ServerContext* context,
                                const attnscope::v1::EvaluateEvictionRequest* request,
                                grpc::ServerWriter<attnscope::v1::EvaluateEvictionEvent>* writer)
      override;
  grpc::Status Subscribe(grpc::ServerContext* context,
                         const attnscope::v1::SubscribeRequest* request,
                         grpc::ServerWriter<attnscope::v1::FeedEvent>* writer) override;
  // Unary, admitted like Analyze, kept off the feed (tokenize_rpc.cc,
  // probe_rpc.cc).
  grpc::Status Tokenize(grpc::ServerContext* context,
                        const attnscope::v1::TokenizeRequest* request,
                        attnscope::v1::TokenizeResponse* response) override;
  grpc::Status ScanHeads(grpc::ServerContext* context,
                         const attnscope::v1::HeadScanRequest* request,
                         attnscope::v1::HeadScanResponse* response) override;
  grpc::Status Ablate(grpc::ServerContext* context, const attnscope::v1::AblateRequest* request,
                      attnscope::v1::AblateResponse* response) override;
  // Streams, admitted like Analyze, kept off the feed (lens_rpc.cc).
  grpc::Status Lens(grpc::ServerContext* context, const attnscope::v1::LensRequest* request,
                    grpc::ServerWriter<attnscope::v1::LensEvent>* writer) override;
  grpc::Status Patch(grpc::ServerContext* context, const attnscope::v1::PatchRequest* request,
                     grpc::ServerWriter<attnscope::v1::PatchEvent>* writer) override;

  // Ends every Subscribe stream and refuses new ones (before a drain: feed
  // streams never end by themselves).
  void CloseFeed() { feed_.Close(); }
  // The drain ran out: every request still running ends at its next check
  // with UNAVAILABLE and `message` (DrainEnd).
  void EndInFlight(std::string message) { drain_.Expire(std::move(message)); }

 private:
  // The bodies of Analyze and Generate (analyze_rpc.cc, generate_rpc.cc).
  absl::Status RunAnalyze(RequestScope& scope, const attnscope::v1::AnalyzeRequest& request,
                          grpc::ServerWriter<attnscope::v1::AnalyzeEvent>* writer);
  absl::Status RunGenerate(RequestScope& scope, const attnscope::v1::GenerateRequest& request,
                           grpc::ServerWriter<attnscope::v1::GenerateEvent>* writer);
  // eviction_rpc.cc.
  absl::Status RunEvaluateEviction(
      RequestScope& scope, const attnscope::v1::EvaluateEvictionRequest& request,
      grpc::ServerWriter<attnscope::v1::EvaluateEvictionEvent>* writer);
  absl::Status RunTokenize(RequestScope& scope, const attnscope::v1::TokenizeRequest& request,
                           attnscope::v1::TokenizeResponse* response);
  absl::Status RunScanHeads(RequestScope& scope, const attnscope::v1::HeadScanRequest& request,
                            attnscope::v1::HeadScanResponse* response);
  absl::Status RunAblate(RequestScope& scope, const attnscope::v1::AblateRequest& request,
                         attnscope::v1::AblateResponse* response);
  absl::Status RunLensCall(RequestScope& scope, const attnscope::v1::LensRequest& request,
                           grpc::ServerWriter<attnscope::v1::LensEvent>* writer);
  absl::Status RunPatchCall(RequestScope& scope, const attnscope::v1::PatchRequest& request,
                            grpc::ServerWriter<attnscope::v1::PatchEvent>* writer);
  // Waits for a compute slot (the queue wait goes to the metrics).
  absl::StatusOr<AdmissionController::Slot> AdmitSlot(RequestScope& scope,
                                                      const std::string& model_name);
  // Checks that come before anything else, in this order: the bearer token
  // (Unauthenticated), the request's size (`request_bytes`) and, for
  // streams (`lease` not null), the client's open streams (ResourceExhausted).
  // A refused call is counted in the metrics under `rpc` but never announced
  // on the feed: an unauthenticated client must not be able to write to the
  // dashboards.
  absl::Status Gate(grpc::ServerContext* context, size_t request_bytes,
                    ClientStreams::Lease* lease);
  // Ends a call Gate refused: records it and returns the gRPC status.
  grpc::Status Refused(const std::string& rpc, const absl::Status& status,
                       std::chrono::steady_clock::time_point start);
  // What Analyze and Generate hold once admitted: a compute slot and the
  // resolved prompt.
  struct Admitted {
    AdmissionController::Slot slot;
    engine::Prompt prompt;
  };
  // Waits for a compute slot, then resolves the prompt against the model;
  // the queueing and tokenizing times go to *timings.
  absl::StatusOr<Admitted> AdmitAndTokenize(RequestScope& scope, const engine::ModelBundle& bundle,
                                            const std::string& model_name,
                                            const PromptInput& input,
                                            attnscope::v1::Timings* timings);

  const ModelRegistry& models_;
  metrics::ServiceMetrics& metrics_;
  const ServiceConfig config_;
  AdmissionController admission_;
  // Where admitted computations run (compute_threads.h).
  ComputeThreads compute_;
  ClientStreams client_streams_;
  FeedHub feed_;
  DrainEnd drain_;
};

}  // namespace attnscope::rpc
