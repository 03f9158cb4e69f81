// The dashboard's view of an EvaluateEviction run: running perplexity per
// policy over the text (log scale), and the text positions a sink policy's
// cache kept at every step (x: step, y: text position; the first S rows stay
// lit, the recent window slides along the diagonal).
#pragma once

#include <QChartView>
#include <QComboBox>
#include <QImage>
#include <QLabel>
#include <QWidget>

#include "client/models/eviction_run.h"

class QLineSeries;
class QLogValueAxis;
class QValueAxis;

namespace attnscope::dashboard {

class WrapLabel;

// Paints one policy's kept positions as an image, one column per step.
class KeptPositionsView : public QWidget {
  Q_OBJECT

 public:
  explicit KeptPositionsView(QWidget* parent = nullptr);
  void setPolicy(const EvictionRun::Policy* policy, int textTokens);
  // Cells lit in the picture, for tests.
  int litCells() const { return m_lit; }
  QSize sizeHint() const override { return QSize(480, 220); }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QImage m_image;
  int m_lit = 0;
};

class EvictionView : public QWidget {
  Q_OBJECT

 public:
  explicit EvictionView(QWidget* parent = nullptr);

  // Redraws from `run` (call after each batch of events).
  void setRun(const EvictionRun& run);
  const EvictionRun& run() const { return m_run; }
  // A line above the chart (what is shown, why nothing is), red when an
  // error; empty hides it.
  void setNote(const QString& note, bool isError = false);
  QString note() const;
  // Points drawn for policy `index`, for tests.
  int curvePoints(int index) const;
  KeptPositionsView* keptView() const { return m_kept; }

 private:
  void showKept(int comboIndex);

  EvictionRun m_run;
  WrapLabel* m_note;
  QChartView* m_chart;
  QValueAxis* m_x;
  QLogValueAxis* m_y;
  QVector<QLineSeries*> m_series;  // one per policy, in order (owned by the chart)
  QComboBox* m_policyBox;
  QLabel* m_summary;
  KeptPositionsView* m_kept;
  QVector<int> m_points;
};

}  // namespace attnscope::dashboard
