#include "client/models/feed_rows.h"

#include <cmath>

#include "client/models/model_error.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

QString requestName(const QString& replica, const v1::FeedEvent& event) {
  if (replica.isEmpty()) return QStringLiteral("feed request %1").arg(event.request_id());
  return QStringLiteral("feed request %1 of %2").arg(event.request_id()).arg(replica);
}

QDateTime eventTime(const v1::FeedEvent& event) {
  if (event.unix_time() > 0 && std::isfinite(event.unix_time())) {
    return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(event.unix_time() * 1000.0));
  }
  return QDateTime::currentDateTime();
}

QString checkFinished(const v1::RequestFinished& f) {
  if (!std::isfinite(f.health()) || f.health() < 0.0 || f.health() > 10.0) {
    return QStringLiteral("health %1 outside 0..10").arg(f.health());
  }
  if (f.sink_count() < 0) return QStringLiteral("sink_count %1 < 0").arg(f.sink_count());
  if (f.prompt_tokens() < 0 || f.generated_tokens() < 0) {
    return QStringLiteral("negative token count (%1 prompt, %2 generated)")
        .arg(f.prompt_tokens())
        .arg(f.generated_tokens());
  }
  if (!std::isfinite(f.duration_seconds()) || f.duration_seconds() < 0.0) {
    return QStringLiteral("duration_seconds %1 is not a non-negative number")
        .arg(f.duration_seconds());
  }
  if (!std::isfinite(f.max_entropy())) return QStringLiteral("max_entropy is not finite");
  for (const double e : f.entropy_normalized()) {
    if (!std::isfinite(e)) return QStringLiteral("entropy_normalized has a non-finite value");
  }
  return QString();
}

void copyFinished(const v1::RequestFinished& f, FeedRow* row) {
  row->rpc = QString::fromStdString(f.rpc());
  row->model = QString::fromStdString(f.model());
  row->promptPreview = QString::fromStdString(f.prompt_preview());
  row->promptTokens = f.prompt_tokens();
  if (f.prompt_ids_size() > 0) row->promptIds = QVector<qint64>(f.prompt_ids().begin(), f.prompt_ids().end());
  row->generatedTokens = f.generated_tokens();
  row->status = QString::fromStdString(f.status());
  row->errorMessage = QString::fromStdString(f.error_message());
  row->state =
      row->status == QLatin1String("OK") ? FeedRow::State::Finished : FeedRow::State::Failed;
  if (row->rpc == QLatin1String("Analyze") && row->state == FeedRow::State::Finished) {
    row->health = f.health();
    row->sinkCount = f.sink_count();
  }
  // An eviction run computes no next-token entropy.
  row->maxEntropy = row->isEviction() ? qQNaN() : f.max_entropy();
  row->entropyNormalized =
      QVector<double>(f.entropy_normalized().begin(), f.entropy_normalized().end());
  row->durationSeconds = f.duration_seconds();
  if (f.has_options()) row->options = f.options();
  if (row->rpc == QLatin1String("Analyze") && row->state == FeedRow::State::Finished &&
      f.has_tokens() && f.has_summary()) {
    row->detail = std::make_shared<const v1::RequestFinished>(f);
  }
  if (f.eviction_policies_size() > 0) {
    row->evictionPolicies.clear();
    for (const std::string& policy : f.eviction_policies())
      row->evictionPolicies << QString::fromStdString(policy);
  }
  row->evictionPositions = QString::fromStdString(f.eviction_positions());
  row->evictionPerplexity.clear();
  for (const v1::EvictionPolicyResult& result : f.eviction().results())
    row->evictionPerplexity << result.perplexity();
  if (row->isEviction() && row->state == FeedRow::State::Finished &&
      f.eviction().results_size() > 0) {
    row->detail = std::make_shared<const v1::RequestFinished>(f);
  }
}

