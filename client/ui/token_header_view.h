// The heatmap's token axes: one header class for keys (horizontal, labels
// running upwards) and queries (vertical), readable at any number of tokens.
#pragma once

#include <QHeaderView>

namespace attnscope::dashboard {

// Labels every step-th token (tokenLabelStep: a 1-2-5 step at which labels a
// line high do not overlap), centred on its section, so that 2,000 sections
// of 2 px still carry readable labels; the rest are unlabelled ticks.
// Hovering any section shows the model's ToolTipRole (the full token).
// Honours the model's DisplayRole, FontRole and ForegroundRole.
class TokenHeaderView : public QHeaderView {
  Q_OBJECT

 public:
  explicit TokenHeaderView(Qt::Orientation orientation, QWidget* parent = nullptr);

  // Every labelStep()-th section is labelled at the current section size.
  int labelStep() const;
  // Where section logicalIndex's label is drawn, in viewport coordinates:
  // centred on the section, but kept inside the viewport so that the first
  // and last tokens' labels are not cut at the corner.
  QRect labelRect(int logicalIndex) const;

 protected:
  void paintEvent(QPaintEvent* event) override;
  QSize sizeHint() const override;

 private:
  QFont sectionFont(int logicalIndex) const;
  void paintLabel(QPainter* painter, int logicalIndex) const;
};

}  // namespace attnscope::dashboard
