#include "client/connection/stream_calls.h"

#include <chrono>

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

const char* codeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

template <typename Event, typename Reader>
grpc::Status drain(std::unique_ptr<Reader> reader,
                   const std::function<void(const Event&)>& onEvent) {
  Event event;
  while (reader->Read(&event)) onEvent(event);
  return reader->Finish();
}

}  // namespace

std::shared_ptr<AnalyzerStub> makeStub(const QString& target, int maxBackoffMs, bool roundRobin) {
  grpc::ChannelArguments args;
  if (roundRobin) args.SetServiceConfigJSON(R"({"loadBalancingConfig":[{"round_robin":{}}]})");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, maxBackoffMs);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  const auto channel =
      grpc::CreateCustomChannel(target.toStdString(), grpc::InsecureChannelCredentials(), args);
  return std::shared_ptr<AnalyzerStub>(v1::Analyzer::NewStub(channel));
}

QString describeStatus(const grpc::Status& status) {
  const QString code = QString::fromLatin1(codeName(status.error_code()));
  if (status.ok() || status.error_message().empty()) return code;
  return code + QStringLiteral(": ") + QString::fromStdString(status.error_message());
}

grpc::Status listModels(AnalyzerStub& stub, grpc::ClientContext* context, int timeoutMs,
                        v1::ListModelsResponse* models) {
  context->set_wait_for_ready(true);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeoutMs));
  return stub.ListModels(context, v1::ListModelsRequest(), models);
}

grpc::Status runAnalyze(AnalyzerStub& stub, grpc::ClientContext* context,
                        const v1::AnalyzeRequest& request,
                        const std::function<void(const v1::AnalyzeEvent&)>& onEvent) {
  return drain<v1::AnalyzeEvent>(stub.Analyze(context, request), onEvent);
}

grpc::Status runGenerate(AnalyzerStub& stub, grpc::ClientContext* context,
                         const v1::GenerateRequest& request,
                         const std::function<void(const v1::GenerateEvent&)>& onEvent) {
  return drain<v1::GenerateEvent>(stub.Generate(context, request), onEvent);
}

grpc::Status runSubscribe(AnalyzerStub& stub, grpc::ClientContext* context,
                          const v1::SubscribeRequest& request,
                          const std::function<void()>& onStarted,
                          const std::function<void(const v1::FeedEvent&)>& onEvent) {
  auto reader = stub.Subscribe(context, request);
  // attnscope-server sends its headers once the subscription is registered:
  // from then on no event is missed.
  reader->WaitForInitialMetadata();
  onStarted();
  return drain<v1::FeedEvent>(std::move(reader), onEvent);
}

}  // namespace attnscope::dashboard
