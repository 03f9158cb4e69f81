#include "client/ui/value_grid.h"

#include <QHelpEvent>
#include <QLinearGradient>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

constexpr int kLegendHeight = 34;

}  // namespace

ValueGrid::ValueGrid(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
}

void ValueGrid::setCells(int rows, int columns, const QVector<Cell>& cells) {
  m_rows = std::max(0, rows);
  m_columns = std::max(0, columns);
  m_cells = cells;
  m_cells.resize(m_rows * m_columns);
  update();
}

void ValueGrid::setRowLabels(const QStringList& labels) {
  m_rowLabels = labels;
  update();
}

void ValueGrid::setColumnLabels(const QStringList& labels) {
  m_columnLabels = labels;
  update();
}

void ValueGrid::setLegend(const QString& caption, const QColor& low, const QColor& high,
                          const QString& lowLabel, const QString& highLabel,
                          const QString& middle) {
  m_legendCaption = caption;
  m_low = low;
  m_high = high;
  m_lowLabel = lowLabel;
  m_highLabel = highLabel;
  m_middleLabel = middle;
  update();
}

ValueGrid::Cell ValueGrid::cell(int row, int column) const {
  if (row < 0 || row >= m_rows || column < 0 || column >= m_columns) return {};
  return m_cells[row * m_columns + column];
}

int ValueGrid::filledCells() const {
  return int(std::count_if(m_cells.begin(), m_cells.end(),
                           [](const Cell& c) { return c.color.isValid(); }));
}

QRect ValueGrid::gridArea() const {
  const QFontMetrics fm(font());
  int labelWidth = fm.horizontalAdvance(QStringLiteral("L00"));
  for (const QString& label : m_rowLabels) labelWidth = std::max(labelWidth, fm.horizontalAdvance(label));
  labelWidth = std::min(labelWidth + 6, width() / 4);
  const int top = fm.height() + 4;
  return QRect(labelWidth, top, std::max(1, width() - labelWidth - 4),
               std::max(1, height() - top - kLegendHeight - 4));
}

QRect ValueGrid::cellRect(int row, int column) const {
  const QRect area = gridArea();
  if (m_rows == 0 || m_columns == 0) return {};
  const int x0 = area.left() + int(qint64(area.width()) * column / m_columns);
  const int x1 = area.left() + int(qint64(area.width()) * (column + 1) / m_columns);
  const int y0 = area.top() + int(qint64(area.height()) * row / m_rows);
  const int y1 = area.top() + int(qint64(area.height()) * (row + 1) / m_rows);
  return QRect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

QPair<int, int> ValueGrid::cellAt(const QPoint& point) const {
  const QRect area = gridArea();
  if (m_rows == 0 || m_columns == 0 || !area.contains(point)) return {-1, -1};
  const int column = int(qint64(point.x() - area.left()) * m_columns / area.width());
  const int row = int(qint64(point.y() - area.top()) * m_rows / area.height());
  return {std::clamp(row, 0, m_rows - 1), std::clamp(column, 0, m_columns - 1)};
}

int ValueGrid::columnLabelStep() const {
  if (m_columns == 0) return 1;
  const QFontMetrics fm(font());
  int widest = fm.horizontalAdvance(QStringLiteral("00"));
  for (const QString& label : m_columnLabels) widest = std::max(widest, fm.horizontalAdvance(label));
  const double perColumn = double(gridArea().width()) / m_columns;
  return std::max(1, int(std::ceil((widest + 6) / std::max(perColumn, 0.01))));
}

void ValueGrid::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().base());
  const QFontMetrics fm(font());
  const QRect area = gridArea();
  if (m_rows == 0 || m_columns == 0) {
    painter.setPen(palette().placeholderText().color());
    painter.drawText(area, Qt::AlignCenter | Qt::TextWordWrap, tr("nothing to show yet"));
    return;
  }
  for (int r = 0; r < m_rows; ++r) {
    for (int c = 0; c < m_columns; ++c) {
      const Cell& cell = m_cells[r * m_columns + c];
      const QRect box = cellRect(r, c);
      if (!cell.color.isValid()) {
        painter.fillRect(box, palette().alternateBase());
        continue;
      }
      painter.fillRect(box, cell.color);
      if (!cell.text.isEmpty() && box.width() >= fm.horizontalAdvance(cell.text) + 4 &&
          box.height() >= fm.height()) {
        painter.setPen(textColorOn(cell.color));
        painter.drawText(box, Qt::AlignCenter, cell.text);
      }
    }
  }
  painter.setPen(palette().mid().color());
  painter.drawRect(area.adjusted(0, 0, -1, -1));
  // Row labels: every row that has room.
  painter.setPen(palette().text().color());
  const int rowStep = std::max(1, int(std::ceil(double(fm.height()) / (double(area.height()) / m_rows))));
  for (int r = 0; r < m_rows && r < m_rowLabels.size(); r += rowStep) {
    const QRect box = cellRect(r, 0);
    painter.drawText(QRect(0, box.top(), area.left() - 4, box.height()),
                     Qt::AlignRight | Qt::AlignVCenter, m_rowLabels[r]);
  }
  const int step = columnLabelStep();
  for (int c = 0; c < m_columns && c < m_columnLabels.size(); c += step) {
    const QRect box = cellRect(0, c);
    const int w = fm.horizontalAdvance(m_columnLabels[c]);
    QRect label(box.center().x() - w / 2, 0, w, area.top() - 2);
    label.moveLeft(std::clamp(label.left(), area.left(), std::max(area.left(), width() - w)));
    painter.drawText(label, Qt::AlignCenter, m_columnLabels[c]);
  }
  // Legend: caption, then the gradient with its end (and middle) labels.
  if (!m_low.isValid() || !m_high.isValid()) return;
  const int legendTop = area.bottom() + 6;
  const int captionWidth = std::min(fm.horizontalAdvance(m_legendCaption) + 8, area.width() / 2);
  painter.drawText(QRect(area.left(), legendTop, captionWidth, fm.height()),
                   Qt::AlignLeft | Qt::AlignVCenter,
                   fm.elidedText(m_legendCaption, Qt::ElideRight, captionWidth - 4));
  const QRect bar(area.left() + captionWidth, legendTop + 2,
                  std::max(10, area.width() - captionWidth), fm.height() - 4);
  QLinearGradient gradient(bar.topLeft(), bar.topRight());
  gradient.setColorAt(0, m_low);
  if (!m_middleLabel.isEmpty()) gradient.setColorAt(0.5, Qt::white);
  gradient.setColorAt(1, m_high);
  painter.fillRect(bar, gradient);
  painter.setPen(palette().mid().color());
  painter.drawRect(bar.adjusted(0, 0, -1, -1));
  painter.setPen(palette().text().color());
  const QRect labels(bar.left(), bar.bottom() + 2, bar.width(), fm.height());
  painter.drawText(labels, Qt::AlignLeft, m_lowLabel);
  painter.drawText(labels, Qt::AlignRight, m_highLabel);
  if (!m_middleLabel.isEmpty()) painter.drawText(labels, Qt::AlignHCenter, m_middleLabel);
}

bool ValueGrid::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const auto [row, column] = cellAt(help->pos());
    const QString tip = row >= 0 ? cell(row, column).tooltip : QString();
    if (tip.isEmpty()) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(help->globalPos(), tip, this);
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace attnscope::dashboard
