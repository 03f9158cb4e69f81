#include "client/ui/rotated_header_view.h"

#include <QPainter>

namespace attnscope::dashboard {

RotatedHeaderView::RotatedHeaderView(QWidget* parent) : QHeaderView(Qt::Horizontal, parent) {
  setSectionsClickable(false);
  setHighlightSections(false);
  setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

QFont RotatedHeaderView::sectionFont(int logicalIndex) const {
  const QVariant font =
      model() ? model()->headerData(logicalIndex, orientation(), Qt::FontRole) : QVariant();
  return font.isValid() ? qvariant_cast<QFont>(font) : this->font();
}

void RotatedHeaderView::paintSection(QPainter* painter, const QRect& rect, int logicalIndex) const {
  if (!rect.isValid() || model() == nullptr) return;
  painter->save();
  painter->fillRect(rect, palette().window());
  painter->setPen(palette().mid().color());
  painter->drawLine(rect.topRight(), rect.bottomRight());
  const QVariant color = model()->headerData(logicalIndex, orientation(), Qt::ForegroundRole);
  painter->setPen(color.isValid() ? qvariant_cast<QColor>(color) : palette().windowText().color());
  painter->setFont(sectionFont(logicalIndex));
  // Rotate about the section's bottom-left corner; text then runs upwards.
  painter->translate(rect.left(), rect.bottom());
  painter->rotate(-90);
  const QRect textRect(4, 0, rect.height() - 8, rect.width());
  const QString text = model()->headerData(logicalIndex, orientation()).toString();
  painter->drawText(textRect, Qt::AlignLeft | Qt::AlignVCenter,
                    painter->fontMetrics().elidedText(text, Qt::ElideRight, textRect.width()));
  painter->restore();
}

QSize RotatedHeaderView::sectionSizeFromContents(int logicalIndex) const {
  if (model() == nullptr) return QHeaderView::sectionSizeFromContents(logicalIndex);
  const QFontMetrics metrics(sectionFont(logicalIndex));
  const QString text = model()->headerData(logicalIndex, orientation()).toString();
  return QSize(metrics.height() + 4, qMin(metrics.horizontalAdvance(text) + 12, 120));
}

}  // namespace attnscope::dashboard
