// The dashboard's colour scales, shared by the item models (BackgroundRole)
// and the charts so that one number always has one colour.
#pragma once

#include <QColor>

namespace attnscope::dashboard {

// Context health bands (definitions.md: health is 0..10).
enum class HealthLevel { Red = 0, Amber = 1, Green = 2 };

// Green for health >= 7, amber for >= 4, red below (NaN: red).
HealthLevel healthLevel(double health);

// Saturated colour of a band (text, markers) and a light tint (cell backgrounds).
QColor healthColor(HealthLevel level);
QColor healthTint(HealthLevel level);

// Next-token entropy buckets of the seed (normalized entropy): 0 below 0.3,
// 1 below 0.6, 2 otherwise. NaN: bucket 2.
int entropyBucket(double normalized);
QColor entropyBucketColor(int bucket);

// Sequential scale for weights in [0, 1] (clamped; NaN as 0): white at 0,
// dark blue at 1. Linear in the weight, so equal steps look equal.
QColor heatColor(double weight);

// Diverging scale for signed values in [-1, 1] (clamped; NaN: light grey):
// blue at -1, white at 0, red at +1, linear in the value (contributions to
// a logit, patching recoveries).
QColor divergingColor(double value);

// Black or white, whichever reads better on `background`.
QColor textColorOn(const QColor& background);

// `color` blended towards white by `amount` in [0, 1] (1: white).
QColor faded(const QColor& color, double amount);

}  // namespace attnscope::dashboard
