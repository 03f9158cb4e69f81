// Numbers of each finished analysis over time, for the dashboard's "across
// requests" chart: context health, anomalous sinks and the highest
// normalized next-token entropy per request.
#pragma once

#include <QDateTime>
#include <QSet>
#include <QString>
#include <QVector>

#include "client/models/feed_model.h"

namespace attnscope::dashboard {

struct TrendPoint {
  QDateTime time;
  quint64 requestId = 0;
  QString model;
  double health = 0.0;      // 0..10
  int sinks = 0;            // anomalous sinks
  double maxEntropy = 0.0;  // 0..1
};

// The newest kMaxPoints analyses, oldest first.
class RequestTrends {
 public:
  static constexpr int kMaxPoints = 500;

  // Adds `row` when it is an Analyze that finished OK (health known) and was
  // not added before; returns whether it did.
  bool add(const FeedRow& row);
  void clear();

  // Every point, or those of one model, oldest first.
  QVector<TrendPoint> points(const QString& model = QString()) const;
  int size() const { return m_points.size(); }

 private:
  QVector<TrendPoint> m_points;
  QSet<QPair<quint64, quint64>> m_seen;  // (session, request id)
};

}  // namespace attnscope::dashboard
