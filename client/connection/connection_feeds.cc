// Connection: the target resolved into replicas and one live feed per
// replica, each with its own reconnect back-off.
#include <QTimer>

#include "client/connection/connection.h"
#include "client/connection/connection_internal.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

void Connection::stopFeeds() {
  ++m_targetGeneration;  // a lookup still running is dropped when it ends
  m_resolveTimer->stop();
  m_resolving = false;
  m_resolveAgain = false;
  m_feeds.clear();  // cancels every attempt and stops every retry timer
  m_order.clear();
  m_idleReported = false;
}

void Connection::resolve() {
  if (m_target.isEmpty()) return;
  if (m_resolving) {
    m_resolveAgain = true;
    return;
  }
  if (!targetNeedsLookup(m_target)) {
    onResolved(m_targetGeneration, resolveTarget(m_target));  // no lookup: nothing blocks
    return;
  }
  m_resolving = true;
  ++m_tasks;
  const quint64 generation = m_targetGeneration;
  const QString target = m_target;
  const auto lookUp = m_options.resolver ? m_options.resolver : resolveTarget;
  m_pool->start([this, generation, target, lookUp] {
    const ResolvedTarget resolved = lookUp(target);  // getaddrinfo blocks
    QMetaObject::invokeMethod(
        this,
        [this, generation, resolved] {
          if (generation == m_targetGeneration) m_resolving = false;
          onResolved(generation, resolved);
          onTaskEnded();
        },
        Qt::QueuedConnection);
  });
}

void Connection::onResolved(quint64 targetGeneration, const ResolvedTarget& resolved) {
  if (targetGeneration != m_targetGeneration || m_target.isEmpty()) return;
  if (!resolved.error.isEmpty()) {
    m_resolveError = resolved.error;
    // A failed lookup keeps the replicas already known; with none, retry.
    if (m_feeds.empty()) {
      const int delay = m_resolveBackoff.nextDelayMs();
      m_resolveTimer->start(delay);
      Q_EMIT reconnectScheduled(delay, m_resolveBackoff.attempts(), QString());
    }
    updateOverallState();
    return;
  }
  m_resolveError.clear();
  m_resolveBackoff.reset();
  reconcile(resolved.replicas);
  if (m_resolveAgain) {
    m_resolveAgain = false;
    resolve();
  }
}

void Connection::reconcile(const QList<Replica>& replicas) {
  QStringList labels;
  for (const Replica& replica : replicas) labels << replica.label;
  const bool changed = m_order != labels;  // before removeFeed() edits m_order
  for (const QString& label : QStringList(m_order)) {
    if (!labels.contains(label)) removeFeed(label);
  }
  for (const Replica& replica : replicas) {
    auto it = m_feeds.find(replica.label);
    if (it != m_feeds.end() && it->second->replica == replica) continue;
    if (it != m_feeds.end()) removeFeed(replica.label);
    auto feed = std::make_unique<Feed>(replica, m_options);
    const QString label = replica.label;
    connect(&feed->retryTimer, &QTimer::timeout, this, [this, label] { startAttempt(label); });
    m_feeds[label] = std::move(feed);
  }
  m_order = labels;
  m_pool->setMaxThreadCount(16 + int(m_feeds.size()));
  if (changed) Q_EMIT replicasResolved(m_order);
  for (const QString& label : m_order) {
    Feed* feed = m_feeds[label].get();
    if (!feed->attempt && !feed->retryTimer.isActive()) startAttempt(label);
  }
  updateOverallState();
}

void Connection::removeFeed(const QString& label) {
  m_feeds.erase(label);
  m_order.removeAll(label);
}

void Connection::startAttempt(const QString& label) {
  auto it = m_feeds.find(label);
  if (it == m_feeds.end()) return;
  Feed* feed = it->second.get();
  auto attempt = std::make_shared<Attempt>();
  attempt->id = ++m_nextAttempt;
  attempt->label = label;
  QString error;
  attempt->stub = makeStub(feed->replica.channelTarget, m_options.maxBackoffMs,
                           m_options.security, &error);
  attempt->security = m_options.security;
  feed->attempt = attempt;
  ++m_attemptsStarted;
  setFeedState(feed, feed->everConnected ? State::Reconnecting : State::Connecting, label);
  ++m_tasks;
  if (!attempt->stub) {
    // A TLS or token file that cannot be read: retried like a server that
    // does not answer, so fixing the file is enough.
    const quint64 id = attempt->id;
    QMetaObject::invokeMethod(
        this,
        [this, label, id, error] {
          onFeedEnded(label, id, error);
          onTaskEnded();
        },
        Qt::QueuedConnection);
    return;
  }
  m_pool->start([this, attempt] { runFeed(attempt); });
}

