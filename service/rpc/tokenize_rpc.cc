// AnalyzerService::Tokenize: a prompt through the model's tokenizer (and chat
// template), admitted like Analyze, kept off the feed. No forward pass, so
// neither the model's positions nor --max-prompt-tokens limit it.
#include <chrono>
#include <utility>

#include "service/core/status_macros.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/proto_convert.h"

namespace attnscope::rpc {

grpc::Status AnalyzerService::Tokenize(grpc::ServerContext* context,
                                       const v1::TokenizeRequest* request,
                                       v1::TokenizeResponse* response) {
  // The bearer token and the message size, as for every other call.
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), nullptr); !refused.ok()) {
    return Refused("Tokenize", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Tokenize", context, metrics_, feed_, drain_);
  scope.KeepOffFeed();
  return scope.Finish(RunTokenize(scope, *request, response));
}

absl::Status AnalyzerService::RunTokenize(RequestScope& scope, const v1::TokenizeRequest& request,
                                          v1::TokenizeResponse* response) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  const std::string model_name = models_.Resolve(request.model());
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(AdmissionController::Slot slot, AdmitSlot(scope, model_name));
  ATTNSCOPE_ASSIGN_OR_RETURN(engine::Prompt prompt,
                             TokenizePrompt(PromptOf(request), *bundle, model_name));
  if (scope.ShouldStop()) return scope.StopStatus("while tokenizing");
  response->set_model(model_name);
  *response->mutable_tokens() = TokensToProto(prompt);
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
