#include "client/ui/color_bar.h"

#include <QLinearGradient>
#include <QPainter>
#include <limits>

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

constexpr int kBarHeight = 10;  // px
constexpr int kGap = 8;         // px between the caption and the bar
constexpr int kMinBar = 48;     // px: the bar the caption leaves at least

}  // namespace

ColorBar::ColorBar(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void ColorBar::setScale(HeatScaleKind kind) {
  m_scale = HeatScale(kind);
  update();
}

void ColorBar::setCaption(const QString& caption) {
  m_caption = caption;
  setToolTip(caption);
  update();
}

QStringList ColorBar::tickLabels() const {
  QStringList labels;
  for (const double tick : m_scale.ticks()) labels << heatTickLabel(tick);
  return labels;
}

QString ColorBar::shownCaption() const {
  return fontMetrics().elidedText(m_caption, Qt::ElideRight, captionWidth());
}

int ColorBar::tickMargin() const {
  // Room for half a tick label either side of the bar.
  return fontMetrics().horizontalAdvance(QStringLiteral("1e-4")) / 2 + 2;
}

int ColorBar::captionWidth() const {
  // A pixel of slack: elidedText measures the unrounded width, which can
  // exceed horizontalAdvance's and cut "sink score" to "sink sc…".
  const int wanted = fontMetrics().horizontalAdvance(m_caption) + 2;
  const int room = width() - kGap - 2 * tickMargin() - kMinBar;
  return qMax(0, qMin(wanted, qMax(room, width() / 3)));
}

QSize ColorBar::sizeHint() const {
  return QSize(320, kBarHeight + fontMetrics().height() + 6);
}

QSize ColorBar::minimumSizeHint() const {
  return QSize(120, kBarHeight + fontMetrics().height() + 6);
}

void ColorBar::paintEvent(QPaintEvent* /*event*/) {
  QPainter painter(this);
  const QFontMetrics metrics = fontMetrics();
  const int captionWidth = this->captionWidth();
  const int margin = tickMargin();
  const QRect bar(captionWidth + kGap + margin, 2, width() - captionWidth - kGap - 2 * margin,
                  kBarHeight);
  if (bar.width() <= 0) return;
  painter.setPen(palette().windowText().color());
  painter.drawText(QRect(0, 0, captionWidth, kBarHeight + 4), Qt::AlignLeft | Qt::AlignVCenter,
                   shownCaption());
  // The gradient is linear in the bar's position: heatColor(t); the ticks
  // say which value sits where under the scale.
  QLinearGradient gradient(bar.topLeft(), bar.topRight());
  for (int i = 0; i <= 16; ++i) gradient.setColorAt(i / 16.0, heatColor(i / 16.0));
  painter.fillRect(bar, gradient);
  painter.setPen(palette().mid().color());
  painter.drawRect(bar.adjusted(0, 0, -1, -1));
  painter.setPen(palette().windowText().color());
  // Every tick gets its mark; a label is drawn only where it clears its
  // neighbours (the ends always), so a narrow bar reads "0 ... 1", not a
  // run of overlapping digits.
  const QVector<double> ticks = m_scale.ticks();
  QVector<QRect> boxes;
  for (const double tick : ticks) {
    const int x = bar.left() + qRound(m_scale.position(tick) * (bar.width() - 1));
    painter.drawLine(x, bar.bottom(), x, bar.bottom() + 3);
    const int w = metrics.horizontalAdvance(heatTickLabel(tick));
    boxes << QRect(x - w / 2 - 1, bar.bottom() + 3, w + 2, metrics.height());
  }
  constexpr int kLabelGap = 4;  // px between two labels
  int drawnRight = std::numeric_limits<int>::min();
  for (int i = 0; i < ticks.size(); ++i) {
    const bool end = i == 0 || i == ticks.size() - 1;
    const bool clears = boxes[i].left() >= drawnRight + kLabelGap &&
                        (end || boxes[i].right() + kLabelGap <= boxes.last().left());
    if (!end && !clears) continue;
    painter.drawText(boxes[i], Qt::AlignCenter, heatTickLabel(ticks[i]));
    drawnRight = boxes[i].right();
  }
}

}  // namespace attnscope::dashboard
