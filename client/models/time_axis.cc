#include "client/models/time_axis.h"

#include <utility>

namespace attnscope::dashboard {
namespace {

constexpr qint64 kSecond = 1000;
constexpr qint64 kMinute = 60 * kSecond;
constexpr qint64 kHour = 60 * kMinute;
constexpr qint64 kDay = 24 * kHour;
constexpr qint64 kIntervals[] = {
    kSecond,     2 * kSecond,  5 * kSecond,  10 * kSecond, 15 * kSecond, 30 * kSecond,
    kMinute,     2 * kMinute,  5 * kMinute,  10 * kMinute, 15 * kMinute, 30 * kMinute,
    kHour,       2 * kHour,    3 * kHour,    6 * kHour,    12 * kHour,   kDay,
    2 * kDay,    7 * kDay,     14 * kDay,    30 * kDay,    91 * kDay,    365 * kDay};

// floor and ceil to a multiple of step (ms since the epoch are positive here,
// but keep negatives right too).
qint64 floorTo(qint64 value, qint64 step) {
  const qint64 q = value / step;
  return (value % step < 0 ? q - 1 : q) * step;
}

qint64 ceilTo(qint64 value, qint64 step) { return -floorTo(-value, step); }

QString formatFor(qint64 interval) {
  if (interval < kMinute) return QStringLiteral("HH:mm:ss");
  if (interval < kDay) return QStringLiteral("HH:mm");
  if (interval < 30 * kDay) return QStringLiteral("MMM d");
  return QStringLiteral("yyyy-MM-dd");
}

}  // namespace

TimeTicks timeTicks(const QDateTime& first, const QDateTime& last, int maxTicks) {
  maxTicks = qMax(2, maxTicks);
  qint64 lo = first.toMSecsSinceEpoch();
  qint64 hi = last.toMSecsSinceEpoch();
  if (hi < lo) std::swap(lo, hi);
  TimeTicks ticks;
  for (const qint64 interval : kIntervals) {
    qint64 start = floorTo(lo, interval);
    qint64 end = ceilTo(hi, interval);
    if (end == start) end = start + interval;
    const qint64 count = (end - start) / interval + 1;
    ticks.min = QDateTime::fromMSecsSinceEpoch(start);
    ticks.max = QDateTime::fromMSecsSinceEpoch(end);
    ticks.count = int(qMin<qint64>(count, 1 << 20));
    ticks.intervalMs = interval;
    ticks.format = formatFor(interval);
    if (count <= maxTicks) break;
  }
  return ticks;
}

QStringList timeTickLabels(const TimeTicks& ticks) {
  QStringList labels;
  const qint64 start = ticks.min.toMSecsSinceEpoch();
  for (int i = 0; i < ticks.count; ++i)
    labels << QDateTime::fromMSecsSinceEpoch(start + i * ticks.intervalMs).toString(ticks.format);
  return labels;
}

}  // namespace attnscope::dashboard