bool fromDashboard(const v1::FeedEvent& event) {
  switch (event.event_case()) {
    case v1::FeedEvent::kStarted:
      return event.started().origin() == v1::REQUEST_ORIGIN_DASHBOARD;
    case v1::FeedEvent::kFinished:
      return event.finished().origin() == v1::REQUEST_ORIGIN_DASHBOARD;
    default:
      return false;
  }
}

}  // namespace

bool FeedRows::apply(const QString& replica, const v1::FeedEvent& event, QString* error) {
  sessionOf(replica);
  if (event.dropped() > m_dropped.value(replica)) {
    m_dropped[replica] = event.dropped();
    if (m_listener != nullptr) m_listener->droppedChanged(droppedEvents());
  }
  if (fromDashboard(event)) {
    if (event.has_started()) ++m_dashboardRequests;
    return true;
  }
  switch (event.event_case()) {
    case v1::FeedEvent::kStarted:
      return applyStarted(replica, event, error);
    case v1::FeedEvent::kToken:
      return applyToken(replica, event, error);
    case v1::FeedEvent::kFinished:
      return applyFinished(replica, event, error);
    case v1::FeedEvent::EVENT_NOT_SET:
      break;
  }
  return fail(error, requestName(replica, event) + QStringLiteral(": event has no payload"));
}

bool FeedRows::applyStarted(const QString& replica, const v1::FeedEvent& event,
                             QString* error) {
  const quint64 session = sessionOf(replica);
  if (findRow(session, event.request_id()) >= 0) {
    return fail(error, requestName(replica, event) + QStringLiteral(": duplicate 'started'"));
  }
  const v1::RequestStarted& s = event.started();
  if (s.prompt_tokens() < 0) {
    return fail(error, requestName(replica, event) +
                           QStringLiteral(": prompt_tokens %1 < 0").arg(s.prompt_tokens()));
  }
  FeedRow row;
  row.session = session;
  row.requestId = event.request_id();
  row.replica = replica;
  row.time = eventTime(event);
  row.rpc = QString::fromStdString(s.rpc());
  row.model = QString::fromStdString(s.model());
  row.promptPreview = QString::fromStdString(s.prompt_preview());
  row.promptTokens = s.prompt_tokens();
  row.promptIds = QVector<qint64>(s.prompt_ids().begin(), s.prompt_ids().end());
  if (s.has_options()) row.options = s.options();
  for (const std::string& policy : s.eviction_policies())
    row.evictionPolicies << QString::fromStdString(policy);
  insertRow(std::move(row));
  return true;
}

bool FeedRows::applyToken(const QString& replica, const v1::FeedEvent& event, QString* error) {
  const int index = findRow(sessionOf(replica), event.request_id());
  if (index < 0) {
    return fail(error, requestName(replica, event) + QStringLiteral(": 'token' for an unknown request"));
  }
  FeedRow& row = m_rows[index];
  if (row.state != FeedRow::State::Running) {
    return fail(error, requestName(replica, event) + QStringLiteral(": 'token' after the request ended"));
  }
  const v1::TokenEntropy& t = event.token();
  const int expected = row.tokens.isEmpty() ? 0 : row.tokens.last().index + 1;
  if (t.index() < expected) {
    return fail(
        error, requestName(replica, event) +
                   QStringLiteral(": token index %1, expected >= %2").arg(t.index()).arg(expected));
  }
  if (!std::isfinite(t.entropy_normalized()) || !std::isfinite(t.entropy_nats())) {
    return fail(error, requestName(replica, event) + QStringLiteral(": token entropy is not finite"));
  }
  if (row.tokens.size() < kMaxTokensPerRow) {
    row.tokens.append(
        {t.index(), QString::fromStdString(t.text()), t.entropy_nats(), t.entropy_normalized()});
  }
  row.generatedTokens = t.index() + 1;
  rowChanged(index);
  return true;
}