// On a pool thread: probe with ListModels, then read the feed until it ends.
void Connection::runFeed(std::shared_ptr<Attempt> attempt) {
  const QString label = attempt->label;
  const quint64 id = attempt->id;
  const auto report = [this, label, id](const QString& error) {
    QMetaObject::invokeMethod(
        this,
        [this, label, id, error] {
          onFeedEnded(label, id, error);
          onTaskEnded();
        },
        Qt::QueuedConnection);
  };
  v1::ListModelsResponse models;
  const grpc::Status probe =
      listModels(*attempt->stub, &attempt->probe, m_options.probeTimeoutMs, &models);
  if (!probe.ok()) return report(describeConnectError(probe, attempt->security));
  v1::SubscribeRequest request;
  request.set_include_token_entropy(true);
  const grpc::Status status = runSubscribe(
      *attempt->stub, &attempt->subscription, request,
      [&] {
        QMetaObject::invokeMethod(
            this, [this, label, id, models] { onFeedSubscribed(label, id, models); },
            Qt::QueuedConnection);
      },
      [&](const v1::FeedEvent& event) {
        if (attempt->live) Q_EMIT feedEvent(event, label);
      });
  report(status.ok() ? QStringLiteral("the server ended the feed") : describeStatus(status));
}

void Connection::onFeedSubscribed(const QString& label, quint64 attempt,
                                  const v1::ListModelsResponse& models) {
  auto it = m_feeds.find(label);
  if (it == m_feeds.end() || !it->second->attempt || it->second->attempt->id != attempt) return;
  Feed* feed = it->second.get();
  feed->backoff.reset();
  feed->everConnected = true;
  m_everConnected = true;
  setFeedState(feed, State::Connected, label);
  Q_EMIT modelsListed(models);
  Q_EMIT subscribed(++m_subscriptions, label);
}

void Connection::onFeedEnded(const QString& label, quint64 attempt, const QString& error) {
  auto it = m_feeds.find(label);
  if (it == m_feeds.end() || !it->second->attempt || it->second->attempt->id != attempt) return;
  Feed* feed = it->second.get();
  feed->attempt.reset();
  const int delay = feed->backoff.nextDelayMs();
  setFeedState(feed, feed->everConnected ? State::Reconnecting : State::Connecting,
               QStringLiteral("%1 (retrying in %2 s)").arg(error).arg(delay / 1000.0, 0, 'f', 1));
  Q_EMIT reconnectScheduled(delay, feed->backoff.attempts(), label);
  feed->retryTimer.start(delay);
  // The replica may be gone for good (scaled down): look the name up again.
  if (targetNeedsLookup(m_target)) resolve();
}

void Connection::setFeedState(Feed* feed, State state, const QString& detail) {
  feed->state = state;
  feed->detail = detail;
  Q_EMIT replicaStateChanged(feed->replica.label, state, detail);
  updateOverallState();
}

void Connection::updateOverallState() {
  if (m_target.isEmpty()) return;
  int connected = 0;
  const Feed* problem = nullptr;
  for (const QString& label : m_order) {
    const Feed* feed = m_feeds[label].get();
    if (feed->state == State::Connected) {
      ++connected;
    } else if (problem == nullptr) {
      problem = feed;
    }
  }
  const int replicas = int(m_order.size());
  State state = m_everConnected ? State::Reconnecting : State::Connecting;
  if (replicas > 0 && connected == replicas) state = State::Connected;
  QString detail;
  if (replicas == 0) {
    detail = m_resolveError.isEmpty() ? m_target : m_resolveError;
  } else if (replicas == 1) {
    detail = m_feeds[m_order.first()]->detail;
  } else {
    detail = tr("%1 of %2 replicas connected · %3").arg(connected).arg(replicas).arg(m_target);
    if (problem != nullptr) detail += QStringLiteral(" · %1: %2").arg(problem->replica.label, problem->detail);
  }
  if (state == this->state() && detail == m_lastDetail) return;
  m_state.store(int(state));
  m_lastDetail = detail;
  Q_EMIT stateChanged(state, detail);
}

void Connection::onTaskEnded() {
  --m_tasks;
  checkIdle();
}

void Connection::checkIdle() {
  if (m_idleReported || !m_target.isEmpty() || m_tasks > 0 || !m_feeds.empty() ||
      m_resolveTimer->isActive()) {
    return;
  }
  m_idleReported = true;
  Q_EMIT idle();
}

}  // namespace attnscope::dashboard
