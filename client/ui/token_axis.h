// The token axis of the norm and entropy charts.
#pragma once

#include <QCategoryAxis>
#include <QStringList>
#include <QVector>

namespace attnscope::dashboard {

// Tokens at x = positions[i] (ascending, one unit apart), labelled "position
// text" (the text made visible, at most 6 characters) every step-th token,
// step = tokenLabelStep over `pixels` for a label's width, so that labels
// never collapse into '⋮' at tens, hundreds or thousands of tokens. The range is [first - 0.5, last + 0.5]; the charts
// show the full tokens in their hover tooltips.
QCategoryAxis* makeTokenAxis(const QVector<int>& positions, const QStringList& texts,
                             double pixels, int* step = nullptr);

// The step makeTokenAxis would use for `count` tokens over `pixels`.
int tokenAxisStep(int count, double pixels);

// The width the plot gets in a chart view `viewWidth` wide (less the value
// axis and margins).
double tokenAxisPixels(int viewWidth);

}  // namespace attnscope::dashboard
