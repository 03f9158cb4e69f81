// The one place where absl statuses and gRPC statuses meet (house style:
// only the rpc layer maps statuses to gRPC codes).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace attnscope::rpc {

// Server side: InvalidArgument/OutOfRange -> INVALID_ARGUMENT, NotFound ->
// NOT_FOUND, ResourceExhausted -> RESOURCE_EXHAUSTED, DeadlineExceeded ->
// DEADLINE_EXCEEDED, Cancelled -> CANCELLED, Unavailable (shutting down) ->
// UNAVAILABLE, Unauthenticated -> UNAUTHENTICATED, OK -> OK, everything
// else -> INTERNAL. The message is kept verbatim.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "CANCELLED", "INVALID_ARGUMENT", ... (the names Prometheus labels and
// the feed's RequestFinished.status use).
std::string GrpcCodeName(grpc::StatusCode code);

// Client side: the same code, and the message "CODE_NAME: message" so that a
// user sees which gRPC status the server answered.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace attnscope::rpc
