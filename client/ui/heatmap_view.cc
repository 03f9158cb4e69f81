#include "client/ui/heatmap_view.h"

#include <QHeaderView>
#include <QKeyEvent>
#include <QWheelEvent>
#include <cmath>

#include "client/ui/token_header_view.h"

namespace attnscope::dashboard {

HeatmapView::HeatmapView(QWidget* parent) : QTableView(parent), m_baseFont(font()) {
  setObjectName(QStringLiteral("heatmapView"));
  setHorizontalHeader(new TokenHeaderView(Qt::Horizontal, this));
  setVerticalHeader(new TokenHeaderView(Qt::Vertical, this));
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

namespace {

constexpr double kZoomStep = 1.25;
constexpr int kMinCellPx = 1;
constexpr int kMaxCellPx = 64;

}  // namespace

int HeatmapView::cellSize(int tokens) {
  if (tokens <= 16) return 34;
  if (tokens <= 32) return 20;
  return qMax(2, 640 / tokens);
}

int HeatmapView::currentCellSize() const {
  const int base = cellSize(m_model ? m_model->rowCount() : 0);
  return qBound(kMinCellPx, qRound(base * m_zoom), kMaxCellPx);
}

void HeatmapView::setZoom(double zoom) {
  const int base = cellSize(m_model ? m_model->rowCount() : 0);
  const double lowest = double(kMinCellPx) / base;
  const double highest = double(kMaxCellPx) / base;
  m_zoom = qBound(lowest, zoom, highest);
  resizeCells();
}

void HeatmapView::wheelEvent(QWheelEvent* event) {
  if (!(event->modifiers() & Qt::ControlModifier)) {
    QTableView::wheelEvent(event);
    return;
  }
  const int steps = event->angleDelta().y() / 120;
  if (steps != 0) setZoom(m_zoom * std::pow(kZoomStep, steps));
  event->accept();
}

void HeatmapView::keyPressEvent(QKeyEvent* event) {
  if (event->modifiers() & Qt::ControlModifier) {
    if (event->key() == Qt::Key_Plus || event->key() == Qt::Key_Equal) {
      setZoom(m_zoom * kZoomStep);
      return;
    }
    if (event->key() == Qt::Key_Minus) {
      setZoom(m_zoom / kZoomStep);
      return;
    }
    if (event->key() == Qt::Key_0) {
      setZoom(1.0);
      return;
    }
  }
  QTableView::keyPressEvent(event);
}

void HeatmapView::resizeCells() {
  const int side = currentCellSize();
  horizontalHeader()->setMinimumSectionSize(qMin(side, 8));
  verticalHeader()->setMinimumSectionSize(qMin(side, 8));
  horizontalHeader()->setDefaultSectionSize(side);
  verticalHeader()->setDefaultSectionSize(side);
  QFont small = m_baseFont;
  small.setPointSizeF(m_baseFont.pointSizeF() * (side >= 30 ? 0.85 : 0.75));
  setFont(small);
  horizontalHeader()->setFont(small);
  verticalHeader()->setFont(small);
  // Fixed: a header sized to its widest label would change with the prompt.
  horizontalHeader()->setFixedHeight(horizontalHeader()->sizeHint().height());
  verticalHeader()->setFixedWidth(verticalHeader()->sizeHint().width());
  // Narrow cells: the axes label every step-th token (TokenHeaderView).
  horizontalHeader()->viewport()->update();
  verticalHeader()->viewport()->update();
}

void HeatmapView::resizeEvent(QResizeEvent* event) {
  fitAxes();
  QTableView::resizeEvent(event);
}

void HeatmapView::fitAxes() {
  const int floor = 3 * fontMetrics().height();
  const int keyHeight = qMax(floor, height() / 4);
  const int queryWidth = qMax(floor, width() / 4);
  if (keyAxis()->maximumHeight() != keyHeight || queryAxis()->maximumWidth() != queryWidth) {
    keyAxis()->setMaximumHeight(keyHeight);
    queryAxis()->setMaximumWidth(queryWidth);
    updateGeometries();
  }
}

void HeatmapView::hoverRow(int row) {
  if (m_model != nullptr) m_model->setHighlightedRow(row);
}

void HeatmapView::leaveEvent(QEvent* event) {
  hoverRow(-1);
  QTableView::leaveEvent(event);
}

}  // namespace attnscope::dashboard
