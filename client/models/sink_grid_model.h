// The layer x head grid of sink scores (A[l,h,T-1,0]) of one prompt.
#pragma once

#include <QAbstractTableModel>
#include <QPointer>

#include "client/models/heat_scale.h"
#include "client/models/prompt_analysis.h"

namespace attnscope::dashboard {

// Rows are layers (up to the highest layer received), columns heads. A cell
// holds the head's sink score (ValueRole, DisplayRole with two decimals,
// BackgroundRole the colour scale's colour: HeatScale, linear by default); layers that have not arrived are blank. The
// tooltip lists the head's other statistics. Rows grow as layer events arrive.
// Unlabelled (setLabelled(false), for grids too dense to print two decimals
// in a cell, e.g. 12 x 12 in a narrow panel or Llama's 32 x 32), cells are
// colour only (no DisplayRole; the value stays in ValueRole and the
// tooltip) and the headers are bare numbers.
class SinkGridModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Role { ValueRole = Qt::UserRole + 1 };

  explicit SinkGridModel(QObject* parent = nullptr);

  // The analysis to show (not owned; may be nullptr).
  void setAnalysis(PromptAnalysis* analysis);
  // Whether cells print their value (default true).
  void setLabelled(bool labelled);
  bool isLabelled() const { return m_labelled; }
  // Unlabelled grids name every step-th head in the horizontal header (the
  // others are blank, their names in the tooltip), so that narrow columns'
  // numbers do not run into each other. Default 1.
  void setHeadLabelStep(int step);
  // The colour scale of the cells (the heatmap's choice: small scores of
  // long prompts show under √ and log).
  void setScale(attnscope::dashboard::HeatScaleKind kind);
  HeatScaleKind scale() const { return m_scale.kind(); }
  // Per-row normalisation, as in the heatmap: each layer's scores are
  // coloured relative to that layer's highest (at thousands of tokens the
  // scores can all sit below the log scale's floor).
  void setRowNormalised(bool normalised);
  bool isRowNormalised() const { return m_rowNormalised; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  void onLayerAdded(int layer);
  void refresh();
  QString toolTip(int layer, int head) const;
  QColor cellColor(const attnscope::v1::LayerStats& layer, int head) const;
  void colorsChanged();

  QPointer<PromptAnalysis> m_analysis;
  int m_rows = 0;
  int m_columns = 0;
  bool m_labelled = true;
  int m_headLabelStep = 1;
  HeatScale m_scale;
  bool m_rowNormalised = false;
};

}  // namespace attnscope::dashboard
