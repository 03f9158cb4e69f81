#include "client/connection/connection.h"

#include <QTimer>
#include <chrono>
#include <map>
#include <mutex>

#include "client/connection/stream_calls.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

void registerProtoMetaTypes() {
  qRegisterMetaType<v1::FeedEvent>();
  qRegisterMetaType<v1::AnalyzeEvent>();
  qRegisterMetaType<v1::GenerateEvent>();
  qRegisterMetaType<v1::ListModelsResponse>();
  qRegisterMetaType<Connection::State>();
}

// The current stub and every live call's context, so that any thread can
// cancel a call (ClientContext::TryCancel is thread-safe).
struct Connection::Calls {
  std::mutex mutex;
  std::shared_ptr<AnalyzerStub> stub;
  std::shared_ptr<grpc::ClientContext> probe;         // the attempt's ListModels
  std::shared_ptr<grpc::ClientContext> subscription;  // the attempt's Subscribe
  std::map<quint64, std::shared_ptr<grpc::ClientContext>> requests;
  ConnectionSecurity security;  // the attempt's, for its error hints

  std::shared_ptr<AnalyzerStub> currentStub() {
    std::lock_guard<std::mutex> lock(mutex);
    return stub;
  }
  std::shared_ptr<grpc::ClientContext> startRequest(quint64 tag, int timeoutMs) {
    auto context = std::make_shared<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeoutMs));
    std::lock_guard<std::mutex> lock(mutex);
    if (auto old = requests.find(tag); old != requests.end()) old->second->TryCancel();
    requests[tag] = context;
    return context;
  }
  void endRequest(quint64 tag, const grpc::ClientContext* context) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = requests.find(tag); it != requests.end() && it->second.get() == context) {
      requests.erase(it);
    }
  }
  void cancel(quint64 tag) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = requests.find(tag); it != requests.end()) it->second->TryCancel();
  }
  // Drops the stub and cancels the feed; requests too when `all`.
  void stop(bool all) {
    std::lock_guard<std::mutex> lock(mutex);
    stub.reset();
    if (probe) probe->TryCancel();
    if (subscription) subscription->TryCancel();
    probe.reset();
    subscription.reset();
    if (!all) return;
    for (auto& [tag, context] : requests) context->TryCancel();
  }
};

Connection::Connection(ConnectionOptions options, QObject* parent)
    : QObject(parent),
      m_options(options),
      m_backoff(options.initialBackoffMs, options.maxBackoffMs),
      m_retryTimer(new QTimer(this)),
      m_pool(new QThreadPool(this)),
      m_calls(std::make_shared<Calls>()) {
  registerProtoMetaTypes();
  // One thread stays on the feed; the others serve concurrent requests.
  m_pool->setMaxThreadCount(16);
  m_retryTimer->setSingleShot(true);
  connect(m_retryTimer, &QTimer::timeout, this, &Connection::startAttempt);
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

void Connection::setState(State state, const QString& detail) {
  m_state.store(int(state));
  Q_EMIT stateChanged(state, detail);
}

void Connection::stopCurrent() {
  ++m_generation;  // a stale feed's events and end are ignored from now on
  m_retryTimer->stop();
  m_calls->stop(false);
}

void Connection::connectTo(const QString& address) {
  stopCurrent();
  m_address = address.trimmed();
  m_backoff.reset();
  m_everConnected = false;
  if (m_address.isEmpty()) {
    setState(State::Disconnected, QStringLiteral("no server address"));
    return;
  }
  startAttempt();
}

void Connection::disconnectFromServer() {
  stopCurrent();
  m_address.clear();
  setState(State::Disconnected, QString());
}

void Connection::shutdown() {
  stopCurrent();
  m_address.clear();
  m_calls->stop(true);
  m_pool->waitForDone();
  m_state.store(int(State::Disconnected));
}

void Connection::startAttempt() {
  if (m_address.isEmpty()) return;
  const quint64 generation = ++m_generation;
  setState(m_everConnected ? State::Reconnecting : State::Connecting, m_address);
  QString error;
  auto stub = makeStub(m_address, m_options.maxBackoffMs, m_options.security, &error);
  if (!stub) {
    // A TLS or token file that cannot be read: retried like a server that
    // does not answer, so fixing the file is enough.
    QMetaObject::invokeMethod(
        this, [this, generation, error] { onSubscriptionEnded(generation, error); },
        Qt::QueuedConnection);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_calls->mutex);
    m_calls->stub = std::move(stub);
    m_calls->security = m_options.security;
    m_calls->probe = std::make_shared<grpc::ClientContext>();
    m_calls->subscription = std::make_shared<grpc::ClientContext>();
  }
  m_pool->start([this, generation] { runSubscription(generation); });
}

