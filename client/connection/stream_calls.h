// The blocking gRPC calls the dashboard makes, each run on a pool thread by
// Connection. With connection.cc, the only code of the client that sees gRPC.
#pragma once

#include <grpcpp/grpcpp.h>

#include <QString>
#include <functional>
#include <memory>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "client/connection/connection.h"

namespace attnscope::dashboard {

using AnalyzerStub = attnscope::v1::Analyzer::Stub;

// A channel to a gRPC target (host:port, dns:///host:port, ipv4:a:p,b:p, ...)
// that retries a lost connection within maxBackoffMs (gRPC's own default
// waits up to two minutes) and accepts messages up to 64 MiB. Each call gets
// its own subchannel pool, so a new channel starts connecting at once instead
// of inheriting an old channel's back-off. With `security`'s TLS files and
// bearer token (see ConnectionSecurity); nullptr with the reason in *error
// when one of its files cannot be read. roundRobin: gRPC's round_robin
// policy spreads calls over every address the target resolves to (else
// pick_first: one address).
std::shared_ptr<AnalyzerStub> makeStub(const QString& target, int maxBackoffMs,
                                       const ConnectionSecurity& security, QString* error,
                                       bool roundRobin = false);

// "UNAVAILABLE: failed to connect" for a failed status, "OK" otherwise.
QString describeStatus(const grpc::Status& status);
// describeStatus, plus a hint about TLS for a failure to connect
// (UNAVAILABLE, or DEADLINE_EXCEEDED of a probe that waited for the server):
// a plaintext client to a TLS server, a certificate the CA does not sign.
QString describeConnectError(const grpc::Status& status, const ConnectionSecurity& security);

// ListModels, waiting up to timeoutMs for the server to be reachable.
// `context` must be fresh; it may be cancelled from another thread.
grpc::Status listModels(AnalyzerStub& stub, grpc::ClientContext* context, int timeoutMs,
                        attnscope::v1::ListModelsResponse* models);

// Server-streaming calls: onEvent runs on the calling thread for each event,
// in order; the call ends when the stream does or when `context` is
// cancelled (ClientContext::TryCancel, from any thread). Returns the
// stream's final status.
grpc::Status runAnalyze(AnalyzerStub& stub, grpc::ClientContext* context,
                        const attnscope::v1::AnalyzeRequest& request,
                        const std::function<void(const attnscope::v1::AnalyzeEvent&)>& onEvent);
grpc::Status runGenerate(AnalyzerStub& stub, grpc::ClientContext* context,
                         const attnscope::v1::GenerateRequest& request,
                         const std::function<void(const attnscope::v1::GenerateEvent&)>& onEvent);
grpc::Status runEvaluateEviction(
    AnalyzerStub& stub, grpc::ClientContext* context,
    const attnscope::v1::EvaluateEvictionRequest& request,
    const std::function<void(const attnscope::v1::EvaluateEvictionEvent&)>& onEvent);
grpc::Status runLens(AnalyzerStub& stub, grpc::ClientContext* context,
                     const attnscope::v1::LensRequest& request,
                     const std::function<void(const attnscope::v1::LensEvent&)>& onEvent);
grpc::Status runPatch(AnalyzerStub& stub, grpc::ClientContext* context,
                      const attnscope::v1::PatchRequest& request,
                      const std::function<void(const attnscope::v1::PatchEvent&)>& onEvent);
// onStarted runs once the server has acknowledged the subscription (sent its
// initial metadata), before the first event.
grpc::Status runSubscribe(AnalyzerStub& stub, grpc::ClientContext* context,
                          const attnscope::v1::SubscribeRequest& request,
                          const std::function<void()>& onStarted,
                          const std::function<void(const attnscope::v1::FeedEvent&)>& onEvent);

}  // namespace attnscope::dashboard
