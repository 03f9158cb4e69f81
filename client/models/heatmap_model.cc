#include "client/models/heatmap_model.h"

#include <QFont>
#include <cmath>

#include "client/models/colors.h"
#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

// ".42" rather than "0.42": the cells are narrow.
QString shortWeight(double w) {
  if (w >= 0.995) return QStringLiteral("1");
  QString text = QString::number(w, 'f', 2);
  if (text.startsWith(QLatin1Char('0'))) text.remove(0, 1);
  return text;
}

}  // namespace

HeatmapModel::HeatmapModel(QObject* parent) : QAbstractTableModel(parent) {}

void HeatmapModel::setAnalysis(PromptAnalysis* analysis) {
  if (m_analysis) disconnect(m_analysis, nullptr, this, nullptr);
  m_analysis = analysis;
  if (analysis != nullptr) {
    connect(analysis, &PromptAnalysis::cleared, this, &HeatmapModel::refresh);
    connect(analysis, &PromptAnalysis::tokensReady, this, &HeatmapModel::refresh);
    connect(analysis, &PromptAnalysis::attentionReady, this, &HeatmapModel::onAttentionReady);
  }
  refresh();
}

void HeatmapModel::setHead(int layer, int head) {
  if (layer == m_layer && head == m_head) return;
  m_layer = layer;
  m_head = head;
  refresh();
  Q_EMIT headChanged(layer, head);
}

void HeatmapModel::setHighlightedRow(int row) {
  const int valid = row >= 0 && row < rowCount() ? row : -1;
  if (valid == m_highlightedRow) return;
  m_highlightedRow = valid;
  const int n = rowCount();
  if (n == 0) return;
  Q_EMIT dataChanged(index(0, 0), index(n - 1, n - 1));
  Q_EMIT headerDataChanged(Qt::Vertical, 0, n - 1);
  Q_EMIT headerDataChanged(Qt::Horizontal, 0, n - 1);
}

void HeatmapModel::setMaxLabelledTokens(int tokens) {
  m_maxLabelled = tokens;
  const int n = rowCount();
  if (n > 0) Q_EMIT dataChanged(index(0, 0), index(n - 1, n - 1), {Qt::DisplayRole});
}

void HeatmapModel::setScale(HeatScaleKind kind) {
  if (kind == m_scale.kind()) return;
  m_scale = HeatScale(kind);
  repaintCells();
  Q_EMIT scaleChanged();
}

void HeatmapModel::setRowNormalised(bool normalised) {
  if (normalised == m_rowNormalised) return;
  m_rowNormalised = normalised;
  repaintCells();
  Q_EMIT scaleChanged();
}

void HeatmapModel::repaintCells() {
  const int n = rowCount();
  if (n > 0) Q_EMIT dataChanged(index(0, 0), index(n - 1, n - 1));
}

void HeatmapModel::onAttentionReady(int layer, int head) {
  if (layer != m_layer || head != m_head) return;
  m_rowMax.clear();
  repaintCells();
}

void HeatmapModel::refresh() {
  beginResetModel();
  m_highlightedRow = -1;
  m_rowMax.clear();
  endResetModel();
}

const QVector<float>* HeatmapModel::weights() const {
  return m_analysis ? m_analysis->attention(m_layer, m_head) : nullptr;
}

double HeatmapModel::weight(int row, int column) const {
  const QVector<float>* w = weights();
  return w == nullptr ? 0.0 : (*w)[row * rowCount() + column];
}

double HeatmapModel::rowMax(int row) const {
  const QVector<float>* w = weights();
  const int n = rowCount();
  if (w == nullptr || row < 0 || row >= n) return 0.0;
  if (m_rowMax.size() != n) m_rowMax.fill(-1.0, n);
  // Keys after the query are masked: the row's maximum is over 0..row.
  if (m_rowMax[row] < 0.0) m_rowMax[row] = rowMaximum(w->constData() + qsizetype(row) * n, row + 1);
  return m_rowMax[row];
}

double HeatmapModel::scaled(int row, double w) const {
  return m_scale.position(m_rowNormalised ? normalisedByRow(w, rowMax(row)) : w);
}

bool HeatmapModel::isRead(int key) const {
  if (m_highlightedRow < 0 || key > m_highlightedRow || !hasWeights()) return false;
  return weight(m_highlightedRow, key) >= kReadThreshold;
}

int HeatmapModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !m_analysis) return 0;
  return m_analysis->tokenCount();
}

int HeatmapModel::columnCount(const QModelIndex& parent) const { return rowCount(parent); }

QVariant HeatmapModel::data(const QModelIndex& index, int role) const {
  const int n = rowCount();
  const int row = index.row();
  const int column = index.column();
  if (!hasWeights() || row < 0 || column < 0 || row >= n || column >= n || column > row) return {};
  const double w = weight(row, column);
  switch (role) {
    case WeightRole:
      return w;
    case ScaledRole:
      return scaled(row, w);
    case Qt::DisplayRole:
      return n <= m_maxLabelled && w >= 0.005 ? QVariant(shortWeight(w)) : QVariant();
    case Qt::BackgroundRole:
      return cellBackground(row, w);
    case Qt::ForegroundRole:
      return textColorOn(cellBackground(row, w).value<QColor>());
    case Qt::TextAlignmentRole:
      return Qt::AlignCenter;
    case Qt::ToolTipRole:
      return cellToolTip(row, column, w);
    default:
      return {};
  }
}

QVariant HeatmapModel::cellBackground(int row, double w) const {
  const double t = scaled(row, w);
  const QColor color = std::isnan(t) ? HeatScale::missingColor() : heatColor(t);
  if (m_highlightedRow >= 0 && row != m_highlightedRow) return faded(color, 0.7);
  return color;
}

QVariant HeatmapModel::cellToolTip(int row, int column, double w) const {
  QString text = QStringLiteral("query %1 reads key %2: %3")
                     .arg(positionedTokenLabel(row, m_analysis->token(row).text, 24),
                          positionedTokenLabel(column, m_analysis->token(column).text, 24))
                     .arg(w, 0, 'g', 4);
  const double top = rowMax(row);
  if (m_rowNormalised && top > 0.0) {
    text += QStringLiteral(" (%1 of the row's peak)").arg(w / top, 0, 'f', 3);
  }
  return text;
}

QVariant HeatmapModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (section < 0 || section >= rowCount()) return {};
  const QString& text = m_analysis->token(section).text;
  const bool marked = orientation == Qt::Vertical ? section == m_highlightedRow : isRead(section);
  switch (role) {
    case Qt::DisplayRole:
      return orientation == Qt::Vertical ? positionedTokenLabel(section, text)
                                         : visibleTokenText(text);
    case Qt::ToolTipRole:
      return positionedTokenLabel(section, text, 60);
    case IsReadRole:
      return marked;
    case Qt::FontRole: {
      if (!marked) return {};
      QFont font;
      font.setBold(true);
      return font;
    }
    case Qt::ForegroundRole:
      return marked ? QVariant(QColor(0x08, 0x30, 0x6b)) : QVariant();
    default:
      return {};
  }
}

}  // namespace attnscope::dashboard
