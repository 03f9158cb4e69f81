#include "client/models/heat_scale.h"

#include <algorithm>
#include <cmath>

#include "client/models/colors.h"

namespace attnscope::dashboard {

QString heatScaleName(HeatScaleKind kind) {
  switch (kind) {
    case HeatScaleKind::Sqrt:
      return QStringLiteral("sqrt");
    case HeatScaleKind::Log:
      return QStringLiteral("log");
    case HeatScaleKind::Linear:
      break;
  }
  return QStringLiteral("linear");
}

HeatScaleKind heatScaleFromName(const QString& name) {
  if (name == QLatin1String("sqrt")) return HeatScaleKind::Sqrt;
  if (name == QLatin1String("log")) return HeatScaleKind::Log;
  return HeatScaleKind::Linear;
}

double HeatScale::position(double value) const {
  if (std::isnan(value)) return value;
  const double v = std::clamp(value, 0.0, 1.0);
  switch (m_kind) {
    case HeatScaleKind::Sqrt:
      return std::sqrt(v);
    case HeatScaleKind::Log: {
      if (v <= kLogFloor) return 0.0;
      const double decades = -std::log10(kLogFloor);
      return (std::log10(v) + decades) / decades;
    }
    case HeatScaleKind::Linear:
      break;
  }
  return v;
}

double HeatScale::valueAt(double t) const {
  const double p = std::isnan(t) ? 0.0 : std::clamp(t, 0.0, 1.0);
  switch (m_kind) {
    case HeatScaleKind::Sqrt:
      return p * p;
    case HeatScaleKind::Log: {
      const double decades = -std::log10(kLogFloor);
      return std::pow(10.0, p * decades - decades);
    }
    case HeatScaleKind::Linear:
      break;
  }
  return p;
}

int HeatScale::colorIndex(double value) const {
  const double t = position(value);
  if (std::isnan(t)) return -1;
  return static_cast<int>(std::lround(t * (kLevels - 1)));
}

QColor HeatScale::color(double value) const {
  const int index = colorIndex(value);
  if (index < 0) return missingColor();
  return heatColor(double(index) / (kLevels - 1));
}

QVector<double> HeatScale::ticks() const {
  switch (m_kind) {
    case HeatScaleKind::Sqrt:
      return {0.0, 0.01, 0.05, 0.25, 0.5, 1.0};
    case HeatScaleKind::Log:
      return {1e-4, 1e-3, 1e-2, 0.1, 1.0};
    case HeatScaleKind::Linear:
      break;
  }
  return {0.0, 0.25, 0.5, 0.75, 1.0};
}

double rowMaximum(const float* row, int n) {
  double top = 0.0;
  for (int i = 0; i < n; ++i) {
    if (std::isfinite(row[i]) && row[i] > top) top = row[i];
  }
  return top;
}

double normalisedByRow(double value, double rowMax) {
  return rowMax > 0.0 ? value / rowMax : value;
}

QString heatTickLabel(double value) {
  if (value == 0.0) return QStringLiteral("0");
  if (value >= 1.0) return QString::number(value, 'g', 3);
  if (value < 0.01) {
    const int exponent = static_cast<int>(std::lround(std::log10(value)));
    if (std::abs(value - std::pow(10.0, exponent)) < 1e-12) return QStringLiteral("1e%1").arg(exponent);
    return QString::number(value, 'g', 2);
  }
  QString text = QString::number(value, 'g', 2);
  if (text.startsWith(QLatin1String("0."))) text.remove(0, 1);
  return text;
}

}  // namespace attnscope::dashboard
