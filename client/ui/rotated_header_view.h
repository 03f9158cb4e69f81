// A horizontal header whose labels run bottom-to-top, so that narrow
// heatmap columns can still carry a token's text.
#pragma once

#include <QHeaderView>

namespace attnscope::dashboard {

// Honours the model's DisplayRole, FontRole and ForegroundRole per section.
class RotatedHeaderView : public QHeaderView {
  Q_OBJECT

 public:
  explicit RotatedHeaderView(QWidget* parent = nullptr);

 protected:
  void paintSection(QPainter* painter, const QRect& rect, int logicalIndex) const override;
  QSize sectionSizeFromContents(int logicalIndex) const override;

 private:
  QFont sectionFont(int logicalIndex) const;
};

}  // namespace attnscope::dashboard