// On a pool thread: probe with ListModels, then read the feed until it ends.
void Connection::runSubscription(quint64 generation) {
  std::shared_ptr<AnalyzerStub> stub;
  std::shared_ptr<grpc::ClientContext> probeContext;
  std::shared_ptr<grpc::ClientContext> context;
  ConnectionSecurity security;
  {
    std::lock_guard<std::mutex> lock(m_calls->mutex);
    if (generation != m_generation.load()) return;  // superseded before it began
    stub = m_calls->stub;
    security = m_calls->security;
    probeContext = m_calls->probe;
    context = m_calls->subscription;
  }
  if (!stub || !probeContext || !context) return;
  const auto report = [this, generation](const QString& error) {
    QMetaObject::invokeMethod(
        this, [this, generation, error] { onSubscriptionEnded(generation, error); },
        Qt::QueuedConnection);
  };
  v1::ListModelsResponse models;
  const grpc::Status probe =
      listModels(*stub, probeContext.get(), m_options.probeTimeoutMs, &models);
  if (!probe.ok()) return report(describeConnectError(probe, security));
  v1::SubscribeRequest request;
  request.set_include_token_entropy(true);
  const grpc::Status status = runSubscribe(
      *stub, context.get(), request,
      [&] {
        QMetaObject::invokeMethod(
            this, [this, generation, models] { onSubscribed(generation, models); },
            Qt::QueuedConnection);
      },
      [&](const v1::FeedEvent& event) {
        if (generation == m_generation.load()) Q_EMIT feedEvent(event);
      });
  report(status.ok() ? QStringLiteral("the server ended the feed") : describeStatus(status));
}

void Connection::onSubscribed(quint64 generation, const v1::ListModelsResponse& models) {
  if (generation != m_generation.load()) return;
  m_backoff.reset();
  m_everConnected = true;
  setState(State::Connected, m_address);
  Q_EMIT modelsListed(models);
  Q_EMIT subscribed(++m_subscriptions);
}

void Connection::onSubscriptionEnded(quint64 generation, const QString& error) {
  if (generation != m_generation.load() || m_address.isEmpty()) return;
  const int delay = m_backoff.nextDelayMs();
  setState(m_everConnected ? State::Reconnecting : State::Connecting,
           QStringLiteral("%1 (retrying in %2 s)").arg(error).arg(delay / 1000.0, 0, 'f', 1));
  Q_EMIT reconnectScheduled(delay, m_backoff.attempts());
  m_retryTimer->start(delay);
}

void Connection::analyze(quint64 tag, const v1::AnalyzeRequest& request) {
  const std::shared_ptr<AnalyzerStub> stub = m_calls->currentStub();
  if (!stub) {
    Q_EMIT analyzeFinished(tag, false, QStringLiteral("not connected to a server"));
    return;
  }
  const auto context = m_calls->startRequest(tag, m_options.callTimeoutMs);
  const std::shared_ptr<Calls> calls = m_calls;
  m_pool->start([this, calls, stub, context, tag, request] {
    const grpc::Status status =
        runAnalyze(*stub, context.get(), request,
                   [&](const v1::AnalyzeEvent& e) { Q_EMIT analyzeEvent(tag, e); });
    calls->endRequest(tag, context.get());
    Q_EMIT analyzeFinished(tag, status.ok(), status.ok() ? QString() : describeStatus(status));
  });
}

void Connection::generate(quint64 tag, const v1::GenerateRequest& request) {
  const std::shared_ptr<AnalyzerStub> stub = m_calls->currentStub();
  if (!stub) {
    Q_EMIT generateFinished(tag, false, QStringLiteral("not connected to a server"));
    return;
  }
  const auto context = m_calls->startRequest(tag, m_options.callTimeoutMs);
  const std::shared_ptr<Calls> calls = m_calls;
  m_pool->start([this, calls, stub, context, tag, request] {
    const grpc::Status status =
        runGenerate(*stub, context.get(), request,
                    [&](const v1::GenerateEvent& e) { Q_EMIT generateEvent(tag, e); });
    calls->endRequest(tag, context.get());
    Q_EMIT generateFinished(tag, status.ok(), status.ok() ? QString() : describeStatus(status));
  });
}

void Connection::cancel(quint64 tag) { m_calls->cancel(tag); }

}  // namespace attnscope::dashboard
