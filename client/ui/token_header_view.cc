#include "client/ui/token_header_view.h"

#include <QPaintEvent>
#include <QPainter>

#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

constexpr int kThickness = 96;   // px: the key axis' height, the query axis' width
constexpr int kTickLength = 4;   // px

}  // namespace

TokenHeaderView::TokenHeaderView(Qt::Orientation orientation, QWidget* parent)
    : QHeaderView(orientation, parent) {
  setSectionsClickable(false);
  setHighlightSections(false);
  setMouseTracking(true);
}

int TokenHeaderView::labelStep() const {
  const int sections = count();
  if (sections == 0) return 1;
  const int line = fontMetrics().height();
  // A little more than a line: labels side by side need a gap.
  return tokenLabelStep(sections, double(defaultSectionSize()) * sections, line * 1.3);
}

QSize TokenHeaderView::sizeHint() const {
  return orientation() == Qt::Horizontal ? QSize(QHeaderView::sizeHint().width(), kThickness)
                                         : QSize(kThickness + 24, QHeaderView::sizeHint().height());
}

QFont TokenHeaderView::sectionFont(int logicalIndex) const {
  const QVariant font =
      model() ? model()->headerData(logicalIndex, orientation(), Qt::FontRole) : QVariant();
  return font.isValid() ? qvariant_cast<QFont>(font) : this->font();
}

void TokenHeaderView::paintEvent(QPaintEvent* event) {
  QPainter painter(viewport());
  painter.fillRect(event->rect(), palette().window());
  if (model() == nullptr || count() == 0) return;
  const bool horizontal = orientation() == Qt::Horizontal;
  const int length = horizontal ? viewport()->width() : viewport()->height();
  const int first = qMax(0, visualIndexAt(0));
  int last = visualIndexAt(length - 1);
  if (last < 0) last = count() - 1;
  const int step = labelStep();
  painter.setPen(palette().mid().color());
  for (int visual = first - first % step; visual <= last; visual += step) {
    const int logical = logicalIndex(visual);
    const int centre = sectionViewportPosition(logical) + sectionSize(logical) / 2;
    if (horizontal) {
      painter.drawLine(centre, viewport()->height() - kTickLength, centre, viewport()->height());
    } else {
      painter.drawLine(viewport()->width() - kTickLength, centre, viewport()->width(), centre);
    }
    paintLabel(&painter, logical);
  }
}

QRect TokenHeaderView::labelRect(int logicalIndex) const {
  const int line = QFontMetrics(sectionFont(logicalIndex)).height();
  const int centre = sectionViewportPosition(logicalIndex) + sectionSize(logicalIndex) / 2;
  if (orientation() == Qt::Horizontal) {
    // Text runs upwards from above the tick.
    const int left = qBound(0, centre - line / 2, qMax(0, viewport()->width() - line));
    const int bottom = viewport()->height() - kTickLength - 2;
    const int length = qMax(0, viewport()->height() - kTickLength - 6);
    return QRect(left, bottom - length, line, length);
  }
  const int top = qBound(0, centre - line / 2, qMax(0, viewport()->height() - line));
  return QRect(2, top, qMax(0, viewport()->width() - kTickLength - 6), line);
}

void TokenHeaderView::paintLabel(QPainter* painter, int logicalIndex) const {
  painter->save();
  const QVariant color = model()->headerData(logicalIndex, orientation(), Qt::ForegroundRole);
  painter->setPen(color.isValid() ? qvariant_cast<QColor>(color) : palette().windowText().color());
  painter->setFont(sectionFont(logicalIndex));
  const QString text = model()->headerData(logicalIndex, orientation()).toString();
  const QRect rect = labelRect(logicalIndex);
  if (orientation() == Qt::Horizontal) {
    painter->translate(rect.left(), rect.bottom() + 1);
    painter->rotate(-90);
    const QRect box(0, 0, rect.height(), rect.width());
    painter->drawText(box, Qt::AlignLeft | Qt::AlignVCenter,
                      painter->fontMetrics().elidedText(text, Qt::ElideRight, box.width()));
  } else {
    painter->drawText(rect, Qt::AlignRight | Qt::AlignVCenter,
                      painter->fontMetrics().elidedText(text, Qt::ElideRight, rect.width()));
  }
  painter->restore();
}

}  // namespace attnscope::dashboard
