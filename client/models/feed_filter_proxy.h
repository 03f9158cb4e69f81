// Filters the live feed by model (exact name), replica and prompt text.
#pragma once

#include <QSortFilterProxyModel>
#include <QString>

namespace attnscope::dashboard {

// A proxy over a FeedModel (reads its ModelRole, ReplicaRole and
// PromptPreviewRole). A row passes when its model equals modelFilter()
// (empty: any model), its replica equals replicaFilter() (empty: any) and
// its prompt preview contains textFilter() (case-insensitive; empty: any).
class FeedFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit FeedFilterProxy(QObject* parent = nullptr);

  QString modelFilter() const { return m_model; }
  QString textFilter() const { return m_text; }
  QString replicaFilter() const { return m_replica; }

 public Q_SLOTS:
  void setModelFilter(const QString& model);
  void setTextFilter(const QString& text);
  void setReplicaFilter(const QString& replica);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  QString m_model;
  QString m_text;
  QString m_replica;
};

}  // namespace attnscope::dashboard
