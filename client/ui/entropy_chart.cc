#include "client/ui/entropy_chart.h"

#include <QCursor>
#include <QToolTip>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include "client/models/colors.h"
#include "client/models/token_labels.h"
#include "client/ui/token_axis.h"

namespace attnscope::dashboard {
namespace {

// Legend labels are rich text: "<" must be escaped.
const char* const kBucketNames[3] = {"H &lt; 0.3", "0.3 ≤ H &lt; 0.6", "H ≥ 0.6"};

QLineSeries* makeLine(const QVector<QPointF>& points, const QColor& color, Qt::PenStyle style,
                      const QString& name) {
  auto* line = new QLineSeries;
  line->setName(name);
  line->append(QList<QPointF>(points.begin(), points.end()));
  QPen pen(color);
  pen.setWidthF(2.0);
  pen.setStyle(style);
  line->setPen(pen);
  return line;
}

}  // namespace

EntropyChart::EntropyChart(QWidget* parent) : QChartView(parent) {
  setObjectName(QStringLiteral("entropyChart"));
  setRenderHint(QPainter::Antialiasing);
  chart()->setTitle(tr("Next-token entropy (normalized) after each token"));
  chart()->setMargins(QMargins(4, 4, 4, 4));
  chart()->legend()->setAlignment(Qt::AlignTop);
  setMinimumHeight(180);
}

void EntropyChart::clearChart() {
  chart()->removeAllSeries();
  for (QAbstractAxis* axis : chart()->axes()) {
    chart()->removeAxis(axis);
    delete axis;
  }
  m_counts[0] = m_counts[1] = m_counts[2] = 0;
}

QAbstractAxis* EntropyChart::makeXAxis(const EntropySeries& series) {
  QVector<int> positions;
  QStringList texts;
  for (const EntropyPoint& p : series.points()) {
    positions << p.position;
    texts << p.label;
  }
  return makeTokenAxis(positions, texts, tokenAxisPixels(width()), &m_labelStep);
}

void EntropyChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  const int count = static_cast<int>(m_series.points().size());
  if (count > 0 && tokenAxisStep(count, tokenAxisPixels(width())) != m_labelStep) {
    setSeries(EntropySeries(m_series));
  }
}

void EntropyChart::showPointToolTip(const QPointF& point, bool hovering) {
  if (!hovering) {
    QToolTip::hideText();
    return;
  }
  for (const EntropyPoint& p : m_series.points()) {
    if (p.position != qRound(point.x())) continue;
    QToolTip::showText(QCursor::pos(),
                       tr("%1%2\nH / log V %3 · %4 nats")
                           .arg(positionedTokenLabel(p.position, p.label, 60),
                                p.generated ? tr(" (generated)") : QString())
                           .arg(p.normalized, 0, 'f', 3)
                           .arg(p.nats, 0, 'f', 2),
                       this);
    return;
  }
}

void EntropyChart::addGuide(double y, QValueAxis* x, QValueAxis* yAxis) {
  auto* guide = makeLine({QPointF(x->min(), y), QPointF(x->max(), y)}, QColor(0xaa, 0xaa, 0xaa),
                         Qt::DotLine, QString());
  QPen pen = guide->pen();
  pen.setWidthF(1.0);
  guide->setPen(pen);
  chart()->addSeries(guide);
  guide->attachAxis(x);
  guide->attachAxis(yAxis);
  chart()->legend()->markers(guide).first()->setVisible(false);
}

void EntropyChart::setSeries(const EntropySeries& series) {
  clearChart();
  m_series = series;
  if (series.isEmpty()) return;
  QAbstractAxis* labels = makeXAxis(series);
  auto* x = new QValueAxis;  // the series' own axis; `labels` shows the tokens
  x->setRange(series.points().first().position - 0.5, series.points().last().position + 0.5);
  x->setVisible(false);
  auto* y = new QValueAxis;
  y->setRange(0.0, 1.0);
  y->setTickCount(6);
  y->setLabelFormat(QStringLiteral("%.1f"));
  y->setTitleText(tr("H / log V"));
  chart()->addAxis(labels, Qt::AlignBottom);
  chart()->addAxis(x, Qt::AlignBottom);
  chart()->addAxis(y, Qt::AlignLeft);
  addGuide(0.3, x, y);
  addGuide(0.6, x, y);
  QList<QXYSeries*> all{
      makeLine(series.linePoints(false), QColor(0x75, 0x75, 0x75), Qt::SolidLine, tr("prompt"))};
  if (!series.linePoints(true).isEmpty()) {
    all << makeLine(series.linePoints(true), QColor(0x21, 0x71, 0xb5), Qt::DashLine,
                    tr("generated"));
  }
  for (int bucket = 0; bucket < 3; ++bucket) {
    auto* points = new QScatterSeries;
    points->setName(QString::fromUtf8(kBucketNames[bucket]));
    const QVector<QPointF> p = series.bucketPoints(bucket);
    points->append(QList<QPointF>(p.begin(), p.end()));
    points->setColor(entropyBucketColor(bucket));
    points->setBorderColor(entropyBucketColor(bucket).darker(130));
    points->setMarkerSize(9);
    m_counts[bucket] = static_cast<int>(p.size());
    connect(points, &QScatterSeries::hovered, this, &EntropyChart::showPointToolTip);
    all << points;
  }
  for (QXYSeries* s : all) {
    chart()->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
}

}  // namespace attnscope::dashboard
