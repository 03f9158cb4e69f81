#include "client/ui/token_axis.h"

#include <QFontMetrics>

#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

QFont labelFont() {
  QFont font;
  font.setPointSizeF(font.pointSizeF() * 0.85);
  return font;
}

}  // namespace

int tokenAxisStep(int count, double pixels) {
  // Labels run across (Qt Charts elides rotated category labels to '⋮'
  // whatever the room): each needs the width of a label and a gap.
  const QFontMetrics metrics(labelFont());
  return tokenLabelStep(count, pixels, metrics.horizontalAdvance(QStringLiteral("0000 ·token")) + 8);
}

double tokenAxisPixels(int viewWidth) { return qMax(0, viewWidth - 90); }

QCategoryAxis* makeTokenAxis(const QVector<int>& positions, const QStringList& texts,
                             double pixels, int* step) {
  auto* axis = new QCategoryAxis;
  axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  axis->setLabelsFont(labelFont());
  axis->setGridLineVisible(false);
  const int count = static_cast<int>(positions.size());
  const int every = tokenAxisStep(count, pixels);
  if (step != nullptr) *step = every;
  if (count == 0) return axis;
  axis->setRange(positions.first() - 0.5, positions.last() + 0.5);
  for (int i = 0; i < count; i += every) {
    // Labels must be unique: the position prefix keeps repeated tokens apart.
    axis->append(positionedTokenLabel(positions[i], texts.value(i), 6), positions[i]);
  }
  return axis;
}

}  // namespace attnscope::dashboard
