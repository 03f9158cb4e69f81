// One Patch call as the dashboard draws it (definitions.md, "Activation
// patching"): the baseline (both prompts, the metric's targets, its clean
// and corrupted values) and a grid of recoveries, layers by heads (or by
// positions for the residual stream), filled as the patched passes arrive.
#pragma once

#include <QString>
#include <QVector>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

class PatchRun {
 public:
  // Applies one event of the Patch stream.
  void addEvent(const attnscope::v1::PatchEvent& event);

  bool hasBaseline() const { return m_hasBaseline; }
  const attnscope::v1::PatchBaseline& baseline() const { return m_baseline; }
  int rows() const { return m_rows; }
  int columns() const { return m_columns; }
  // The recovery of (layer, column); NaN until its pass arrives.
  double recovery(int layer, int column) const;
  double metric(int layer, int column) const;
  // Passes received and the run's total (from the last step).
  qint64 done() const { return m_done; }
  qint64 total() const { return m_total; }
  bool finished() const { return m_finished; }
  const attnscope::v1::PatchSummary& summary() const { return m_summary; }
  // "heads" or "residual".
  QString kindName() const;
  // A column's label: "H3", or the position's token as it reads ("7 ␣Paris")
  // for the residual stream.
  QString columnLabel(int column) const;

 private:
  bool m_hasBaseline = false;
  attnscope::v1::PatchBaseline m_baseline;
  int m_rows = 0;
  int m_columns = 0;
  QVector<double> m_recovery;
  QVector<double> m_metric;
  qint64 m_done = 0;
  qint64 m_total = 0;
  bool m_finished = false;
  attnscope::v1::PatchSummary m_summary;
};

}  // namespace attnscope::dashboard
