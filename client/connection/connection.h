// The dashboard's link to one attnscope-server: the live feed (Subscribe),
// kept alive across server restarts, and the Analyze/Generate requests the
// user makes. Everything that can block runs off the GUI thread; results
// arrive as signals.
#pragma once

#include <QObject>
#include <QString>
#include <QThreadPool>
#include <atomic>
#include <memory>

#include "attnscope/v1/attnscope.pb.h"
#include "client/connection/proto_metatypes.h"
#include "client/connection/reconnect_backoff.h"

class QTimer;

namespace attnscope::dashboard {

// TLS and the bearer token of a connection, as file paths (what the
// dashboard persists). The token is read from tokenFile at every attempt
// (a rotated token is picked up on reconnect) and never kept in settings;
// without tokenFile, $ATTNSCOPE_TOKEN is sent when set. All empty: plaintext.
struct ConnectionSecurity {
  QString caFile;     // PEM CA that signs the server's certificate: TLS on
  QString certFile;   // PEM client certificate for mutual TLS
  QString keyFile;    // its PEM private key
  QString tokenFile;  // first line: the bearer token

  bool operator==(const ConnectionSecurity& other) const {
    return caFile == other.caFile && certFile == other.certFile && keyFile == other.keyFile &&
           tokenFile == other.tokenFile;
  }
  bool operator!=(const ConnectionSecurity& other) const { return !(*this == other); }
};

struct ConnectionOptions {
  int initialBackoffMs = 250;  // first reconnect delay, doubled per failure
  int maxBackoffMs = 8000;     // cap on that delay
  int probeTimeoutMs = 3000;   // how long one attempt waits for the server
  int callTimeoutMs = 120000;  // deadline of an Analyze or Generate call
  ConnectionSecurity security;  // changed later with setSecurity
};

// Lives on a worker QThread: call its slots through queued connections or
// QMetaObject::invokeMethod. Each gRPC stream runs on a thread of its own
// pool, so a long Analyze never delays the feed or another request. Signals
// are emitted from those threads; connect them to GUI objects (queued).
//
// States: Disconnected (no address) -> Connecting (first attempts) ->
// Connected (ListModels answered and Subscribe started) -> Reconnecting (the
// feed ended: the server went away) -> Connected again after a back-off of
// initialBackoffMs, doubled per failed attempt up to maxBackoffMs. Every
// (re)subscription emits subscribed(n).
class Connection : public QObject {
  Q_OBJECT

 public:
  enum class State { Disconnected, Connecting, Connected, Reconnecting };
  Q_ENUM(State)

  explicit Connection(ConnectionOptions options = {}, QObject* parent = nullptr);
  // Cancels every call and waits for the pool threads.
  ~Connection() override;

  // TLS and token for the following connectTo calls (call it on the
  // connection's thread, like the slots). A file that cannot be read makes
  // each attempt fail with the reason in stateChanged's detail.
  void setSecurity(const ConnectionSecurity& security) { m_options.security = security; }

  // Thread-safe.
  State state() const { return static_cast<State>(m_state.load()); }
  static QString stateName(State state);

 public Q_SLOTS:
  // Connects to host:port, dropping any current connection.
  void connectTo(const QString& address);
  void disconnectFromServer();
  // Starts a call identified by `tag` (the caller's choice). Its events and
  // its end (ok, or the gRPC status as "CODE: message") arrive as signals.
  // Without a server: an immediate failure.
  void analyze(quint64 tag, const attnscope::v1::AnalyzeRequest& request);
  void generate(quint64 tag, const attnscope::v1::GenerateRequest& request);
  // Cancels the call; it ends with CANCELLED.
  void cancel(quint64 tag);
  // Cancels everything and waits; call before stopping the worker thread.
  void shutdown();

 Q_SIGNALS:
  void stateChanged(attnscope::dashboard::Connection::State state, const QString& detail);
  void modelsListed(const attnscope::v1::ListModelsResponse& models);
  // The feed (re)started: 1 for the first subscription, 2 after the first
  // reconnect, and so on. Request ids restart with a restarted server.
  void subscribed(int subscription);
  void feedEvent(const attnscope::v1::FeedEvent& event);
  void reconnectScheduled(int delayMs, int attempt);
  void analyzeEvent(quint64 tag, const attnscope::v1::AnalyzeEvent& event);
  void analyzeFinished(quint64 tag, bool ok, const QString& error);
  void generateEvent(quint64 tag, const attnscope::v1::GenerateEvent& event);
  void generateFinished(quint64 tag, bool ok, const QString& error);

 private:
  struct Calls;  // gRPC stubs and contexts, shared with the pool threads

  void startAttempt();
  void runSubscription(quint64 generation);
  void onSubscribed(quint64 generation, const attnscope::v1::ListModelsResponse& models);
  void onSubscriptionEnded(quint64 generation, const QString& error);
  void setState(State state, const QString& detail);
  void stopCurrent();

  ConnectionOptions m_options;
  QString m_address;
  ReconnectBackoff m_backoff;
  QTimer* m_retryTimer;
  QThreadPool* m_pool;  // a child, so it moves to the worker thread with us
  std::shared_ptr<Calls> m_calls;
  std::atomic<int> m_state{int(State::Disconnected)};
  std::atomic<quint64> m_generation{0};
  bool m_everConnected = false;
  int m_subscriptions = 0;
};

}  // namespace attnscope::dashboard
