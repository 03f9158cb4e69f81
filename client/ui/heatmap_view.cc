#include "client/ui/heatmap_view.h"

#include <QHeaderView>

#include "client/ui/rotated_header_view.h"

namespace attnscope::dashboard {

HeatmapView::HeatmapView(QWidget* parent) : QTableView(parent), m_baseFont(font()) {
  setObjectName(QStringLiteral("heatmapView"));
  setHorizontalHeader(new RotatedHeaderView(this));
  setMouseTracking(true);
  verticalHeader()->setMouseTracking(true);
  setSelectionMode(QAbstractItemView::NoSelection);
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setShowGrid(false);
  setWordWrap(false);
  setCornerButtonEnabled(false);
  horizontalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  verticalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
  connect(this, &QAbstractItemView::entered, this,
          [this](const QModelIndex& index) { hoverRow(index.row()); });
  connect(verticalHeader(), &QHeaderView::sectionEntered, this, &HeatmapView::hoverRow);
}

void HeatmapView::setHeatmapModel(HeatmapModel* model) {
  m_model = model;
  setModel(model);
  connect(model, &QAbstractItemModel::modelReset, this, &HeatmapView::resizeCells);
  resizeCells();
}

int HeatmapView::cellSize(int tokens) {
  if (tokens <= 16) return 34;
  if (tokens <= 32) return 20;
  return qMax(8, 640 / tokens);
}

void HeatmapView::resizeCells() {
  const int side = cellSize(m_model ? m_model->rowCount() : 0);
  horizontalHeader()->setMinimumSectionSize(qMin(side, 8));
  verticalHeader()->setMinimumSectionSize(qMin(side, 8));
  horizontalHeader()->setDefaultSectionSize(side);
  verticalHeader()->setDefaultSectionSize(side);
  QFont small = m_baseFont;
  small.setPointSizeF(m_baseFont.pointSizeF() * (side >= 30 ? 0.85 : 0.75));
  setFont(small);
  horizontalHeader()->setFont(small);
  verticalHeader()->setFont(small);
  horizontalHeader()->setFixedHeight(96);
}

void HeatmapView::hoverRow(int row) {
  if (m_model != nullptr) m_model->setHighlightedRow(row);
}

void HeatmapView::leaveEvent(QEvent* event) {
  hoverRow(-1);
  QTableView::leaveEvent(event);
}

}  // namespace attnscope::dashboard
