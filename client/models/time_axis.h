// Ticks for a time axis whose labels never repeat: a round interval (1, 2,
// 5, 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6, 12 h; days) and a
// label format no finer than it, so that four ticks over two seconds do not
// all read "07:27:51".
#pragma once

#include <QDateTime>
#include <QString>
#include <QStringList>

namespace attnscope::dashboard {

struct TimeTicks {
  QDateTime min;       // the first tick, at a multiple of the interval
  QDateTime max;       // the last tick
  int count = 2;       // ticks from min to max inclusive, interval apart
  qint64 intervalMs = 1000;
  QString format;      // "HH:mm:ss" under a minute, "HH:mm" under a day, "MMM d", "yyyy-MM-dd"
};

// The smallest round interval that covers [first, last] (swapped if out of
// order; an empty span is widened to one interval) with at most maxTicks
// ticks (at least 2), min and max rounded out to the interval.
TimeTicks timeTicks(const QDateTime& first, const QDateTime& last, int maxTicks = 5);

// Each tick's label, min to max.
QStringList timeTickLabels(const TimeTicks& ticks);

}  // namespace attnscope::dashboard
