#include "client/models/request_trends.h"

#include <cmath>

namespace attnscope::dashboard {

bool RequestTrends::add(const FeedRow& row) {
  if (row.rpc != QLatin1String("Analyze") || row.state != FeedRow::State::Finished ||
      std::isnan(row.health) || row.sinkCount < 0) {
    return false;
  }
  const QPair<quint64, quint64> key(row.session, row.requestId);
  if (m_seen.contains(key)) return false;
  m_seen.insert(key);
  TrendPoint point;
  point.time = row.time;
  point.requestId = row.requestId;
  point.model = row.model;
  point.health = row.health;
  point.sinks = row.sinkCount;
  point.maxEntropy = std::isnan(row.maxEntropy) ? 0.0 : row.maxEntropy;
  // Requests finish in any order; keep the series sorted by time.
  int at = m_points.size();
  while (at > 0 && m_points[at - 1].time > point.time) --at;
  m_points.insert(at, point);
  if (m_points.size() > kMaxPoints) m_points.removeFirst();
  return true;
}

void RequestTrends::clear() {
  m_points.clear();
  m_seen.clear();
}

QVector<TrendPoint> RequestTrends::points(const QString& model) const {
  if (model.isEmpty()) return m_points;
  QVector<TrendPoint> out;
  for (const TrendPoint& p : m_points) {
    if (p.model == model) out.append(p);
  }
  return out;
}

}  // namespace attnscope::dashboard
