// The attention heatmap of one head: a table whose rows are queries and
// whose columns are keys, read from a PromptAnalysis.
#pragma once

#include <QAbstractTableModel>
#include <QPointer>

#include "client/models/heat_scale.h"
#include "client/models/prompt_analysis.h"

namespace attnscope::dashboard {

// T x T cells for the chosen (layer, head); A[l,h,i,j] at row i, column j.
// Cells above the diagonal (j > i, keys a query cannot see) are blank for
// every role. Headers are the token texts with whitespace made visible.
// Until that head's tensor has arrived, cells are blank too.
//
// Roles: WeightRole (double, as received), ScaledRole (the cell's position
// on the colour scale in [0, 1]: the weight, over its row's maximum when
// rows are normalised, through the scale; NaN for a NaN weight),
// DisplayRole (the weight with two decimals, only when T <=
// maxLabelledTokens() and the weight >= 0.005), BackgroundRole (the scale's
// colour, faded outside the highlighted row), ForegroundRole, ToolTipRole. With a highlighted row, the header of that row and of each key
// it gives at least kReadThreshold of its attention is bold (FontRole) and
// reports true for IsReadRole.
class HeatmapModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Role { WeightRole = Qt::UserRole + 1, IsReadRole, ScaledRole };
  static constexpr double kReadThreshold = 0.1;

  explicit HeatmapModel(QObject* parent = nullptr);

  // The analysis to show (not owned; may be nullptr).
  void setAnalysis(PromptAnalysis* analysis);
  int layer() const { return m_layer; }
  int head() const { return m_head; }
  // True once the chosen head's tensor is available.
  bool hasWeights() const { return weights() != nullptr; }
  int highlightedRow() const { return m_highlightedRow; }
  int maxLabelledTokens() const { return m_maxLabelled; }
  HeatScaleKind scale() const { return m_scale.kind(); }
  bool isRowNormalised() const { return m_rowNormalised; }

 public Q_SLOTS:
  void setHead(int layer, int head);
  // -1: no highlight.
  void setHighlightedRow(int row);
  void setMaxLabelledTokens(int tokens);
  // The colour scale (default linear) and per-row normalisation (default
  // off: each row divided by its largest weight, so that a diffuse row's
  // peak is as dark as a sharp one's). Both repaint every cell.
  void setScale(attnscope::dashboard::HeatScaleKind kind);
  void setRowNormalised(bool normalised);

 public:
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 Q_SIGNALS:
  void headChanged(int layer, int head);
  void scaleChanged();

 private:
  const QVector<float>* weights() const;
  double weight(int row, int column) const;
  double scaled(int row, double w) const;
  double rowMax(int row) const;
  void repaintCells();
  bool isRead(int key) const;
  QVariant cellBackground(int row, double w) const;
  QVariant cellToolTip(int row, int column, double w) const;
  void onAttentionReady(int layer, int head);
  void refresh();

  QPointer<PromptAnalysis> m_analysis;
  int m_layer = 0;
  int m_head = 0;
  int m_highlightedRow = -1;
  int m_maxLabelled = 16;
  HeatScale m_scale;
  bool m_rowNormalised = false;
  mutable QVector<double> m_rowMax;  // per row, -1 until computed; cleared with the weights
};

}  // namespace attnscope::dashboard
