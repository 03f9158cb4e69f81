// Bars of each token's max hidden-state norm (the massive-activation view).
#pragma once

#include <QChartView>
#include <QValueAxis>

#include "client/models/norm_bars_model.h"

namespace attnscope::dashboard {

// Redrawn whenever the NormBarsModel changes: one bar per token labelled with
// its text, a dashed line at the median, the largest bar in red, the ratio
// to the median in the title and in each bar's tooltip.
class NormChart : public QChartView {
  Q_OBJECT

 public:
  explicit NormChart(QWidget* parent = nullptr);

  void setNormModel(NormBarsModel* model);
  // The chart title, e.g. "Max hidden-state norm · token 0 is 12.4× the median".
  QString title() const;
  int barCount() const { return m_bars; }
  // Every labelStep()-th bar is labelled (token_axis.h); hover any for its token.
  int labelStep() const { return m_labelStep; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void rebuild();
  QValueAxis* addBars();  // returns the value axis
  void addMedianLine(QValueAxis* y);
  void updateTitle();
  QString tokenText(int token) const;
  void showBarToolTip(bool hovering, int index);

  NormBarsModel* m_model = nullptr;
  int m_bars = 0;
  int m_labelStep = 1;
};

}  // namespace attnscope::dashboard
