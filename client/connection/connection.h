// The dashboard's link to attnscope: one server or several replicas behind a
// gRPC target. The live feed merges one Subscribe stream per replica, each
// kept alive across that replica's restarts; the Analyze, Generate,
// EvaluateEviction, Lens and Patch requests the user makes go to the whole target through
// gRPC's round_robin policy.
// Everything that can block runs off the GUI thread; results arrive as
// signals.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <functional>
#include <map>
#include <memory>
#include <atomic>

#include "attnscope/v1/attnscope.pb.h"
#include "client/connection/proto_metatypes.h"
#include "client/connection/reconnect_backoff.h"
#include "client/connection/target.h"

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
  int callTimeoutMs = 120000;  // deadline of an Analyze, Generate, EvaluateEviction, Lens or Patch call
  // Looks up dns: targets (empty: resolveTarget, i.e. getaddrinfo). Runs on
  // a pool thread. Tests give one whose answers change, as a scaled
  // Deployment's DNS does.
  std::function<ResolvedTarget(const QString& target)> resolver;
  ConnectionSecurity security;  // changed later with setSecurity
};

// Lives on a worker QThread: call its slots through queued connections or
// QMetaObject::invokeMethod. Each gRPC stream runs on a thread of its own
// pool, so a long Analyze never delays the feed or another request. Signals
// are emitted from those threads; connect them to GUI objects (queued).
//
// The target (see target.h) is resolved into replicas: an ipv4:/ipv6: list
// as given, dns: with getaddrinfo, again each time a replica's feed ends (a
// scaled Deployment gains and loses addresses), host:port as one replica.
// Each replica's feed goes Connecting (first attempts) -> Connected
// (ListModels answered and Subscribe acknowledged) -> Reconnecting (its feed
// ended) -> Connected again after a back-off of initialBackoffMs, doubled
// per failed attempt up to maxBackoffMs, independently of the others.
// The overall state: Disconnected without a target; Connected when every
// replica's feed is; else Reconnecting once any has been connected, else
// Connecting.
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
  // Feed attempts started so far (one per replica per (re)connection try).
  // Thread-safe.
  int attemptsStarted() const { return m_attemptsStarted.load(); }
  static QString stateName(State state);

 public Q_SLOTS:
  // Connects to a target (see target.h), dropping any current connection.
  void connectTo(const QString& target);
  void disconnectFromServer();
  // Starts a call identified by `tag` (the caller's choice), sent to the
  // target with round_robin. Its events and its end (ok, or the gRPC status
  // as "CODE: message") arrive as signals. Without a target: an immediate
  // failure.
  void analyze(quint64 tag, const attnscope::v1::AnalyzeRequest& request);
  void generate(quint64 tag, const attnscope::v1::GenerateRequest& request);
  void evaluateEviction(quint64 tag, const attnscope::v1::EvaluateEvictionRequest& request);
  void lens(quint64 tag, const attnscope::v1::LensRequest& request);
  void patch(quint64 tag, const attnscope::v1::PatchRequest& request);
  // Cancels the call; it ends with CANCELLED.
  void cancel(quint64 tag);
  // Cancels everything and waits; call before stopping the worker thread.
  void shutdown();

 Q_SIGNALS:
  // The overall state; detail: the replica's address or its error for one
  // replica, "2 of 3 replicas connected · ..." for several.
  void stateChanged(attnscope::dashboard::Connection::State state, const QString& detail);
  // The replicas the target resolved to (labels), after every resolution
  // that changed them.
  void replicasResolved(const QStringList& replicas);
  void replicaStateChanged(const QString& replica,
                           attnscope::dashboard::Connection::State state, const QString& detail);
  void modelsListed(const attnscope::v1::ListModelsResponse& models);
  // A replica's feed (re)started. `subscription` counts over all replicas:
  // 1..n for the first subscriptions of n replicas, +1 per reconnect.
  // Request ids restart with a restarted replica.
  void subscribed(int subscription, const QString& replica);
  void feedEvent(const attnscope::v1::FeedEvent& event, const QString& replica);
  void reconnectScheduled(int delayMs, int attempt, const QString& replica);
  // Nothing of the feed runs or is scheduled (no replica, no attempt, no
  // lookup, no timer): emitted after disconnectFromServer() once the last
  // feed call has returned. Nothing starts again until connectTo().
  void idle();
  void analyzeEvent(quint64 tag, const attnscope::v1::AnalyzeEvent& event);
  void analyzeFinished(quint64 tag, bool ok, const QString& error);
  void generateEvent(quint64 tag, const attnscope::v1::GenerateEvent& event);
  void generateFinished(quint64 tag, bool ok, const QString& error);
  void evictionEvent(quint64 tag, const attnscope::v1::EvaluateEvictionEvent& event);
  void evictionFinished(quint64 tag, bool ok, const QString& error);
  void lensEvent(quint64 tag, const attnscope::v1::LensEvent& event);
  void lensFinished(quint64 tag, bool ok, const QString& error);
  void patchEvent(quint64 tag, const attnscope::v1::PatchEvent& event);
  void patchFinished(quint64 tag, bool ok, const QString& error);

 private:
  struct Requests;  // the round_robin stub and every live call's context
  struct Attempt;   // one feed attempt's stub and contexts, shared with its thread
  struct Feed;      // one replica's feed

  // Runs one server-streaming call on the pool: `run` reads the stream,
  // `onEvent` and `onFinished` are the call's signals.
  template <typename Request, typename Event, typename Run>
  void startCall(quint64 tag, const Request& request, Run run,
                 void (Connection::*onEvent)(quint64, const Event&),
                 void (Connection::*onFinished)(quint64, bool, const QString&));

  // connection_feeds.cc: resolution and one feed per replica.
  void resolve();
  void onResolved(quint64 targetGeneration, const ResolvedTarget& resolved);
  void reconcile(const QList<Replica>& replicas);
  void removeFeed(const QString& label);
  void startAttempt(const QString& label);
  void runFeed(std::shared_ptr<Attempt> attempt);
  void onFeedSubscribed(const QString& label, quint64 attempt,
                        const attnscope::v1::ListModelsResponse& models);
  void onFeedEnded(const QString& label, quint64 attempt, const QString& error);
  void setFeedState(Feed* feed, State state, const QString& detail);
  void updateOverallState();
  void onTaskEnded();  // a feed or lookup task has returned
  void checkIdle();    // emits idle() once nothing of the feed is left
  void stopFeeds();

  ConnectionOptions m_options;
  QString m_target;
  quint64 m_targetGeneration = 0;  // bumped by connectTo/disconnect: stale lookups are dropped
  std::map<QString, std::unique_ptr<Feed>> m_feeds;  // by replica label
  QStringList m_order;                              // labels in resolution order
  ReconnectBackoff m_resolveBackoff;
  QTimer* m_resolveTimer;  // retries a failed lookup
  bool m_resolving = false;
  bool m_resolveAgain = false;  // a feed ended while a lookup was running
  QString m_resolveError;
  int m_tasks = 0;  // feed and lookup tasks on the pool (connection thread only)
  bool m_idleReported = true;
  QThreadPool* m_pool;  // a child, so it moves to the worker thread with us
  std::shared_ptr<Requests> m_requests;
  std::atomic<int> m_state{int(State::Disconnected)};
  std::atomic<int> m_attemptsStarted{0};
  quint64 m_nextAttempt = 0;
  bool m_everConnected = false;
  int m_subscriptions = 0;
  QString m_lastDetail;
};

}  // namespace attnscope::dashboard
