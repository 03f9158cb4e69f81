#include "client/models/feed_model.h"

#include <cmath>

#include "client/models/colors.h"
#include "client/models/model_error.h"
#include "client/models/token_labels.h"

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

QString formatDuration(double seconds) {
  if (std::isnan(seconds)) return QString();
  if (seconds < 1.0) return QStringLiteral("%1 ms").arg(seconds * 1000.0, 0, 'f', 0);
  return QStringLiteral("%1 s").arg(seconds, 0, 'f', 2);
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

// "full 5.21, window:32 9.80" once finished, "full, window:32" before.
QString evictionLine(const FeedRow& row) {
  QStringList parts;
  for (int i = 0; i < row.evictionPolicies.size(); ++i) {
    parts << (i < row.evictionPerplexity.size()
                  ? QStringLiteral("%1 %2").arg(row.evictionPolicies[i]).arg(
                        row.evictionPerplexity[i], 0, 'f', 2)
                  : row.evictionPolicies[i]);
  }
  return parts.join(QStringLiteral(", "));
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

QString stateText(const FeedRow& row) {
  switch (row.state) {
    case FeedRow::State::Running:
      return QStringLiteral("running");
    case FeedRow::State::Lost:
      return QStringLiteral("lost");
    case FeedRow::State::Failed:
      return row.status;
    case FeedRow::State::Finished:
      break;
  }
  return QString();
}

}  // namespace

FeedModel::FeedModel(QObject* parent) : QAbstractTableModel(parent) {}

bool FeedModel::apply(const QString& replica, const v1::FeedEvent& event, QString* error) {
  sessionOf(replica);
  if (event.dropped() > m_dropped.value(replica)) {
    m_dropped[replica] = event.dropped();
    Q_EMIT droppedEventsChanged(droppedEvents());
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

bool FeedModel::applyStarted(const QString& replica, const v1::FeedEvent& event,
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

bool FeedModel::applyToken(const QString& replica, const v1::FeedEvent& event, QString* error) {
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
  emitRowChanged(index);
  return true;
}

bool FeedModel::applyFinished(const QString& replica, const v1::FeedEvent& event,
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
    Q_EMIT requestFinished(0);
    return true;
  }
  FeedRow& row = m_rows[index];
  if (row.state != FeedRow::State::Running) {
    return fail(error, requestName(replica, event) + QStringLiteral(": duplicate 'finished'"));
  }
  copyFinished(event.finished(), &row);
  emitRowChanged(index);
  Q_EMIT requestFinished(index);
  return true;
}

quint64 FeedModel::sessionOf(const QString& replica) {
  auto it = m_sessions.find(replica);
  if (it != m_sessions.end()) return it.value();
  if (!replica.isEmpty()) m_replicas.append(replica);
  return m_sessions[replica] = ++m_lastSession;
}

quint64 FeedModel::droppedEvents() const {
  quint64 sum = 0;
  for (const quint64 dropped : m_dropped) sum += dropped;
  return sum;
}

void FeedModel::beginSession(const QString& replica) {
  sessionOf(replica);
  m_sessions[replica] = ++m_lastSession;
  if (m_dropped.value(replica) != 0) {
    m_dropped[replica] = 0;  // the new server counts from zero
    Q_EMIT droppedEventsChanged(droppedEvents());
  }
  for (int i = 0; i < m_rows.size(); ++i) {
    if (m_rows[i].replica == replica && m_rows[i].state == FeedRow::State::Running) {
      m_rows[i].state = FeedRow::State::Lost;
      emitRowChanged(i);
    }
  }
}

void FeedModel::setMaxRows(int maxRows) {
  m_maxRows = qMax(1, maxRows);
  if (m_rows.size() > m_maxRows) {
    beginRemoveRows(QModelIndex(), m_maxRows, m_rows.size() - 1);
    m_rows.resize(m_maxRows);
    endRemoveRows();
  }
}

const FeedRow* FeedModel::rowAt(int row) const {
  return row >= 0 && row < m_rows.size() ? &m_rows[row] : nullptr;
}

int FeedModel::findRow(quint64 session, quint64 requestId) const {
  // Replicas' rows interleave, so every row is looked at (at most maxRows).
  for (int i = 0; i < m_rows.size(); ++i) {
    if (m_rows[i].session == session && m_rows[i].requestId == requestId) return i;
  }
  return -1;
}

void FeedModel::insertRow(FeedRow row) {
  noteModel(row.model);
  if (m_rows.size() >= m_maxRows) {
    beginRemoveRows(QModelIndex(), m_maxRows - 1, m_rows.size() - 1);
    m_rows.resize(m_maxRows - 1);
    endRemoveRows();
  }
  beginInsertRows(QModelIndex(), 0, 0);
  m_rows.prepend(std::move(row));
  endInsertRows();
  // Older rows keep their numbers but not their per-layer details.
  if (m_rows.size() > kMaxDetailedRows) m_rows[kMaxDetailedRows].detail.reset();
}

void FeedModel::noteModel(const QString& model) {
  if (model.isEmpty() || m_models.contains(model)) return;
  m_models.append(model);
  Q_EMIT modelSeen(model);
}

void FeedModel::emitRowChanged(int row) {
  Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

int FeedModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int FeedModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant FeedModel::data(const QModelIndex& index, int role) const {
  const FeedRow* row = rowAt(index.row());
  if (row == nullptr || index.column() < 0 || index.column() >= ColumnCount) return {};
  switch (role) {
    case Qt::DisplayRole:
      return displayData(*row, index.column());
    case Qt::BackgroundRole:
      return backgroundData(*row, index.column());
    case Qt::ToolTipRole:
      return toolTipData(*row);
    case Qt::TextAlignmentRole:
      return index.column() >= Tokens ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    case HealthLevelRole:
      return std::isnan(row->health) ? QVariant() : QVariant(int(healthLevel(row->health)));
    case RowStateRole:
      return int(row->state);
    case RequestIdRole:
      return row->requestId;
    case PromptPreviewRole:
      return row->promptPreview;
    case ModelRole:
      return row->model;
    case ReplicaRole:
      return row->replica;
    case SortRole:
      return sortData(*row, index.column());
    default:
      return {};
  }
}

QVariant FeedModel::displayData(const FeedRow& row, int column) const {
  switch (column) {
    case Time:
      return row.time.toString(QStringLiteral("HH:mm:ss"));
    case Replica:
      return row.replica;
    case Rpc:
      return row.rpc;
    case Model:
      return row.model;
    case Prompt:
      // A request turned away before its prompt was read says why instead.
      if (row.promptPreview.isEmpty() && row.state == FeedRow::State::Failed) {
        return QStringLiteral("(%1) %2").arg(row.status, row.errorMessage);
      }
      // An eviction run leads with its policies (and their perplexities).
      if (row.isEviction() && !row.evictionPolicies.isEmpty()) {
        return QStringLiteral("[%1] %2").arg(evictionLine(row),
                                             promptPreviewLine(row.promptPreview));
      }
      return promptPreviewLine(row.promptPreview);
    case Tokens:
      return row.rpc == QLatin1String("Generate")
                 ? QStringLiteral("%1 + %2").arg(row.promptTokens).arg(row.generatedTokens)
                 : QString::number(row.promptTokens);
    case Health:
      return std::isnan(row.health) ? stateText(row) : QString::number(row.health, 'f', 1);
    case Sinks:
      return row.sinkCount < 0 ? QVariant() : QVariant(row.sinkCount);
    case MaxEntropy:
      return std::isnan(row.maxEntropy) ? QString() : QString::number(row.maxEntropy, 'f', 2);
    case Duration:
      return formatDuration(row.durationSeconds);
    default:
      return {};
  }
}

QVariant FeedModel::sortData(const FeedRow& row, int column) const {
  switch (column) {
    case Time:
      return row.time;
    case Tokens:
      return row.promptTokens + row.generatedTokens;
    case Health:
      return row.health;
    case Sinks:
      return row.sinkCount;
    case MaxEntropy:
      return row.maxEntropy;
    case Duration:
      return row.durationSeconds;
    default:
      return displayData(row, column);
  }
}

QVariant FeedModel::backgroundData(const FeedRow& row, int column) const {
  if (column == Health && !std::isnan(row.health)) return healthTint(healthLevel(row.health));
  if (row.state == FeedRow::State::Failed && (column == Health || column == Prompt)) {
    return healthTint(HealthLevel::Red);
  }
  if (column == MaxEntropy && !std::isnan(row.maxEntropy)) {
    return faded(entropyBucketColor(entropyBucket(row.maxEntropy)), 0.8);
  }
  return {};
}

QVariant FeedModel::toolTipData(const FeedRow& row) const {
  QString tip = QStringLiteral("%1 #%2 on %3").arg(row.rpc).arg(row.requestId).arg(row.model);
  if (!row.replica.isEmpty()) tip += QStringLiteral(", replica %1").arg(row.replica);
  if (row.isEviction() && !row.evictionPolicies.isEmpty()) {
    tip += row.evictionPerplexity.isEmpty() ? QStringLiteral("\npolicies: ")
                                            : QStringLiteral("\nperplexity: ");
    tip += evictionLine(row);
    if (!row.evictionPositions.isEmpty())
      tip += QStringLiteral(" (%1 positions)").arg(row.evictionPositions);
  }
  tip += QStringLiteral("\n") + row.promptPreview;
  if (!row.errorMessage.isEmpty())
    tip += QStringLiteral("\n%1: %2").arg(row.status, row.errorMessage);
  return tip;
}

QVariant FeedModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  static const char* const kTitles[ColumnCount] = {"Time",   "Replica", "RPC",   "Model",
                                                   "Prompt", "Tokens",  "Health", "Sinks",
                                                   "Max H",  "Duration"};
  static const char* const kTips[ColumnCount] = {
      "When the request started",
      "The replica that served it (its address behind the target)",
      "Analyze, Generate or EvaluateEviction",
      "The model that served it",
      "The first 80 characters of the prompt (EvaluateEviction: after its policies "
      "and their perplexities)",
      "Prompt tokens (+ generated tokens)",
      "Context health, 0..10: green >= 7, amber >= 4, red below",
      "Anomalous sinks: non-structural tokens with z above the threshold",
      "Highest normalized next-token entropy (H / log V)",
      "From receipt to the last event"};
  if (role == Qt::DisplayRole) return QString::fromLatin1(kTitles[section]);
  if (role == Qt::ToolTipRole) return QString::fromLatin1(kTips[section]);
  return {};
}

}  // namespace attnscope::dashboard
