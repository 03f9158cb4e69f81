// One EvaluateEviction run as the dashboard draws it: per policy, the
// running perplexity after every step and, for the sink policies, the text
// positions the cache kept over time. Filled live from the RPC's events or
// at once from a finished feed event (whose nll arrays give the curves and
// whose sink policies' kept positions follow from their definition).
#pragma once

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

class EvictionRun {
 public:
  struct Policy {
    QString name;            // "sinks:4+28"
    QVector<QPointF> curve;  // (steps done, running perplexity)
    // Kept text positions after step t, one row per step (empty for
    // policies whose cache is not drawn).
    QVector<QVector<qint64>> kept;
    double perplexity = 0;  // final (0 until the summary)
    bool done = false;
  };

  // Applies one event of the EvaluateEviction stream.
  void addEvent(const attnscope::v1::EvaluateEvictionEvent& event);
  // The run a finished feed event carries; empty when it has none.
  static EvictionRun fromFinished(const attnscope::v1::RequestFinished& finished);

  const QVector<Policy>& policies() const { return m_policies; }
  int textTokens() const { return m_textTokens; }
  int stepsTotal() const { return m_stepsTotal; }
  // True for full, sinks:S+R and window:R: their kept positions are drawn.
  static bool isSinkPolicy(const QString& name);
  // Kept positions of sinks:S+R / window:R after step t (0-based): the first
  // S and the R most recent of 0..t (all of them while t + 1 <= S + R).
  static QVector<qint64> sinkKept(const QString& name, int step);

 private:
  Policy& policy(int index, const QString& name);

  QVector<Policy> m_policies;
  int m_textTokens = 0;
  int m_stepsTotal = 0;
};

}  // namespace attnscope::dashboard
