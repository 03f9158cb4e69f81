// Connection's per-replica feed state, shared by connection.cc and
// connection_feeds.cc. Not part of the client's interface.
#pragma once

#include <grpcpp/grpcpp.h>

#include <QTimer>
#include <atomic>
#include <memory>

#include "client/connection/connection.h"
#include "client/connection/stream_calls.h"

namespace attnscope::dashboard {

// One attempt to subscribe to one replica, shared with the pool thread that
// runs it: cancelling its contexts (thread-safe) ends the attempt, and once
// `live` is false it emits nothing more.
struct Connection::Attempt {
  quint64 id = 0;  // unique over all replicas
  QString label;
  std::shared_ptr<AnalyzerStub> stub;
  ConnectionSecurity security;       // the attempt's, for its error hints
  grpc::ClientContext probe;         // the attempt's ListModels
  grpc::ClientContext subscription;  // the attempt's Subscribe
  std::atomic<bool> live{true};

  void cancel() {
    live = false;
    probe.TryCancel();
    subscription.TryCancel();
  }
};

// One replica's feed; lives on the connection thread.
struct Connection::Feed {
  Feed(Replica r, const ConnectionOptions& options)
      : replica(std::move(r)), backoff(options.initialBackoffMs, options.maxBackoffMs) {
    retryTimer.setSingleShot(true);
  }
  ~Feed() {
    if (attempt) attempt->cancel();
  }

  Replica replica;
  ReconnectBackoff backoff;
  QTimer retryTimer;
  State state = State::Connecting;
  QString detail;
  bool everConnected = false;
  std::shared_ptr<Attempt> attempt;  // the current one; null between attempts
};

}  // namespace attnscope::dashboard
