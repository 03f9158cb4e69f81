#include "client/ui/lens_view.h"

#include <QHBoxLayout>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

#include "client/models/colors.h"
#include "client/ui/value_grid.h"
#include "client/ui/wrap_label.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

// At most `n` characters of a token's text, whitespace made visible.
QString shortToken(const QString& text, int n) {
  QString shown = text;
  shown.replace(QLatin1Char(' '), QChar(0x2423)).replace(QLatin1Char('\n'), QChar(0x21b5));
  return shown.size() <= n ? shown : shown.left(n - 1) + QChar(0x2026);
}

QString signedValue(double v) {
  return std::isfinite(v) ? QString::asprintf("%+.3f", v) : QStringLiteral("NaN");
}

}  // namespace

LensView::LensView(QWidget* parent)
    : QWidget(parent),
      m_note(new WrapLabel(this)),
      m_runButton(new QPushButton(tr("Run the lens on the shown prompt"), this)),
      m_lens(new ValueGrid(this)),
      m_caption(new WrapLabel(this)),
      m_attribution(new ValueGrid(this)) {
  setObjectName(QStringLiteral("lensView"));
  m_runButton->setObjectName(QStringLiteral("lensRunButton"));
  m_lens->setObjectName(QStringLiteral("lensGrid"));
  m_attribution->setObjectName(QStringLiteral("attributionGrid"));
  m_lens->setLegend(tr("top-1 probability"), heatColor(0), heatColor(1), QStringLiteral("0"),
                    QStringLiteral("1"));
  auto* top = new QHBoxLayout;
  top->addWidget(m_runButton);
  top->addStretch(1);
  auto* lower = new QWidget(this);
  auto* lowerLayout = new QVBoxLayout(lower);
  lowerLayout->setContentsMargins(0, 0, 0, 0);
  lowerLayout->addWidget(m_caption);
  lowerLayout->addWidget(m_attribution, 1);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_lens);
  split->addWidget(lower);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_note);
  layout->addLayout(top);
  layout->addWidget(split, 1);
  connect(m_runButton, &QPushButton::clicked, this, &LensView::runRequested);
  setNote(tr("The logit lens and the direct logit attribution of the prompt shown in the "
             "Prompt tab: analyze or pick a prompt, then run."));
  drawLens();
  drawAttribution();
}

void LensView::setNote(const QString& note, bool isError) {
  m_note->setMessage(note, isError);
  m_note->setVisible(!note.isEmpty());
}

QString LensView::note() const { return m_note->line(); }

QString LensView::attributionCaption() const { return m_caption->line(); }

void LensView::setRun(const LensRun& run) {
  m_run = run;
  drawLens();
  drawAttribution();
}

void LensView::drawLens() {
  const int rows = m_run.states();
  const int columns = int(m_run.positions().size());
  QVector<ValueGrid::Cell> cells(rows * columns);
  for (int s = 0; s < rows; ++s) {
    for (int c = 0; c < columns; ++c) {
      const LensRun::Cell in = m_run.cell(s, c);
      if (!in.present) continue;
      ValueGrid::Cell& out = cells[s * columns + c];
      out.color = heatColor(std::isfinite(in.topP) ? in.topP : 0.0);
      out.text = shortToken(in.topToken, 6);
      out.tooltip = in.tooltip;
    }
  }
  QStringList rowLabels;
  for (int s = 0; s < rows; ++s) {
    rowLabels << (s == 0 ? tr("emb") : s == rows - 1 && m_run.finished() ? tr("%1 out").arg(s)
                                                                            : QString::number(s));
  }
  QStringList columnLabels;
  for (const qint64 position : m_run.positions()) {
    const QString text = position < m_run.tokenTexts().size()
                             ? m_run.tokenTexts()[int(position)]
                             : QString();
    columnLabels << QStringLiteral("%1 %2").arg(position).arg(shortToken(text, 6));
  }
  m_lens->setRowLabels(rowLabels);
  m_lens->setColumnLabels(columnLabels);
  m_lens->setCells(rows, columns, cells);
}

void LensView::drawAttribution() {
  const QVector<QVector<double>> grid = m_run.attributionGrid(0);
  if (grid.isEmpty()) {
    m_caption->setLine(tr("Direct logit attribution: after the pass."));
    m_attribution->setCells(0, 0, {});
    return;
  }
  const v1::PositionAttribution& a = m_run.attributions().first();
  const int layers = int(grid.size());
  const int columns = int(grid.first().size());
  const double scale = m_run.attributionScale(0);
  const QString target = QString::fromStdString(a.target_token());
  QVector<ValueGrid::Cell> cells(layers * columns);
  for (int l = 0; l < layers; ++l) {
    for (int c = 0; c < columns; ++c) {
      const double v = grid[l][c];
      ValueGrid::Cell& out = cells[l * columns + c];
      out.color = divergingColor(scale > 0 ? v / scale : 0.0);
      out.text = QString::number(v, 'f', 2);
      const QString component =
          c == columns - 1 ? tr("layer %1 MLP").arg(l) : tr("layer %1 head %2").arg(l).arg(c);
      out.tooltip = tr("%1: %2 to the logit of %3").arg(component, signedValue(v), target);
    }
  }
  QStringList rowLabels, columnLabels;
  for (int l = 0; l < layers; ++l) rowLabels << QStringLiteral("L%1").arg(l);
  for (int c = 0; c + 1 < columns; ++c) columnLabels << QStringLiteral("H%1").arg(c);
  columnLabels << tr("MLP");
  m_attribution->setRowLabels(rowLabels);
  m_attribution->setColumnLabels(columnLabels);
  m_attribution->setCells(layers, columns, cells);
  const QString end = QString::number(scale, 'g', 3);
  m_attribution->setLegend(tr("logit contribution"), divergingColor(-1), divergingColor(1),
                           QStringLiteral("-") + end, QStringLiteral("+") + end,
                           QStringLiteral("0"));
  const qint64 position = a.position();
  const QString token = position < m_run.tokenTexts().size() ? m_run.tokenTexts()[int(position)]
                                                             : QString();
  m_caption->setLine(
      tr("Direct logit attribution at position %1 (\"%2\") to \"%3\" (%4): embedding %5, "
         "offset %6, total %7 = logit %8 (p %9)")
          .arg(position)
          .arg(shortToken(token, 12), target, QString::fromStdString(a.target_source()),
               signedValue(a.embedding()), signedValue(a.offset()), signedValue(a.total()),
               signedValue(a.logit()))
          .arg(a.probability(), 0, 'g', 3));
}

}  // namespace attnscope::dashboard
