// The attention heatmap widget: a table over a HeatmapModel with token
// labels on both axes (keys' labels rotated) and hover highlighting.
#pragma once

#include <QTableView>

#include "client/models/heatmap_model.h"

namespace attnscope::dashboard {

// Hovering a cell or a row header highlights that query's row in the model
// (what that token reads); leaving the view clears it. Cells are square:
// wide enough for the printed weights on small prompts, narrower on long ones.
class HeatmapView : public QTableView {
  Q_OBJECT

 public:
  explicit HeatmapView(QWidget* parent = nullptr);

  void setHeatmapModel(HeatmapModel* model);
  // The side of a cell in pixels for T tokens.
  static int cellSize(int tokens);

 protected:
  void leaveEvent(QEvent* event) override;

 private:
  void resizeCells();
  void hoverRow(int row);

  HeatmapModel* m_model = nullptr;
  QFont m_baseFont;  // cell fonts are scaled from it
};

}  // namespace attnscope::dashboard
