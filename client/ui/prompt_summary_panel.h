// The headline of a prompt: its context health, its anomalous sinks with
// their z-scores, its structural tokens and the massive-activation ratio.
#pragma once

#include <QPointer>
#include <QWidget>

#include "client/models/prompt_analysis.h"

class QLabel;

namespace attnscope::dashboard {
class WrapLabel;
}

namespace attnscope::dashboard {

class PromptSummaryPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PromptSummaryPanel(QWidget* parent = nullptr);

  // The analysis to show (not owned).
  void setAnalysis(PromptAnalysis* analysis);
  // A line under the prompt, e.g. the generated text or an error.
  void setNote(const QString& note, bool isError = false);

  // What the labels show, for tests.
  QString healthText() const;
  QString sinksText() const;
  QString structuralText() const;
  QString promptText() const;
  QString noteText() const;

 private:
  void refresh();
  QString describeSinks(const attnscope::v1::Summary& summary) const;
  QString describeStructural(const attnscope::v1::Summary& summary) const;
  QString describeDetails(const attnscope::v1::Summary& summary) const;

  QPointer<PromptAnalysis> m_analysis;
  QLabel* m_health;
  QLabel* m_prompt;
  QLabel* m_sinks;
  QLabel* m_structural;
  QLabel* m_details;
  WrapLabel* m_note;
};

}  // namespace attnscope::dashboard
