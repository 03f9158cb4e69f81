// Health, anomalous sinks and the highest next-token entropy of each
// finished analysis over time, so watching the feed does not mean clicking
// every row.
#pragma once

#include <QChartView>
#include <QStringList>

#include "client/models/request_trends.h"

namespace attnscope::dashboard {

// Left axis: context health (0..10, green line) and sinks per request (red
// line); right axis: max normalized entropy (0..1, blue dashed). X: time.
class TrendChart : public QChartView {
  Q_OBJECT

 public:
  explicit TrendChart(QWidget* parent = nullptr);

  void setTrends(const QVector<TrendPoint>& points);
  // Points drawn per series (0 health, 1 sinks, 2 max entropy), for tests.
  int pointCount(int series) const;
  // The labels the time axis draws, first to last (its tickCount ticks
  // spread evenly from min to max, in its format); empty without an axis.
  QStringList timeLabels() const;

 private:
  int m_counts[3] = {0, 0, 0};
};

}  // namespace attnscope::dashboard
