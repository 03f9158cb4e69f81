// attnscope.v1.Analyzer on gRPC's synchronous API: one handler thread per
// call, server-streaming writers. Requests are validated, admitted (or turned
// away), run on the engine with cancellation and deadlines wired into
// should_stop, streamed as they are computed, announced on the Subscribe
// feed and recorded in the metrics.
#pragma once

#include <cstdint>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "service/metrics/service_metrics.h"
#include "service/rpc/admission.h"
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

  // Ends every Subscribe stream and refuses new ones (before a drain: feed
  // streams never end by themselves).
  void CloseFeed() { feed_.Close(); }

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
  FeedHub feed_;
};

}  // namespace attnscope::rpc
