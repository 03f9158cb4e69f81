// Everything about one prompt: health and sinks, the attention heatmap of a
// chosen head, the layer x head sink grid, the norm bars and the entropy line.
#pragma once

#include <QWidget>

#include "client/models/entropy_series.h"
#include "client/models/heatmap_model.h"
#include "client/models/norm_bars_model.h"
#include "client/models/prompt_analysis.h"
#include "client/models/sink_grid_model.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;
class QSplitter;
class QTableView;

namespace attnscope::dashboard {

class ColorBar;
class EntropyChart;
class HeatmapView;
class NormChart;
class PromptSummaryPanel;

class PromptView : public QWidget {
  Q_OBJECT

 public:
  explicit PromptView(QWidget* parent = nullptr);

  // The analysis to show (not owned); the view follows its signals.
  void setAnalysis(PromptAnalysis* analysis);
  void setEntropy(const EntropySeries& series);
  void setNote(const QString& note, bool isError = false);

  HeatmapModel* heatmapModel() const { return m_heatmap; }
  SinkGridModel* sinkGridModel() const { return m_sinkGrid; }
  NormBarsModel* normModel() const { return m_norms; }
  PromptSummaryPanel* summaryPanel() const { return m_summary; }
  QTableView* sinkGridView() const { return m_sinkGridView; }
  HeatmapView* heatmapView() const { return m_heatmapView; }
  NormChart* normChart() const { return m_normChart; }
  // The heatmap's colour scale (linear, √, log), its per-row normalisation,
  // and the two legends (colour bars with values).
  QComboBox* scaleCombo() const { return m_scaleCombo; }
  QCheckBox* rowNormaliseCheck() const { return m_rowNormalise; }
  ColorBar* heatmapLegend() const { return m_heatmapLegend; }
  ColorBar* sinkGridLegend() const { return m_sinkGridLegend; }
  EntropyChart* entropyChart() const { return m_entropyChart; }
  // The splitters whose state the main window persists.
  QList<QSplitter*> splitters() const { return {m_vertical, m_grids, m_charts}; }

 public Q_SLOTS:
  // Shows head (layer, head) in the heatmap.
  void openHead(int layer, int head);

 Q_SIGNALS:
  // The heatmap now shows (layer, head): fetch its weights if missing.
  void headShown(int layer, int head);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  // Cells print their values only where two decimals fit; denser grids
  // (12 x 12 in a narrow panel, 32 x 32) are colour only with small numeric
  // headers, and never cut columns off.
  void fitSinkGrid();
  QWidget* buildHeatmapPanel();
  QWidget* buildSinkGridPanel();
  void onLayerAdded();
  void updateHeatmapCaption();
  void updateColourScale();

  PromptAnalysis* m_analysis = nullptr;
  HeatmapModel* m_heatmap;
  SinkGridModel* m_sinkGrid;
  NormBarsModel* m_norms;
  PromptSummaryPanel* m_summary;
  HeatmapView* m_heatmapView = nullptr;
  QTableView* m_sinkGridView = nullptr;
  NormChart* m_normChart;
  EntropyChart* m_entropyChart;
  QSpinBox* m_layer = nullptr;
  QSpinBox* m_head = nullptr;
  QLabel* m_heatmapCaption = nullptr;
  QComboBox* m_scaleCombo = nullptr;
  QCheckBox* m_rowNormalise = nullptr;
  ColorBar* m_heatmapLegend = nullptr;
  ColorBar* m_sinkGridLegend = nullptr;
  QSplitter* m_vertical;
  QSplitter* m_grids;
  QSplitter* m_charts;
};

}  // namespace attnscope::dashboard
