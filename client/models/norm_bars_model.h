// The massive-activation view: each token's max hidden-state norm and its
// ratio to the median over the other tokens.
#pragma once

#include <QAbstractTableModel>
#include <QPointer>
#include <QVector>

#include "client/models/prompt_analysis.h"

namespace attnscope::dashboard {

// One row per token; columns Token, MaxNorm, Ratio. The max norm is the
// summary's max_norm once it has arrived; before that, the max over the
// hidden-state norms of the layers received so far (so bars grow live).
// The median is the lower median of max_norm[1:] (of max_norm[0] alone when
// T = 1), as in definitions.md; Ratio = max norm / median (NaN when the
// median is not positive).
class NormBarsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Token, MaxNorm, Ratio, ColumnCount };
  enum Role { ValueRole = Qt::UserRole + 1 };

  explicit NormBarsModel(QObject* parent = nullptr);

  // The analysis to show (not owned; may be nullptr).
  void setAnalysis(PromptAnalysis* analysis);

  // NaN until there are norms.
  double median() const { return m_median; }
  // The token with the largest norm, -1 when there are none.
  int argmax() const { return m_argmax; }
  double maxNorm(int token) const { return m_norms.value(token, qQNaN()); }
  double ratio(int token) const;

  // Lower median of `values` (element (n-1)/2 after sorting); NaN when empty.
  static double lowerMedian(QVector<double> values);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 Q_SIGNALS:
  void normsChanged();

 private:
  void recompute();
  QVector<double> normsFromLayers() const;

  QPointer<PromptAnalysis> m_analysis;
  QVector<double> m_norms;
  double m_median = qQNaN();
  int m_argmax = -1;
};

}  // namespace attnscope::dashboard
