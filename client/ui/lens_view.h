// The dashboard's Lens tab: the logit lens of the shown prompt as a grid of
// hidden states (rows: 0 = the embeddings .. L = after the final norm) by
// positions, each cell coloured by its most likely token's probability and
// naming that token where it fits; under it the direct logit attribution
// of the last position's target, layers by heads with the MLP last, on a
// diverging scale (definitions.md, "Logit lens", "Direct logit
// attribution").
#pragma once

#include <QPushButton>
#include <QWidget>

#include "client/models/lens_run.h"

namespace attnscope::dashboard {

class ValueGrid;
class WrapLabel;

class LensView : public QWidget {
  Q_OBJECT

 public:
  explicit LensView(QWidget* parent = nullptr);

  // Redraws from `run` (call after each batch of events).
  void setRun(const LensRun& run);
  const LensRun& run() const { return m_run; }
  // A line at the top (what is shown, why nothing is), red when an error.
  void setNote(const QString& note, bool isError = false);
  QString note() const;
  ValueGrid* lensGrid() const { return m_lens; }
  ValueGrid* attributionGrid() const { return m_attribution; }
  QString attributionCaption() const;
  QPushButton* runButton() const { return m_runButton; }

 Q_SIGNALS:
  // The user asked for the lens of the shown prompt.
  void runRequested();

 private:
  void drawLens();
  void drawAttribution();

  LensRun m_run;
  WrapLabel* m_note;
  QPushButton* m_runButton;
  ValueGrid* m_lens;
  WrapLabel* m_caption;
  ValueGrid* m_attribution;
};

}  // namespace attnscope::dashboard