bool FeedRows::applyFinished(const QString& replica, const v1::FeedEvent& event,
                              QString* error) {
  const QString problem = checkFinished(event.finished());
  if (!problem.isEmpty()) return fail(error, requestName(replica, event) + QStringLiteral(": ") + problem);
  const quint64 session = sessionOf(replica);
  const int index = findRow(session, event.request_id());
  if (index < 0) {
    // Started before we subscribed: the finish alone has everything.
    FeedRow row;
    row.session = session;
    row.requestId = event.request_id();
    row.replica = replica;
    row.time = eventTime(event);
    copyFinished(event.finished(), &row);
    insertRow(std::move(row));
    if (m_listener != nullptr) m_listener->requestEnded(0);
    return true;
  }
  FeedRow& row = m_rows[index];
  if (row.state != FeedRow::State::Running) {
    return fail(error, requestName(replica, event) + QStringLiteral(": duplicate 'finished'"));
  }
  copyFinished(event.finished(), &row);
  rowChanged(index);
  if (m_listener != nullptr) m_listener->requestEnded(index);
  return true;
}

quint64 FeedRows::sessionOf(const QString& replica) {
  auto it = m_sessions.find(replica);
  if (it != m_sessions.end()) return it.value();
  if (!replica.isEmpty()) m_replicas.append(replica);
  return m_sessions[replica] = ++m_lastSession;
}

quint64 FeedRows::droppedEvents() const {
  quint64 sum = 0;
  for (const quint64 dropped : m_dropped) sum += dropped;
  return sum;
}

void FeedRows::beginSession(const QString& replica) {
  sessionOf(replica);
  m_sessions[replica] = ++m_lastSession;
  if (m_dropped.value(replica) != 0) {
    m_dropped[replica] = 0;  // the new server counts from zero
    if (m_listener != nullptr) m_listener->droppedChanged(droppedEvents());
  }
  for (int i = 0; i < m_rows.size(); ++i) {
    if (m_rows[i].replica == replica && m_rows[i].state == FeedRow::State::Running) {
      m_rows[i].state = FeedRow::State::Lost;
      rowChanged(i);
    }
  }
}

void FeedRows::setMaxRows(int maxRows) {
  m_maxRows = qMax(1, maxRows);
  if (m_rows.size() > m_maxRows) {
    if (m_listener != nullptr) m_listener->aboutToRemoveRows(m_maxRows, size() - 1);
    m_rows.resize(m_maxRows);
    if (m_listener != nullptr) m_listener->rowsRemoved();
  }
}

const FeedRow* FeedRows::rowAt(int row) const {
  return row >= 0 && row < m_rows.size() ? &m_rows[row] : nullptr;
}

int FeedRows::findRow(quint64 session, quint64 requestId) const {
  // Replicas' rows interleave, so every row is looked at (at most maxRows).
  for (int i = 0; i < m_rows.size(); ++i) {
    if (m_rows[i].session == session && m_rows[i].requestId == requestId) return i;
  }
  return -1;
}

void FeedRows::insertRow(FeedRow row) {
  noteModel(row.model);
  if (m_rows.size() >= m_maxRows) {
    if (m_listener != nullptr) m_listener->aboutToRemoveRows(m_maxRows - 1, size() - 1);
    m_rows.resize(m_maxRows - 1);
    if (m_listener != nullptr) m_listener->rowsRemoved();
  }
  if (m_listener != nullptr) m_listener->aboutToInsertFirstRow();
  m_rows.prepend(std::move(row));
  if (m_listener != nullptr) m_listener->firstRowInserted();
  // Older rows keep their numbers but not their per-layer details.
  if (m_rows.size() > kMaxDetailedRows) m_rows[kMaxDetailedRows].detail.reset();
}

void FeedRows::noteModel(const QString& model) {
  if (model.isEmpty() || m_models.contains(model)) return;
  m_models.append(model);
  if (m_listener != nullptr) m_listener->newModel(model);
}

void FeedRows::rowChanged(int row) {
  if (m_listener != nullptr) m_listener->rowChanged(row);
}

}  // namespace attnscope::dashboard
