#include "client/connection/stream_calls.h"

#include <chrono>

#include "service/rpc/transport_security.h"

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

rpc::ClientSecurity clientSecurity(const ConnectionSecurity& security) {
  rpc::ClientSecurity out;
  out.tls_ca_file = security.caFile.toStdString();
  out.tls_cert_file = security.certFile.toStdString();
  out.tls_key_file = security.keyFile.toStdString();
  return out;
}

}  // namespace

std::shared_ptr<AnalyzerStub> makeStub(const QString& target, int maxBackoffMs,
                                       const ConnectionSecurity& security, QString* error,
                                       bool roundRobin) {
  rpc::ClientSecurity client = clientSecurity(security);
  auto token = rpc::ClientToken(security.tokenFile.toStdString());
  if (!token.ok()) {
    *error = QString::fromStdString(std::string(token.status().message()));
    return nullptr;
  }
  auto credentials = rpc::ChannelCredentialsFor(client);
  if (!credentials.ok()) {
    *error = QString::fromStdString(std::string(credentials.status().message()));
    return nullptr;
  }
  grpc::ChannelArguments args;
  if (roundRobin) args.SetServiceConfigJSON(R"({"loadBalancingConfig":[{"round_robin":{}}]})");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, maxBackoffMs);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  const auto channel =
      rpc::CreateChannelWithToken(target.toStdString(), *credentials, args, *token);
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

grpc::Status runEvaluateEviction(
    AnalyzerStub& stub, grpc::ClientContext* context, const v1::EvaluateEvictionRequest& request,
    const std::function<void(const v1::EvaluateEvictionEvent&)>& onEvent) {
  return drain<v1::EvaluateEvictionEvent>(stub.EvaluateEviction(context, request), onEvent);
}

grpc::Status runLens(AnalyzerStub& stub, grpc::ClientContext* context,
                     const v1::LensRequest& request,
                     const std::function<void(const v1::LensEvent&)>& onEvent) {
  return drain<v1::LensEvent>(stub.Lens(context, request), onEvent);
}

grpc::Status runPatch(AnalyzerStub& stub, grpc::ClientContext* context,
                      const v1::PatchRequest& request,
                      const std::function<void(const v1::PatchEvent&)>& onEvent) {
  return drain<v1::PatchEvent>(stub.Patch(context, request), onEvent);
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

QString describeConnectError(const grpc::Status& status, const ConnectionSecurity& security) {
  // The probe waits for the server (wait_for_ready), so a handshake that
  // keeps failing ends as DEADLINE_EXCEEDED rather than UNAVAILABLE.
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return describeStatus(status);
  }
  const absl::Status explained = rpc::ExplainTransportError(
      absl::UnavailableError(status.error_message()), clientSecurity(security));
  return describeStatus(grpc::Status(status.error_code(), std::string(explained.message())));
}

}  // namespace attnscope::dashboard
