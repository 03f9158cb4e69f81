// A colour bar legend: what the colours of a heat grid mean.
#pragma once

#include <QStringList>
#include <QWidget>

#include "client/models/heat_scale.h"

namespace attnscope::dashboard {

// "caption [gradient]" with the scale's ticks (HeatScale::ticks) labelled
// under the gradient where they sit on it; one line of text high, as wide as
// it is given (never asks for much).
class ColorBar : public QWidget {
  Q_OBJECT

 public:
  explicit ColorBar(QWidget* parent = nullptr);

  void setScale(attnscope::dashboard::HeatScaleKind kind);
  void setCaption(const QString& caption);
  HeatScaleKind scale() const { return m_scale.kind(); }
  QString caption() const { return m_caption; }
  // The tick labels shown, low to high (e.g. "1e-4" ... "1" on a log scale).
  QStringList tickLabels() const;
  // The caption as drawn at the current width: whole unless the bar would
  // be left narrower than a few ticks, then elided.
  QString shownCaption() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  int captionWidth() const;
  int tickMargin() const;

  HeatScale m_scale;
  QString m_caption;
};

}  // namespace attnscope::dashboard
