#include "client/ui/eviction_view.h"

#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QVBoxLayout>
#include <QValueAxis>
#include <cmath>

#include "client/ui/wrap_label.h"

namespace attnscope::dashboard {
namespace {

const QColor kPolicyColors[] = {QColor(0x1d, 0x4f, 0x91), QColor(0xc6, 0x28, 0x28),
                                QColor(0x2e, 0x7d, 0x32), QColor(0xef, 0x6c, 0x00),
                                QColor(0x6a, 0x1b, 0x9a), QColor(0x00, 0x83, 0x8f)};

}  // namespace

KeptPositionsView::KeptPositionsView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("keptPositionsView"));
  setMinimumHeight(160);
}

void KeptPositionsView::setPolicy(const EvictionRun::Policy* policy, int textTokens) {
  m_lit = 0;
  if (policy == nullptr || policy->kept.isEmpty() || textTokens < 1) {
    m_image = QImage();
    update();
    return;
  }
  const int steps = policy->kept.size();
  m_image = QImage(steps, textTokens, QImage::Format_RGB32);
  m_image.fill(QColor(0xf4, 0xf4, 0xf4));
  const QRgb on = QColor(0x1d, 0x4f, 0x91).rgb();
  for (int t = 0; t < steps; ++t) {
    for (qint64 j : policy->kept[t]) {
      if (j < 0 || j >= textTokens) continue;
      // Row 0 (the first token) at the top.
      m_image.setPixel(t, static_cast<int>(j), on);
      ++m_lit;
    }
  }
  update();
}

void KeptPositionsView::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().window());
  if (m_image.isNull()) {
    painter.drawText(rect(), Qt::AlignCenter, tr("no kept positions for this policy"));
    return;
  }
  const QRect area = rect().adjusted(40, 4, -4, -18);
  painter.drawImage(area, m_image);
  painter.setPen(palette().text().color());
  painter.drawRect(area.adjusted(0, 0, -1, -1));
  painter.drawText(QRect(0, area.top(), 38, 14), Qt::AlignRight, QStringLiteral("0"));
  painter.drawText(QRect(0, area.bottom() - 14, 38, 14), Qt::AlignRight,
                   QString::number(m_image.height() - 1));
  painter.drawText(QRect(area.left(), area.bottom() + 2, area.width(), 16), Qt::AlignCenter,
                   tr("step -> (rows: text positions kept in the cache)"));
}

EvictionView::EvictionView(QWidget* parent)
    : QWidget(parent),
      m_note(new WrapLabel(this)),
      m_chart(new QChartView(this)),
      m_policyBox(new QComboBox(this)),
      m_summary(new QLabel(this)),
      m_kept(new KeptPositionsView(this)) {
  setObjectName(QStringLiteral("evictionView"));
  m_chart->setRenderHint(QPainter::Antialiasing);
  m_chart->chart()->setTitle(tr("Running perplexity per KV-cache policy"));
  m_chart->chart()->legend()->setAlignment(Qt::AlignTop);
  m_chart->setMinimumHeight(240);
  m_x = new QValueAxis(m_chart->chart());
  m_x->setTitleText(tr("step"));
  m_x->setLabelFormat(QStringLiteral("%d"));
  m_y = new QLogValueAxis(m_chart->chart());
  m_y->setTitleText(tr("perplexity"));
  m_y->setLabelFormat(QStringLiteral("%g"));
  m_chart->chart()->addAxis(m_x, Qt::AlignBottom);
  m_chart->chart()->addAxis(m_y, Qt::AlignLeft);
  m_policyBox->setObjectName(QStringLiteral("evictionPolicyBox"));
  m_summary->setObjectName(QStringLiteral("evictionSummary"));
  m_summary->setWordWrap(true);
  m_note->setObjectName(QStringLiteral("evictionNote"));
  m_note->setVisible(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_note);
  layout->addWidget(m_chart, 3);
  layout->addWidget(m_summary);
  layout->addWidget(m_policyBox);
  layout->addWidget(m_kept, 2);
  connect(m_policyBox, &QComboBox::currentIndexChanged, this, &EvictionView::showKept);
}

void EvictionView::setNote(const QString& note, bool isError) {
  m_note->setMessage(note, isError);
  m_note->setVisible(!note.isEmpty());
}

QString EvictionView::note() const { return m_note->line(); }

int EvictionView::curvePoints(int index) const {
  return index >= 0 && index < m_points.size() ? m_points[index] : 0;
}

void EvictionView::setRun(const EvictionRun& run) {
  m_run = run;
  // Axes and series are made once and then only refilled: a chart that
  // re-creates them while shown (each redraw of a live run) loses its axes
  // and its legend's markers (Qt 6.4). A run of other policies starts over.
  QChart* chart = m_chart->chart();
  bool samePolicies = m_series.size() <= run.policies().size();
  for (int i = 0; samePolicies && i < m_series.size(); ++i)
    samePolicies = m_series[i]->name() == run.policies()[i].name;
  if (!samePolicies) {
    chart->removeAllSeries();
    m_series.clear();
  }
  m_x->setRange(0, qMax(1, run.stepsTotal()));
  m_points.clear();
  double low = 1e300, high = 1;
  QStringList summary;
  for (int i = 0; i < run.policies().size(); ++i) {
    const EvictionRun::Policy& p = run.policies()[i];
    if (i == m_series.size()) {
      auto* series = new QLineSeries;
      series->setName(p.name);
      QPen pen(kPolicyColors[i % 6]);
      pen.setWidthF(2.0);
      series->setPen(pen);
      chart->addSeries(series);
      series->attachAxis(m_x);
      series->attachAxis(m_y);
      m_series << series;
    }
    QList<QPointF> points;
    points.reserve(p.curve.size());
    for (const QPointF& point : p.curve) {
      if (!(point.y() > 0) || !std::isfinite(point.y())) continue;
      points << point;
      low = qMin(low, point.y());
      high = qMax(high, point.y());
    }
    m_series[i]->replace(points);
    m_points << m_series[i]->count();
    if (p.done) summary << QStringLiteral("%1 %2").arg(p.name).arg(p.perplexity, 0, 'f', 2);
  }
  m_y->setRange(low < 1e300 ? qMax(1.0, low * 0.8) : 1.0, high * 1.25);
  m_summary->setText(summary.isEmpty() ? tr("running...")
                                       : tr("final perplexity: ") + summary.join(QStringLiteral(", ")));
  const QString current = m_policyBox->currentText();
  m_policyBox->blockSignals(true);
  m_policyBox->clear();
  int select = -1;
  for (int i = 0; i < run.policies().size(); ++i) {
    if (!EvictionRun::isSinkPolicy(run.policies()[i].name)) continue;
    m_policyBox->addItem(tr("kept positions: ") + run.policies()[i].name, i);
    if (run.policies()[i].name == current.section(QLatin1Char(' '), -1) || select < 0) {
      select = m_policyBox->count() - 1;
    }
  }
  m_policyBox->blockSignals(false);
  if (select >= 0) m_policyBox->setCurrentIndex(select);
  showKept(m_policyBox->currentIndex());
}

void EvictionView::showKept(int comboIndex) {
  const int index = comboIndex >= 0 ? m_policyBox->itemData(comboIndex).toInt() : -1;
  const EvictionRun::Policy* policy =
      index >= 0 && index < m_run.policies().size() ? &m_run.policies()[index] : nullptr;
  m_kept->setPolicy(policy, m_run.textTokens());
}

}  // namespace attnscope::dashboard
