#include "client/models/norm_bars_model.h"

#include <algorithm>
#include <cmath>

#include "client/models/token_labels.h"

namespace attnscope::dashboard {

NormBarsModel::NormBarsModel(QObject* parent) : QAbstractTableModel(parent) {}

void NormBarsModel::setAnalysis(PromptAnalysis* analysis) {
  if (m_analysis) disconnect(m_analysis, nullptr, this, nullptr);
  m_analysis = analysis;
  if (analysis != nullptr) {
    connect(analysis, &PromptAnalysis::cleared, this, &NormBarsModel::recompute);
    connect(analysis, &PromptAnalysis::tokensReady, this, &NormBarsModel::recompute);
    connect(analysis, &PromptAnalysis::layerAdded, this, &NormBarsModel::recompute);
    connect(analysis, &PromptAnalysis::summaryReady, this, &NormBarsModel::recompute);
  }
  recompute();
}

double NormBarsModel::lowerMedian(QVector<double> values) {
  if (values.isEmpty()) return qQNaN();
  const auto middle = values.begin() + (values.size() - 1) / 2;
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

QVector<double> NormBarsModel::normsFromLayers() const {
  QVector<double> norms;
  for (int l = 0; l < m_analysis->layerCount(); ++l) {
    const attnscope::v1::LayerStats* layer = m_analysis->layer(l);
    if (layer == nullptr || layer->hidden_state_norms_size() != m_analysis->tokenCount()) continue;
    if (norms.isEmpty()) norms.fill(0.0, m_analysis->tokenCount());
    for (int i = 0; i < norms.size(); ++i)
      norms[i] = std::max(norms[i], layer->hidden_state_norms(i));
  }
  return norms;
}

void NormBarsModel::recompute() {
  beginResetModel();
  m_norms.clear();
  if (m_analysis) {
    const attnscope::v1::Summary* summary = m_analysis->summary();
    if (summary != nullptr && summary->max_norm_size() == m_analysis->tokenCount()) {
      m_norms = QVector<double>(summary->max_norm().begin(), summary->max_norm().end());
    } else {
      m_norms = normsFromLayers();
    }
  }
  m_median = m_norms.size() > 1 ? lowerMedian(m_norms.mid(1)) : lowerMedian(m_norms);
  m_argmax =
      m_norms.isEmpty()
          ? -1
          : static_cast<int>(std::max_element(m_norms.begin(), m_norms.end()) - m_norms.begin());
  endResetModel();
  Q_EMIT normsChanged();
}

double NormBarsModel::ratio(int token) const {
  if (token < 0 || token >= m_norms.size() || !(m_median > 0.0)) return qQNaN();
  return m_norms[token] / m_median;
}

int NormBarsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_norms.size());
}

int NormBarsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant NormBarsModel::data(const QModelIndex& index, int role) const {
  const int row = index.row();
  if (row < 0 || row >= m_norms.size() || (role != Qt::DisplayRole && role != ValueRole)) return {};
  switch (index.column()) {
    case Token:
      return role == ValueRole ? QVariant(m_analysis->token(row).text)
                               : QVariant(positionedTokenLabel(row, m_analysis->token(row).text));
    case MaxNorm:
      return role == ValueRole ? QVariant(m_norms[row])
                               : QVariant(QString::number(m_norms[row], 'f', 1));
    case Ratio: {
      const double r = ratio(row);
      if (role == ValueRole) return r;
      return std::isnan(r) ? QString() : QStringLiteral("%1×").arg(r, 0, 'f', 1);
    }
    default:
      return {};
  }
}

QVariant NormBarsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Token:
      return QStringLiteral("Token");
    case MaxNorm:
      return QStringLiteral("Max norm");
    case Ratio:
      return QStringLiteral("× median");
    default:
      return {};
  }
}

}  // namespace attnscope::dashboard
