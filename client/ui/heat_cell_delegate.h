// Paints a cell of a heat grid with the model's colours even when selected,
// marking the selection with a border instead of the palette's fill, which
// would hide the value's colour.
#pragma once

#include <QStyledItemDelegate>

namespace attnscope::dashboard {

class HeatCellDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override;
};

}  // namespace attnscope::dashboard
