#include "client/ui/prompt_summary_panel.h"

#include <QGridLayout>
#include <QLabel>

#include "client/models/colors.h"
#include "client/models/token_labels.h"
#include "client/ui/wrap_label.h"

namespace attnscope::dashboard {
namespace {

QLabel* makeLabel(QWidget* parent, const char* name) {
  auto* label = new QLabel(parent);
  label->setObjectName(QString::fromLatin1(name));
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setWordWrap(true);
  return label;
}

}  // namespace

PromptSummaryPanel::PromptSummaryPanel(QWidget* parent)
    : QWidget(parent),
      m_health(makeLabel(this, "healthLabel")),
      m_prompt(makeLabel(this, "promptLabel")),
      m_sinks(makeLabel(this, "sinksLabel")),
      m_structural(makeLabel(this, "structuralLabel")),
      m_details(makeLabel(this, "detailsLabel")),
      m_note(new WrapLabel(this)) {
  m_note->setObjectName(QStringLiteral("noteLabel"));
  m_health->setAlignment(Qt::AlignCenter);
  m_health->setMinimumWidth(110);
  m_health->setWordWrap(false);
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(6, 4, 6, 4);
  grid->setHorizontalSpacing(12);
  grid->setVerticalSpacing(2);
  grid->addWidget(m_health, 0, 0, 5, 1);
  grid->addWidget(m_prompt, 0, 1);
  grid->addWidget(m_sinks, 1, 1);
  grid->addWidget(m_structural, 2, 1);
  grid->addWidget(m_details, 3, 1);
  grid->addWidget(m_note, 4, 1);
  grid->setColumnStretch(1, 1);
  refresh();
}

void PromptSummaryPanel::setAnalysis(PromptAnalysis* analysis) {
  if (m_analysis) disconnect(m_analysis, nullptr, this, nullptr);
  m_analysis = analysis;
  connect(analysis, &PromptAnalysis::cleared, this, &PromptSummaryPanel::refresh);
  connect(analysis, &PromptAnalysis::tokensReady, this, &PromptSummaryPanel::refresh);
  connect(analysis, &PromptAnalysis::summaryReady, this, &PromptSummaryPanel::refresh);
  connect(analysis, &PromptAnalysis::rejected, this, &PromptSummaryPanel::refresh);
  connect(analysis, &PromptAnalysis::failed, this, &PromptSummaryPanel::refresh);
  refresh();
}

void PromptSummaryPanel::setNote(const QString& note, bool isError) {
  m_note->setMessage(note, isError, QColor(0x1d, 0x4f, 0x91));
}

QString PromptSummaryPanel::healthText() const { return m_health->text(); }
QString PromptSummaryPanel::sinksText() const { return m_sinks->text(); }
QString PromptSummaryPanel::structuralText() const { return m_structural->text(); }
QString PromptSummaryPanel::promptText() const { return m_prompt->text(); }
QString PromptSummaryPanel::noteText() const { return m_note->line(); }

void PromptSummaryPanel::refresh() {
  const attnscope::v1::Summary* summary = m_analysis ? m_analysis->summary() : nullptr;
  const QString prompt = m_analysis ? m_analysis->promptText() : QString();
  m_prompt->setText(prompt.isEmpty() ? tr("Select a prompt in the feed, or send one.")
                                     : QStringLiteral("<b>%1</b> · %2")
                                           .arg(breakLongRuns(m_analysis->model()).toHtmlEscaped(),
                                                breakLongRuns(promptPreviewLine(prompt, 160))
                                                    .toHtmlEscaped()));
  if (summary == nullptr) {
    const bool failed = m_analysis && !m_analysis->failure().isEmpty();
    const bool waiting = m_analysis && !prompt.isEmpty() && !failed;
    m_health->setText(waiting ? tr("…") : QStringLiteral("–"));
    m_health->setStyleSheet(QStringLiteral("font-size: 26pt; color: #777;"));
    if (failed) {
      m_sinks->setText(tr("<span style='color:#c62828'><b>Failed:</b> %1</span>")
                           .arg(breakLongRuns(m_analysis->failure()).toHtmlEscaped()));
    } else if (waiting && m_analysis->hasTokens()) {
      m_sinks->setText(tr("analyzing %1 tokens…").arg(m_analysis->tokenCount()));
    } else {
      m_sinks->setText(waiting ? tr("waiting for the server…") : QString());
    }
    m_structural->clear();
    m_details->setText(m_analysis && !m_analysis->errors().isEmpty()
                           ? tr("<span style='color:#c62828'>%1</span>")
                                 .arg(breakLongRuns(m_analysis->errors().last()).toHtmlEscaped())
                           : QString());
    return;
  }
  const QColor color = healthColor(healthLevel(summary->health()));
  m_health->setText(QStringLiteral("%1<span style='font-size:11pt'> / 10</span><br>"
                                   "<span style='font-size:9pt'>context health</span>")
                        .arg(summary->health(), 0, 'f', 1));
  m_health->setStyleSheet(
      QStringLiteral("font-size: 26pt; font-weight: bold; color: %1;").arg(color.name()));
  m_sinks->setText(describeSinks(*summary));
  m_structural->setText(describeStructural(*summary));
  m_details->setText(describeDetails(*summary));
}

QString PromptSummaryPanel::describeSinks(const attnscope::v1::Summary& summary) const {
  if (summary.sinks_size() == 0) {
    return tr("<b>Sinks:</b> none above z = %1 among %2 candidates")
        .arg(summary.threshold())
        .arg(summary.num_candidates());
  }
  QStringList parts;
  for (const attnscope::v1::Sink& sink : summary.sinks()) {
    parts << QStringLiteral("%1 <i>z</i> = %2")
                 .arg(positionedTokenLabel(int(sink.position()),
                                           m_analysis->token(int(sink.position())).text, 16)
                          .toHtmlEscaped())
                 .arg(sink.z(), 0, 'f', 1);
  }
  return tr("<b>Sinks</b> (z > %1): %2")
      .arg(summary.threshold())
      .arg(parts.join(QStringLiteral(", ")));
}

QString PromptSummaryPanel::describeStructural(const attnscope::v1::Summary& summary) const {
  QStringList parts;
  for (const int64_t position : summary.structural()) {
    parts << positionedTokenLabel(int(position), m_analysis->token(int(position)).text, 16)
                 .toHtmlEscaped();
  }
  return tr("<b>Structural</b> (%1 template): %2")
      .arg(QString::fromStdString(summary.template_()).toHtmlEscaped(),
           parts.isEmpty() ? tr("none") : parts.join(QStringLiteral(", ")));
}

QString PromptSummaryPanel::describeDetails(const attnscope::v1::Summary& summary) const {
  return tr("%1 tokens · massive activation %2× at %3 · back-half sink share %4 · %5 ms")
      .arg(m_analysis->tokenCount())
      .arg(summary.massive_ratio(), 0, 'f', 1)
      .arg(summary.massive_argmax())
      .arg(summary.back_half_sink_share(), 0, 'f', 2)
      .arg(summary.timings().total_seconds() * 1000.0, 0, 'f', 0);
}

}  // namespace attnscope::dashboard
