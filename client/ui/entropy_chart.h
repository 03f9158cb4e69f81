// Next-token entropy along the prompt and the generated tokens, each point
// coloured by the seed's buckets.
#pragma once

#include <QChartView>

#include "client/models/entropy_series.h"

class QValueAxis;

namespace attnscope::dashboard {

// A grey line over the prompt, a blue dashed one over generated tokens,
// points green (normalized entropy < 0.3), amber (< 0.6) or red, dotted
// guides at 0.3 and 0.6; x labels are the tokens on short sequences.
class EntropyChart : public QChartView {
  Q_OBJECT

 public:
  explicit EntropyChart(QWidget* parent = nullptr);

  void setSeries(const EntropySeries& series);
  // Points drawn in each bucket, for tests.
  int pointCount(int bucket) const { return m_counts[bucket]; }
  // Every labelStep()-th token is labelled (token_axis.h); hover a point for its token.
  int labelStep() const { return m_labelStep; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void clearChart();
  void addGuide(double y, QValueAxis* x, QValueAxis* yAxis);
  QAbstractAxis* makeXAxis(const EntropySeries& series);
  void showPointToolTip(const QPointF& point, bool hovering);

  EntropySeries m_series;
  int m_counts[3] = {0, 0, 0};
  int m_labelStep = 1;
};

}  // namespace attnscope::dashboard
