#include "client/models/entropy_series.h"

#include <cmath>

#include "client/models/colors.h"
#include "client/models/model_error.h"

namespace attnscope::dashboard {
namespace {

constexpr double kSlack = 1e-6;

QString checkValues(double normalized, double nats) {
  if (!std::isfinite(normalized) || !std::isfinite(nats))
    return QStringLiteral("entropy is not finite");
  if (normalized < -kSlack || normalized > 1.0 + kSlack) {
    return QStringLiteral("normalized entropy %1 outside [0, 1]").arg(normalized);
  }
  if (nats < 0.0) return QStringLiteral("entropy %1 nats < 0").arg(nats);
  return QString();
}

}  // namespace

bool EntropySeries::setPrompt(const QStringList& texts, const QVector<double>& normalized,
                              const QVector<double>& nats, QString* error) {
  if (texts.size() != normalized.size() || texts.size() != nats.size()) {
    return fail(error, QStringLiteral("prompt entropy: %1 texts, %2 normalized, %3 nats values")
                           .arg(texts.size())
                           .arg(normalized.size())
                           .arg(nats.size()));
  }
  QVector<EntropyPoint> points;
  for (int i = 0; i < texts.size(); ++i) {
    const QString problem = checkValues(normalized[i], nats[i]);
    if (!problem.isEmpty())
      return fail(error, QStringLiteral("prompt position %1: ").arg(i) + problem);
    points.append({i, texts[i], normalized[i], nats[i], entropyBucket(normalized[i]), false});
  }
  m_points = std::move(points);
  m_promptLength = static_cast<int>(texts.size());
  m_lastGenerated = -1;
  m_lastGeneratedText.clear();
  return true;
}

bool EntropySeries::appendGenerated(int position, const QString& text, double normalized,
                                    double nats, QString* error) {
  if (position < 1 || position <= m_lastGenerated || position < m_promptLength) {
    return fail(error, QStringLiteral("generated token at position %1 after position %2")
                           .arg(position)
                           .arg(m_lastGenerated));
  }
  const QString problem = checkValues(normalized, nats);
  if (!problem.isEmpty())
    return fail(error, QStringLiteral("generated position %1: ").arg(position) + problem);
  const int at = position - 1;
  EntropyPoint point{
      at, labelAt(at), normalized, nats, entropyBucket(normalized), at >= m_promptLength};
  while (!m_points.isEmpty() && m_points.last().position >= at) m_points.removeLast();
  m_points.append(point);
  m_lastGenerated = position;
  m_lastGeneratedText = text;
  return true;
}

QString EntropySeries::labelAt(int position) const {
  if (position == m_lastGenerated) return m_lastGeneratedText;
  for (const EntropyPoint& p : m_points) {
    if (p.position == position) return p.label;
  }
  return QString();
}

void EntropySeries::clear() {
  m_points.clear();
  m_promptLength = 0;
  m_lastGenerated = -1;
  m_lastGeneratedText.clear();
}

QVector<QPointF> EntropySeries::bucketPoints(int bucket) const {
  QVector<QPointF> out;
  for (const EntropyPoint& p : m_points) {
    if (p.bucket == bucket) out.append(QPointF(p.position, p.normalized));
  }
  return out;
}

QVector<QPointF> EntropySeries::linePoints(bool generated) const {
  QVector<QPointF> out;
  for (int i = 0; i < m_points.size(); ++i) {
    const EntropyPoint& p = m_points[i];
    // The generated line starts at the last prompt point so the two join.
    const bool joins =
        generated && i + 1 < m_points.size() && m_points[i + 1].generated && !p.generated;
    if (p.generated == generated || joins) out.append(QPointF(p.position, p.normalized));
  }
  return out;
}

}  // namespace attnscope::dashboard
