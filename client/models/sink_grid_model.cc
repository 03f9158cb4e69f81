#include "client/models/sink_grid_model.h"

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

QString statLine(const char* name, const google::protobuf::RepeatedField<double>& values,
                 int head) {
  if (head >= values.size()) return QString();
  return QStringLiteral("\n%1: %2").arg(QLatin1String(name)).arg(values.Get(head), 0, 'f', 3);
}

}  // namespace

SinkGridModel::SinkGridModel(QObject* parent) : QAbstractTableModel(parent) {}

void SinkGridModel::setAnalysis(PromptAnalysis* analysis) {
  if (m_analysis) disconnect(m_analysis, nullptr, this, nullptr);
  m_analysis = analysis;
  if (analysis != nullptr) {
    connect(analysis, &PromptAnalysis::cleared, this, &SinkGridModel::refresh);
    connect(analysis, &PromptAnalysis::layerAdded, this, &SinkGridModel::onLayerAdded);
  }
  refresh();
}

void SinkGridModel::refresh() {
  beginResetModel();
  m_rows = m_analysis ? m_analysis->layerCount() : 0;
  m_columns = m_analysis ? m_analysis->headCount() : 0;
  endResetModel();
}

void SinkGridModel::onLayerAdded(int layer) {
  if (m_analysis->headCount() != m_columns) {
    refresh();
    return;
  }
  if (layer >= m_rows) {
    beginInsertRows(QModelIndex(), m_rows, layer);
    m_rows = layer + 1;
    endInsertRows();
  }
  Q_EMIT dataChanged(index(layer, 0), index(layer, m_columns - 1));
}

int SinkGridModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : m_rows;
}

int SinkGridModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : m_columns;
}

QVariant SinkGridModel::data(const QModelIndex& index, int role) const {
  if (!m_analysis || index.row() < 0 || index.row() >= m_rows || index.column() < 0 ||
      index.column() >= m_columns) {
    return {};
  }
  const attnscope::v1::LayerStats* layer = m_analysis->layer(index.row());
  if (layer == nullptr || index.column() >= layer->sink_score_size()) return {};
  const double score = layer->sink_score(index.column());
  switch (role) {
    case ValueRole:
      return score;
    case Qt::DisplayRole:
      return m_labelled ? QVariant(QString::number(score, 'f', 2)) : QVariant();
    case Qt::BackgroundRole:
      return cellColor(*layer, index.column());
    case Qt::ForegroundRole:
      return textColorOn(cellColor(*layer, index.column()));
    case Qt::TextAlignmentRole:
      return Qt::AlignCenter;
    case Qt::ToolTipRole:
      return toolTip(index.row(), index.column());
    default:
      return {};
  }
}

QString SinkGridModel::toolTip(int layer, int head) const {
  const attnscope::v1::LayerStats& stats = *m_analysis->layer(layer);
  return QStringLiteral("layer %1, head %2 (click to open)").arg(layer).arg(head) +
         statLine("sink score", stats.sink_score(), head) +
         statLine("first-token mass", stats.first_token_mass(), head) +
         statLine("attention entropy (nats)", stats.attention_entropy(), head) +
         statLine("previous-token score", stats.prev_token_score(), head) +
         statLine("value-weighted first-token share", stats.value_weighted_first_token_share(),
                  head);
}

void SinkGridModel::setLabelled(bool labelled) {
  if (labelled == m_labelled) return;
  m_labelled = labelled;
  if (m_rows > 0 && m_columns > 0) {
    Q_EMIT dataChanged(index(0, 0), index(m_rows - 1, m_columns - 1), {Qt::DisplayRole});
  }
  if (m_columns > 0) Q_EMIT headerDataChanged(Qt::Horizontal, 0, m_columns - 1);
  if (m_rows > 0) Q_EMIT headerDataChanged(Qt::Vertical, 0, m_rows - 1);
}

QColor SinkGridModel::cellColor(const attnscope::v1::LayerStats& layer, int head) const {
  const double score = layer.sink_score(head);
  if (!m_rowNormalised) return m_scale.color(score);
  double peak = 0.0;
  for (const double s : layer.sink_score()) {
    if (s > peak) peak = s;  // NaN never wins
  }
  return m_scale.color(normalisedByRow(score, peak));
}

void SinkGridModel::colorsChanged() {
  if (m_rows > 0 && m_columns > 0) {
    Q_EMIT dataChanged(index(0, 0), index(m_rows - 1, m_columns - 1),
                       {Qt::BackgroundRole, Qt::ForegroundRole});
  }
}

void SinkGridModel::setScale(HeatScaleKind kind) {
  if (kind == m_scale.kind()) return;
  m_scale = HeatScale(kind);
  colorsChanged();
}

void SinkGridModel::setRowNormalised(bool normalised) {
  if (normalised == m_rowNormalised) return;
  m_rowNormalised = normalised;
  colorsChanged();
}

void SinkGridModel::setHeadLabelStep(int step) {
  step = qMax(1, step);
  if (step == m_headLabelStep) return;
  m_headLabelStep = step;
  if (m_columns > 0) Q_EMIT headerDataChanged(Qt::Horizontal, 0, m_columns - 1);
}

QVariant SinkGridModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (section < 0) return {};
  const bool vertical = orientation == Qt::Vertical;
  if (section >= (vertical ? m_rows : m_columns)) return {};
  if (role == Qt::ToolTipRole) {
    return (vertical ? QStringLiteral("layer %1") : QStringLiteral("head %1")).arg(section);
  }
  if (role != Qt::DisplayRole) return {};
  if (!m_labelled) {
    return vertical || section % m_headLabelStep == 0 ? QVariant(QString::number(section))
                                                      : QVariant();
  }
  return (vertical ? QStringLiteral("L%1") : QStringLiteral("H%1")).arg(section);
}

}  // namespace attnscope::dashboard
