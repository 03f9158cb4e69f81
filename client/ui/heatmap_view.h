// The attention heatmap widget: a table over a HeatmapModel with token
// labels on both axes (keys' labels rotated) and hover highlighting.
#pragma once

#include <QTableView>

#include "client/models/heatmap_model.h"
#include "client/ui/token_header_view.h"

namespace attnscope::dashboard {

// Hovering a cell or a row header highlights that query's row in the model
// (what that token reads); leaving the view clears it. Cells are square:
// wide enough for the printed weights on small prompts, narrower on long ones.
class HeatmapView : public QTableView {
  Q_OBJECT

 public:
  explicit HeatmapView(QWidget* parent = nullptr);

  void setHeatmapModel(HeatmapModel* model);
  // The side of a cell in pixels for T tokens at zoom 1: the whole map
  // about 640 px wide, at least 2 px a cell (T >= 512 scrolls).
  static int cellSize(int tokens);
  // Multiplies the cell size (clamped so that a cell is 1..64 px). Ctrl+wheel
  // and Ctrl+plus / Ctrl+minus zoom in and out around the default of 1.
  void setZoom(double zoom);
  double zoom() const { return m_zoom; }
  TokenHeaderView* keyAxis() const { return static_cast<TokenHeaderView*>(horizontalHeader()); }
  TokenHeaderView* queryAxis() const { return static_cast<TokenHeaderView*>(verticalHeader()); }
  // The side of a cell in pixels now. At any size both token axes show: every
  // step-th token where cells are narrower than a line (TokenHeaderView), the
  // full token in the header's tooltip, query and key in each cell's.
  int currentCellSize() const;

 protected:
  void leaveEvent(QEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  // The token axes take at most a quarter of the view each way (at least
  // three lines), so that a short panel on a 720-px screen keeps room for
  // the cells; labels are elided to what fits.
  void resizeEvent(QResizeEvent* event) override;

 private:
  void fitAxes();
  void resizeCells();
  void hoverRow(int row);

  HeatmapModel* m_model = nullptr;
  QFont m_baseFont;  // cell fonts are scaled from it
  double m_zoom = 1.0;
};

}  // namespace attnscope::dashboard
