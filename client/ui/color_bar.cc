#include "client/ui/color_bar.h"

#include <QLinearGradient>
#include <QPainter>

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

constexpr int kBarHeight = 10;  // px
constexpr int kGap = 8;         // px between the caption and the bar

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

QSize ColorBar::sizeHint() const {
  return QSize(320, kBarHeight + fontMetrics().height() + 6);
}

QSize ColorBar::minimumSizeHint() const {
  return QSize(120, kBarHeight + fontMetrics().height() + 6);
}

void ColorBar::paintEvent(QPaintEvent* /*event*/) {
  QPainter painter(this);
  const QFontMetrics metrics = fontMetrics();
  const int captionWidth = qMin(metrics.horizontalAdvance(m_caption), width() / 3);
  // Room for half a tick label either side of the bar.
  const int margin = metrics.horizontalAdvance(QStringLiteral("1e-4")) / 2 + 2;
  const QRect bar(captionWidth + kGap + margin, 2, width() - captionWidth - kGap - 2 * margin,
                  kBarHeight);
  if (bar.width() <= 0) return;
  painter.setPen(palette().windowText().color());
  painter.drawText(QRect(0, 0, captionWidth, kBarHeight + 4), Qt::AlignLeft | Qt::AlignVCenter,
                   metrics.elidedText(m_caption, Qt::ElideRight, captionWidth));
  // The gradient is linear in the bar's position: heatColor(t); the ticks
  // say which value sits where under the scale.
  QLinearGradient gradient(bar.topLeft(), bar.topRight());
  for (int i = 0; i <= 16; ++i) gradient.setColorAt(i / 16.0, heatColor(i / 16.0));
  painter.fillRect(bar, gradient);
  painter.setPen(palette().mid().color());
  painter.drawRect(bar.adjusted(0, 0, -1, -1));
  painter.setPen(palette().windowText().color());
  const QVector<double> ticks = m_scale.ticks();
  for (const double tick : ticks) {
    const int x = bar.left() + qRound(m_scale.position(tick) * (bar.width() - 1));
    painter.drawLine(x, bar.bottom(), x, bar.bottom() + 3);
    const QString label = heatTickLabel(tick);
    const int w = metrics.horizontalAdvance(label);
    painter.drawText(QRect(x - w / 2 - 1, bar.bottom() + 3, w + 2, metrics.height()),
                     Qt::AlignCenter, label);
  }
}

}  // namespace attnscope::dashboard
