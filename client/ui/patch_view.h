// The dashboard's Patching tab: two prompts of equal token length (clean
// and corrupted), what to patch (each head's output, or the residual stream
// entering each layer at each position), and the grid of recoveries filled
// as the patched passes arrive (definitions.md, "Activation patching"):
// 1 where the patch restores the clean run's metric, 0 where it changes
// nothing, on a diverging scale.
#pragma once

#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QWidget>

#include "client/models/dashboard_controller.h"
#include "client/models/patch_run.h"

namespace attnscope::dashboard {

class ValueGrid;
class WrapLabel;

class PatchView : public QWidget {
  Q_OBJECT

 public:
  explicit PatchView(QWidget* parent = nullptr);

  void setRun(const PatchRun& run);
  const PatchRun& run() const { return m_run; }
  void setNote(const QString& note, bool isError = false);
  QString note() const;
  // The line under the form: the metric and the passes done.
  QString progressText() const;
  ValueGrid* grid() const { return m_grid; }
  QLineEdit* cleanEdit() const { return m_clean; }
  QLineEdit* corruptedEdit() const { return m_corrupted; }
  QLineEdit* targetAEdit() const { return m_targetA; }
  QLineEdit* targetBEdit() const { return m_targetB; }
  QComboBox* kindBox() const { return m_kind; }
  QPushButton* runButton() const { return m_runButton; }

 Q_SIGNALS:
  // The user asked for a run (text prompts and targets as typed; targets
  // may be empty).
  void runRequested(const attnscope::dashboard::PatchInput& input);

 private:
  void requestRun();
  void draw();

  PatchRun m_run;
  WrapLabel* m_note;
  QLineEdit* m_clean;
  QLineEdit* m_corrupted;
  QLineEdit* m_targetA;
  QLineEdit* m_targetB;
  QComboBox* m_kind;
  QPushButton* m_runButton;
  WrapLabel* m_progress;
  ValueGrid* m_grid;
};

}  // namespace attnscope::dashboard
