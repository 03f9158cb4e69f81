// Next-token entropy along a sequence: the prompt (from Analyze's summary)
// and the tokens generated after it (from Generate or the feed).
#pragma once

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>

namespace attnscope::dashboard {

// The entropy of the distribution over the token after `position`, i.e.
// computed from the logits at `position` (definitions.md: H_i from Z[i]).
struct EntropyPoint {
  int position = 0;
  QString label;          // the text of the token at `position`
  double normalized = 0;  // H / log V, in [0, 1]
  double nats = 0;
  int bucket = 0;          // entropyBucket(normalized): 0 < 0.3, 1 < 0.6, 2 otherwise
  bool generated = false;  // `position` holds a generated token
};

// Points ordered by position. A generated token at position p was drawn from
// the distribution at p - 1, so its entropy becomes the point at p - 1 (which
// for the first generated token replaces the prompt's last point: the same
// distribution) and its text the label of the point at p, once the next token
// arrives. Every method that can fail leaves the series unchanged.
class EntropySeries {
 public:
  // Replaces everything with the prompt's T points. Fails when the three
  // lists differ in length, a value is not finite, or a normalized entropy is
  // outside [0, 1] (with 1e-6 of slack) or nats < 0.
  bool setPrompt(const QStringList& texts, const QVector<double>& normalized,
                 const QVector<double>& nats, QString* error = nullptr);

  // Appends the generated token at `position` with the entropy of the
  // distribution it was drawn from. Fails when position <= the last position
  // appended, position < max(1, T), or the values are invalid as above.
  bool appendGenerated(int position, const QString& text, double normalized, double nats,
                       QString* error = nullptr);

  void clear();
  bool isEmpty() const { return m_points.isEmpty(); }
  const QVector<EntropyPoint>& points() const { return m_points; }
  int promptLength() const { return m_promptLength; }

  // (position, normalized) of the points in one bucket, for a scatter series.
  QVector<QPointF> bucketPoints(int bucket) const;
  // (position, normalized) of every point, prompt or generated part.
  QVector<QPointF> linePoints(bool generated) const;

 private:
  QString labelAt(int position) const;

  QVector<EntropyPoint> m_points;
  int m_promptLength = 0;
  int m_lastGenerated = -1;
  QString m_lastGeneratedText;
};

}  // namespace attnscope::dashboard
