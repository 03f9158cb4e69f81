#include "client/models/colors.h"

#include <algorithm>
#include <cmath>

namespace attnscope::dashboard {
namespace {

// Five stops of a white-to-navy scale (ColorBrewer "Blues").
constexpr QRgb kHeatStops[] = {0xffffff, 0xc6dbef, 0x6baed6, 0x2171b5, 0x08306b};
constexpr int kHeatStopCount = sizeof(kHeatStops) / sizeof(kHeatStops[0]);

int lerp(int a, int b, double t) { return static_cast<int>(std::lround(a + (b - a) * t)); }

}  // namespace

HealthLevel healthLevel(double health) {
  if (health >= 7.0) return HealthLevel::Green;
  if (health >= 4.0) return HealthLevel::Amber;
  return HealthLevel::Red;
}

QColor healthColor(HealthLevel level) {
  switch (level) {
    case HealthLevel::Green:
      return QColor(0x2e, 0x7d, 0x32);
    case HealthLevel::Amber:
      return QColor(0xe6, 0x8a, 0x00);
    case HealthLevel::Red:
      break;
  }
  return QColor(0xc6, 0x28, 0x28);
}

QColor healthTint(HealthLevel level) { return faded(healthColor(level), 0.75); }

int entropyBucket(double normalized) {
  if (normalized < 0.3) return 0;
  if (normalized < 0.6) return 1;
  return 2;
}

QColor entropyBucketColor(int bucket) {
  if (bucket <= 0) return healthColor(HealthLevel::Green);
  if (bucket == 1) return healthColor(HealthLevel::Amber);
  return healthColor(HealthLevel::Red);
}

QColor heatColor(double weight) {
  const double w = std::isnan(weight) ? 0.0 : std::clamp(weight, 0.0, 1.0);
  const double scaled = w * (kHeatStopCount - 1);
  const int low = std::min(static_cast<int>(scaled), kHeatStopCount - 2);
  const double t = scaled - low;
  const QColor a(kHeatStops[low]);
  const QColor b(kHeatStops[low + 1]);
  return QColor(lerp(a.red(), b.red(), t), lerp(a.green(), b.green(), t),
                lerp(a.blue(), b.blue(), t));
}

QColor divergingColor(double value) {
  if (std::isnan(value)) return QColor(0xd9, 0xd9, 0xd9);
  const double v = std::clamp(value, -1.0, 1.0);
  // White to red (0xb2182b) above 0, white to blue (0x2166ac) below.
  const QColor end = v >= 0 ? QColor(0xb2, 0x18, 0x2b) : QColor(0x21, 0x66, 0xac);
  const double t = std::fabs(v);
  auto mix = [t](int from, int to) { return int(std::lround(from + (to - from) * t)); };
  return QColor(mix(255, end.red()), mix(255, end.green()), mix(255, end.blue()));
}

QColor textColorOn(const QColor& background) {
  // Rec. 601 luma: good enough to pick between black and white.
  const double luma =
      0.299 * background.red() + 0.587 * background.green() + 0.114 * background.blue();
  return luma < 140.0 ? QColor(Qt::white) : QColor(Qt::black);
}

QColor faded(const QColor& color, double amount) {
  const double t = std::clamp(amount, 0.0, 1.0);
  return QColor(lerp(color.red(), 255, t), lerp(color.green(), 255, t), lerp(color.blue(), 255, t));
}

}  // namespace attnscope::dashboard
