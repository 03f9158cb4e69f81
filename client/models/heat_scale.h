// How an attention weight becomes a colour: the scale (linear, square root
// or logarithmic) and per-row normalisation. Diffuse heads at hundreds or
// thousands of tokens give every key ~1/T, which a linear 0..1 scale shows
// as blank; √w and log w spread the small weights out.
#pragma once

#include <QColor>
#include <QString>
#include <QVector>

namespace attnscope::dashboard {

enum class HeatScaleKind { Linear = 0, Sqrt = 1, Log = 2 };

// "linear", "sqrt", "log"; and back (unknown names: Linear).
QString heatScaleName(HeatScaleKind kind);
HeatScaleKind heatScaleFromName(const QString& name);

// Maps a value in [0, 1] (a weight, or a weight over its row's maximum) to a
// position t in [0, 1] along heatColor's scale. Linear: t = w. Sqrt: t = √w.
// Log: t = (log10 w - log10 kLogFloor) / -log10 kLogFloor, so kLogFloor..1
// spans the scale (four decades) and anything at or below the floor is 0.
// Values are clamped to [0, 1]; NaN maps to NaN (colour: kMissing).
class HeatScale {
 public:
  static constexpr double kLogFloor = 1e-4;
  static constexpr int kLevels = 256;  // colour indices 0..255

  explicit HeatScale(HeatScaleKind kind = HeatScaleKind::Linear) : m_kind(kind) {}

  HeatScaleKind kind() const { return m_kind; }
  double position(double value) const;
  // The value at position t (t clamped to [0, 1]); Log at t = 0: kLogFloor.
  double valueAt(double t) const;
  // round(position * (kLevels - 1)); -1 for NaN.
  int colorIndex(double value) const;
  // heatColor at the value's position; kMissing for NaN.
  QColor color(double value) const;
  // Values to label a colour bar with, ascending, from the scale's low end
  // to 1 (e.g. log: 1e-4, 1e-3, 0.01, 0.1, 1).
  QVector<double> ticks() const;

  // Light grey: a value that is not a number.
  static QColor missingColor() { return QColor(0xd9, 0xd9, 0xd9); }

 private:
  HeatScaleKind m_kind;
};

// The largest finite value of row[0..n), 0 when there is none (all NaN,
// n = 0): a row divided by it has maximum 1 (per-row normalisation).
double rowMaximum(const float* row, int n);

// value / rowMax for rowMax > 0 (the cell's share of its row's peak), the
// value itself otherwise; NaN stays NaN.
double normalisedByRow(double value, double rowMax);

// A tick's label: "0", "1", ".25", "1e-3" (decimals below 0.01 in exponent form).
QString heatTickLabel(double value);

}  // namespace attnscope::dashboard
