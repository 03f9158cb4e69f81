#include "client/models/feed_model.h"

#include <cmath>

#include "client/models/colors.h"
#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

QString formatDuration(double seconds) {
  if (std::isnan(seconds)) return QString();
  if (seconds < 1.0) return QStringLiteral("%1 ms").arg(seconds * 1000.0, 0, 'f', 0);
  return QStringLiteral("%1 s").arg(seconds, 0, 'f', 2);
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

void FeedModel::aboutToRemoveRows(int first, int last) { beginRemoveRows(QModelIndex(), first, last); }
void FeedModel::rowsRemoved() { endRemoveRows(); }
void FeedModel::aboutToInsertFirstRow() { beginInsertRows(QModelIndex(), 0, 0); }
void FeedModel::firstRowInserted() { endInsertRows(); }
void FeedModel::rowChanged(int row) { Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1)); }

int FeedModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : m_rows.size();
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
