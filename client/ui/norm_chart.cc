#include "client/ui/norm_chart.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCursor>
#include <QLineSeries>
#include <QToolTip>
#include <QValueAxis>
#include <cmath>

#include "client/models/colors.h"
#include "client/models/token_labels.h"
#include "client/ui/token_axis.h"

namespace attnscope::dashboard {
namespace {

}  // namespace

NormChart::NormChart(QWidget* parent) : QChartView(parent) {
  setObjectName(QStringLiteral("normChart"));
  setRenderHint(QPainter::Antialiasing);
  chart()->legend()->hide();
  chart()->setMargins(QMargins(4, 4, 4, 4));
  chart()->setTitle(tr("Max hidden-state norm per token"));
  setMinimumHeight(180);
}

void NormChart::setNormModel(NormBarsModel* model) {
  m_model = model;
  connect(model, &NormBarsModel::normsChanged, this, &NormChart::rebuild);
  rebuild();
}

QString NormChart::title() const { return chart()->title(); }

void NormChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  if (m_bars > 0 && tokenAxisStep(m_bars, tokenAxisPixels(width())) != m_labelStep) rebuild();
}

void NormChart::rebuild() {
  QChart* c = chart();
  c->removeAllSeries();
  for (QAbstractAxis* axis : c->axes()) {
    c->removeAxis(axis);
    delete axis;
  }
  m_bars = m_model ? m_model->rowCount() : 0;
  if (m_bars == 0) {
    c->setTitle(tr("Max hidden-state norm per token"));
    return;
  }
  QValueAxis* y = addBars();
  addMedianLine(y);
  updateTitle();
}

QValueAxis* NormChart::addBars() {
  auto* set = new QBarSet(tr("max norm"));
  set->setColor(QColor(0x6b, 0xae, 0xd6));
  set->setBorderColor(QColor(0x21, 0x71, 0xb5));
  set->setSelectedColor(healthColor(HealthLevel::Red));
  QStringList texts;
  QVector<int> positions;
  double top = 0.0;
  for (int i = 0; i < m_bars; ++i) {
    set->append(m_model->maxNorm(i));
    top = std::max(top, m_model->maxNorm(i));
    texts << tokenText(i);
    positions << i;
  }
  if (m_model->argmax() >= 0) set->selectBar(m_model->argmax());
  auto* series = new QBarSeries;
  series->append(set);
  series->setBarWidth(0.8);
  chart()->addSeries(series);
  connect(set, &QBarSet::hovered, this, &NormChart::showBarToolTip);

  // Bars sit at x = 0, 1, ... on a hidden value axis; the token axis labels
  // them, thinned to what fits.
  auto* x = new QValueAxis;
  x->setRange(-0.5, m_bars - 0.5);
  x->setVisible(false);
  QCategoryAxis* tokens = makeTokenAxis(positions, texts, tokenAxisPixels(width()), &m_labelStep);
  auto* y = new QValueAxis;
  y->setRange(0, top * 1.08);
  y->setTitleText(tr("max ‖x‖₂"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  y->applyNiceNumbers();
  chart()->addAxis(tokens, Qt::AlignBottom);
  chart()->addAxis(x, Qt::AlignBottom);
  chart()->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  return y;
}

void NormChart::addMedianLine(QValueAxis* y) {
  if (std::isnan(m_model->median())) return;
  auto* median = new QLineSeries;
  median->setName(tr("median"));
  median->append(-0.5, m_model->median());
  median->append(m_bars - 0.5, m_model->median());
  QPen pen(QColor(0x55, 0x55, 0x55));
  pen.setStyle(Qt::DashLine);
  pen.setWidthF(1.5);
  median->setPen(pen);
  chart()->addSeries(median);
  // The bars live on a category axis; the line needs a value axis over the
  // same span, hidden.
  auto* lineX = new QValueAxis;
  lineX->setRange(-0.5, m_bars - 0.5);
  lineX->setVisible(false);
  chart()->addAxis(lineX, Qt::AlignBottom);
  median->attachAxis(lineX);
  median->attachAxis(y);
}

void NormChart::updateTitle() {
  const int peak = m_model->argmax();
  const double ratio = m_model->ratio(peak);
  if (std::isnan(ratio)) {
    chart()->setTitle(tr("Max hidden-state norm per token"));
    return;
  }
  chart()->setTitle(tr("Max hidden-state norm per token · %1 is %2× the median")
                        .arg(positionedTokenLabel(peak, tokenText(peak), 16))
                        .arg(ratio, 0, 'f', 1));
}

QString NormChart::tokenText(int token) const {
  return m_model->index(token, NormBarsModel::Token).data(NormBarsModel::ValueRole).toString();
}

void NormChart::showBarToolTip(bool hovering, int index) {
  if (!hovering || m_model == nullptr) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(QCursor::pos(),
                     tr("%1\nmax norm %2 · %3× the median")
                         .arg(m_model->index(index, NormBarsModel::Token).data().toString())
                         .arg(m_model->maxNorm(index), 0, 'f', 1)
                         .arg(m_model->ratio(index), 0, 'f', 2),
                     this);
}

}  // namespace attnscope::dashboard
