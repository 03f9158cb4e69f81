#include "client/ui/trend_chart.h"

#include <QDateTimeAxis>
#include <QLegend>
#include <QLineSeries>
#include <QValueAxis>

#include "client/models/time_axis.h"

namespace attnscope::dashboard {
namespace {

QLineSeries* makeSeries(const QString& name, const QColor& color, Qt::PenStyle style) {
  auto* series = new QLineSeries;
  series->setName(name);
  QPen pen(color);
  pen.setWidthF(2.0);
  pen.setStyle(style);
  series->setPen(pen);
  series->setPointsVisible(true);
  return series;
}

}  // namespace

TrendChart::TrendChart(QWidget* parent) : QChartView(parent) {
  setObjectName(QStringLiteral("trendChart"));
  setRenderHint(QPainter::Antialiasing);
  chart()->setTitle(tr("Across requests: health, sinks and max entropy per analysis"));
  chart()->setMargins(QMargins(4, 4, 4, 4));
  chart()->legend()->setAlignment(Qt::AlignTop);
  setMinimumHeight(200);
  setTrends({});
}

int TrendChart::pointCount(int series) const {
  return series >= 0 && series < 3 ? m_counts[series] : 0;
}

void TrendChart::setTrends(const QVector<TrendPoint>& points) {
  chart()->removeAllSeries();
  for (QAbstractAxis* axis : chart()->axes()) {
    chart()->removeAxis(axis);
    delete axis;
  }
  QLineSeries* health = makeSeries(tr("health"), QColor(0x2e, 0x7d, 0x32), Qt::SolidLine);
  QLineSeries* sinks = makeSeries(tr("sinks"), QColor(0xc6, 0x28, 0x28), Qt::SolidLine);
  QLineSeries* entropy = makeSeries(tr("max H"), QColor(0x1d, 0x4f, 0x91), Qt::DashLine);
  int maxSinks = 0;
  for (const TrendPoint& p : points) {
    const qreal x = qreal(p.time.toMSecsSinceEpoch());
    health->append(x, p.health);
    sinks->append(x, p.sinks);
    entropy->append(x, p.maxEntropy);
    maxSinks = qMax(maxSinks, p.sinks);
  }
  m_counts[0] = health->count();
  m_counts[1] = sinks->count();
  m_counts[2] = entropy->count();
  chart()->addSeries(health);
  chart()->addSeries(sinks);
  chart()->addSeries(entropy);

  const QDateTime now = QDateTime::currentDateTime();
  QDateTime first = points.isEmpty() ? now.addSecs(-60) : points.first().time;
  QDateTime last = points.isEmpty() ? now : points.last().time;
  if (first.msecsTo(last) < 2000) {  // one point, or a burst: give it some room
    first = first.addMSecs(-1000);
    last = last.addMSecs(1000);
  }
  // Round ticks in a format no finer than their interval: labels never repeat.
  const TimeTicks ticks = timeTicks(first, last, 5);
  auto* time = new QDateTimeAxis;
  time->setFormat(ticks.format);
  time->setTickCount(ticks.count);
  time->setRange(ticks.min, ticks.max);
  auto* left = new QValueAxis;
  left->setRange(0, qMax(10, maxSinks));
  left->setLabelFormat(QStringLiteral("%d"));
  if (maxSinks <= 10) {
    left->setTickCount(6);  // 0, 2, ..., 10
  } else {
    left->applyNiceNumbers();
  }
  auto* right = new QValueAxis;
  right->setRange(0, 1);
  right->setLabelFormat(QStringLiteral("%.1f"));
  right->setTickCount(6);
  chart()->addAxis(time, Qt::AlignBottom);
  chart()->addAxis(left, Qt::AlignLeft);
  chart()->addAxis(right, Qt::AlignRight);
  for (QLineSeries* s : {health, sinks, entropy}) s->attachAxis(time);
  health->attachAxis(left);
  sinks->attachAxis(left);
  entropy->attachAxis(right);
}

QStringList TrendChart::timeLabels() const {
  const QList<QAbstractAxis*> axes = chart()->axes(Qt::Horizontal);
  auto* axis = axes.isEmpty() ? nullptr : qobject_cast<QDateTimeAxis*>(axes.first());
  if (axis == nullptr || axis->tickCount() < 2) return {};
  const qint64 min = axis->min().toMSecsSinceEpoch();
  const qint64 max = axis->max().toMSecsSinceEpoch();
  QStringList labels;
  for (int i = 0; i < axis->tickCount(); ++i) {
    const qint64 at = min + (max - min) * i / (axis->tickCount() - 1);
    labels << QDateTime::fromMSecsSinceEpoch(at).toString(axis->format());
  }
  return labels;
}

}  // namespace attnscope::dashboard
