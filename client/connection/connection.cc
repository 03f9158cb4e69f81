// Connection: its lifetime and the user's requests (round_robin over the
// whole target). The feeds, one per replica, are in connection_feeds.cc.
#include "client/connection/connection.h"

#include <QTimer>
#include <chrono>
#include <mutex>

#include "client/connection/connection_internal.h"
#include "client/connection/stream_calls.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

void registerProtoMetaTypes() {
  qRegisterMetaType<v1::FeedEvent>();
  qRegisterMetaType<v1::AnalyzeEvent>();
  qRegisterMetaType<v1::GenerateEvent>();
  qRegisterMetaType<v1::EvaluateEvictionEvent>();
  qRegisterMetaType<v1::LensEvent>();
  qRegisterMetaType<v1::PatchEvent>();
  qRegisterMetaType<v1::ListModelsResponse>();
  qRegisterMetaType<Connection::State>();
}

// The requests' stub and every live call's context, so that any thread can
// cancel a call (ClientContext::TryCancel is thread-safe).
struct Connection::Requests {
  std::mutex mutex;
  std::shared_ptr<AnalyzerStub> stub;  // round_robin over the target; null without one
  std::map<quint64, std::shared_ptr<grpc::ClientContext>> calls;

  std::shared_ptr<AnalyzerStub> currentStub() {
    std::lock_guard<std::mutex> lock(mutex);
    return stub;
  }
  void setStub(std::shared_ptr<AnalyzerStub> next) {
    std::lock_guard<std::mutex> lock(mutex);
    stub = std::move(next);
  }
  std::shared_ptr<grpc::ClientContext> start(quint64 tag, int timeoutMs) {
    auto context = std::make_shared<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeoutMs));
    std::lock_guard<std::mutex> lock(mutex);
    if (auto old = calls.find(tag); old != calls.end()) old->second->TryCancel();
    calls[tag] = context;
    return context;
  }
  void end(quint64 tag, const grpc::ClientContext* context) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = calls.find(tag); it != calls.end() && it->second.get() == context) {
      calls.erase(it);
    }
  }
  void cancel(quint64 tag) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = calls.find(tag); it != calls.end()) it->second->TryCancel();
  }
  void cancelAll() {
    std::lock_guard<std::mutex> lock(mutex);
    stub.reset();
    for (auto& [tag, context] : calls) context->TryCancel();
  }
};

Connection::Connection(ConnectionOptions options, QObject* parent)
    : QObject(parent),
      m_options(options),
      m_resolveBackoff(options.initialBackoffMs, options.maxBackoffMs),
      m_resolveTimer(new QTimer(this)),
      m_pool(new QThreadPool(this)),
      m_requests(std::make_shared<Requests>()) {
  registerProtoMetaTypes();
  // One thread per replica stays on its feed; 16 more serve requests.
  m_pool->setMaxThreadCount(16);
  m_resolveTimer->setSingleShot(true);
  connect(m_resolveTimer, &QTimer::timeout, this, &Connection::resolve);
}

Connection::~Connection() { shutdown(); }

QString Connection::stateName(State state) {
  switch (state) {
    case State::Disconnected:
      return QStringLiteral("Disconnected");
    case State::Connecting:
      return QStringLiteral("Connecting");
    case State::Connected:
      return QStringLiteral("Connected");
    case State::Reconnecting:
      return QStringLiteral("Reconnecting");
  }
  return QString();
}

void Connection::connectTo(const QString& target) {
  stopFeeds();
  m_target = target.trimmed();
  m_everConnected = false;
  m_resolveBackoff.reset();
  m_resolveError.clear();
  m_lastDetail = m_target;
  if (m_target.isEmpty()) {
    m_requests->setStub(nullptr);
    m_state.store(int(State::Disconnected));
    Q_EMIT stateChanged(State::Disconnected, QStringLiteral("no server address"));
    return;
  }
  // A TLS or token file that cannot be read leaves no stub: requests say
  // "not connected" and every replica's feed shows the reason as it retries.
  QString error;
  m_requests->setStub(
      makeStub(m_target, m_options.maxBackoffMs, m_options.security, &error, /*roundRobin=*/true));
  m_state.store(int(State::Connecting));
  Q_EMIT stateChanged(State::Connecting, m_target);
  resolve();
}

void Connection::disconnectFromServer() {
  stopFeeds();
  m_target.clear();
  m_requests->setStub(nullptr);
  m_state.store(int(State::Disconnected));
  Q_EMIT stateChanged(State::Disconnected, QString());
  checkIdle();  // at once when nothing was running
}

void Connection::shutdown() {
  stopFeeds();
  m_target.clear();
  m_requests->cancelAll();
  m_pool->waitForDone();
  m_state.store(int(State::Disconnected));
}

template <typename Request, typename Event, typename Run>
void Connection::startCall(quint64 tag, const Request& request, Run run,
                           void (Connection::*onEvent)(quint64, const Event&),
                           void (Connection::*onFinished)(quint64, bool, const QString&)) {
  const std::shared_ptr<AnalyzerStub> stub = m_requests->currentStub();
  if (!stub) {
    Q_EMIT(this->*onFinished)(tag, false, QStringLiteral("not connected to a server"));
    return;
  }
  const auto context = m_requests->start(tag, m_options.callTimeoutMs);
  const std::shared_ptr<Requests> requests = m_requests;
  m_pool->start([this, requests, stub, context, tag, request, run, onEvent, onFinished] {
    const grpc::Status status = run(*stub, context.get(), request, [&](const Event& e) {
      Q_EMIT(this->*onEvent)(tag, e);
    });
    requests->end(tag, context.get());
    Q_EMIT(this->*onFinished)(tag, status.ok(), status.ok() ? QString() : describeStatus(status));
  });
}

void Connection::analyze(quint64 tag, const v1::AnalyzeRequest& request) {
  startCall(tag, request, runAnalyze, &Connection::analyzeEvent, &Connection::analyzeFinished);
}

void Connection::generate(quint64 tag, const v1::GenerateRequest& request) {
  startCall(tag, request, runGenerate, &Connection::generateEvent, &Connection::generateFinished);
}

void Connection::evaluateEviction(quint64 tag, const v1::EvaluateEvictionRequest& request) {
  startCall(tag, request, runEvaluateEviction, &Connection::evictionEvent,
            &Connection::evictionFinished);
}

void Connection::lens(quint64 tag, const v1::LensRequest& request) {
  startCall(tag, request, runLens, &Connection::lensEvent, &Connection::lensFinished);
}

void Connection::patch(quint64 tag, const v1::PatchRequest& request) {
  startCall(tag, request, runPatch, &Connection::patchEvent, &Connection::patchFinished);
}

void Connection::cancel(quint64 tag) { m_requests->cancel(tag); }

}  // namespace attnscope::dashboard
