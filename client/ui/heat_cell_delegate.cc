#include "client/ui/heat_cell_delegate.h"

#include <QPainter>

namespace attnscope::dashboard {

void HeatCellDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                             const QModelIndex& index) const {
  QStyleOptionViewItem plain(option);
  const bool selected = option.state & QStyle::State_Selected;
  plain.state &= ~(QStyle::State_Selected | QStyle::State_HasFocus);
  QStyledItemDelegate::paint(painter, plain, index);
  if (!selected) return;
  painter->save();
  QPen pen(QColor(0xc6, 0x28, 0x28));
  pen.setWidth(3);
  painter->setPen(pen);
  painter->drawRect(option.rect.adjusted(1, 1, -2, -2));
  painter->restore();
}

}  // namespace attnscope::dashboard
