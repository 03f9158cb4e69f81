#include "client/ui/patch_view.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QVBoxLayout>
#include <cmath>

#include "client/models/colors.h"
#include "client/ui/value_grid.h"
#include "client/ui/wrap_label.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

QString value(double v) {
  return std::isfinite(v) ? QString::asprintf("%+.3f", v) : QStringLiteral("NaN");
}

}  // namespace

PatchView::PatchView(QWidget* parent)
    : QWidget(parent),
      m_note(new WrapLabel(this)),
      m_clean(new QLineEdit(this)),
      m_corrupted(new QLineEdit(this)),
      m_targetA(new QLineEdit(this)),
      m_targetB(new QLineEdit(this)),
      m_kind(new QComboBox(this)),
      m_runButton(new QPushButton(tr("Patch"), this)),
      m_progress(new WrapLabel(this)),
      m_grid(new ValueGrid(this)) {
  setObjectName(QStringLiteral("patchView"));
  m_clean->setObjectName(QStringLiteral("patchCleanEdit"));
  m_corrupted->setObjectName(QStringLiteral("patchCorruptedEdit"));
  m_grid->setObjectName(QStringLiteral("patchGrid"));
  m_clean->setPlaceholderText(tr("clean prompt, e.g. The Eiffel Tower is in"));
  m_corrupted->setPlaceholderText(tr("corrupted prompt of as many tokens, e.g. The Colosseum is in"));
  m_targetA->setObjectName(QStringLiteral("patchTargetAEdit"));
  m_targetB->setObjectName(QStringLiteral("patchTargetBEdit"));
  m_targetA->setPlaceholderText(tr("a: one token, e.g. \" Paris\" (empty: the clean run's top)"));
  m_targetB->setPlaceholderText(tr("b: one token (empty: the corrupted run's top)"));
  m_kind->addItem(tr("each head's output"), false);
  m_kind->addItem(tr("the residual stream per position"), true);
  m_grid->setLegend(tr("recovery"), divergingColor(-1), divergingColor(1), QStringLiteral("-1"),
                    QStringLiteral("1"), QStringLiteral("0"));
  auto* form = new QFormLayout;
  form->addRow(tr("Clean"), m_clean);
  form->addRow(tr("Corrupted"), m_corrupted);
  auto* targets = new QHBoxLayout;
  targets->addWidget(m_targetA);
  targets->addWidget(m_targetB);
  form->addRow(tr("Targets"), targets);
  auto* row = new QHBoxLayout;
  row->addWidget(m_kind, 1);
  row->addWidget(m_runButton);
  form->addRow(tr("Patch"), row);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_note);
  layout->addLayout(form);
  layout->addWidget(m_progress);
  layout->addWidget(m_grid, 1);
  connect(m_runButton, &QPushButton::clicked, this, &PatchView::requestRun);
  connect(m_corrupted, &QLineEdit::returnPressed, this, &PatchView::requestRun);
  setNote(tr("Activation patching: each component taken from the clean run into the corrupted "
             "run, one pass each; the metric is logit(a) - logit(b) at the last position, a and "
             "b the two runs' top predictions."));
  draw();
}

void PatchView::requestRun() {
  PatchInput input;
  input.clean.text = m_clean->text();
  input.corrupted.text = m_corrupted->text();
  if (input.clean.text.trimmed().isEmpty() || input.corrupted.text.trimmed().isEmpty()) {
    setNote(tr("Give both prompts."), true);
    return;
  }
  // A target's leading space is part of the token (" Paris"): kept as typed.
  input.targetA = m_targetA->text();
  input.targetB = m_targetB->text();
  input.residual = m_kind->currentData().toBool();
  Q_EMIT runRequested(input);
}

void PatchView::setNote(const QString& note, bool isError) {
  m_note->setMessage(note, isError);
  m_note->setVisible(!note.isEmpty());
}

QString PatchView::note() const { return m_note->line(); }

QString PatchView::progressText() const { return m_progress->line(); }

void PatchView::setRun(const PatchRun& run) {
  m_run = run;
  draw();
}

void PatchView::draw() {
  const int rows = m_run.rows();
  const int columns = m_run.columns();
  QVector<ValueGrid::Cell> cells(rows * columns);
  for (int l = 0; l < rows; ++l) {
    for (int c = 0; c < columns; ++c) {
      const double r = m_run.recovery(l, c);
      if (std::isnan(r)) continue;  // not arrived
      ValueGrid::Cell& out = cells[l * columns + c];
      out.color = divergingColor(r);
      out.text = QString::number(r, 'f', 2);
      out.tooltip = tr("layer %1, %2: recovery %3, metric %4")
                        .arg(l)
                        .arg(m_run.columnLabel(c), value(r), value(m_run.metric(l, c)));
    }
  }
  QStringList rowLabels, columnLabels;
  for (int l = 0; l < rows; ++l) rowLabels << QStringLiteral("L%1").arg(l);
  for (int c = 0; c < columns; ++c) columnLabels << m_run.columnLabel(c);
  m_grid->setRowLabels(rowLabels);
  m_grid->setColumnLabels(columnLabels);
  m_grid->setCells(rows, columns, cells);
  if (!m_run.hasBaseline()) {
    m_progress->setLine(QString());
    return;
  }
  const v1::PatchBaseline& b = m_run.baseline();
  m_progress->setLine(
      tr("%1: metric logit(\"%2\") - logit(\"%3\"), clean %4, corrupted %5; %6 of %7 passes%8")
          .arg(m_run.kindName(), QString::fromStdString(b.target_a_token()),
               QString::fromStdString(b.target_b_token()), value(b.clean_metric()),
               value(b.corrupted_metric()))
          .arg(m_run.done())
          .arg(m_run.total() > 0 ? m_run.total() : qint64(rows) * columns)
          .arg(m_run.finished() ? tr(" (done)") : QString()));
}

}  // namespace attnscope::dashboard
