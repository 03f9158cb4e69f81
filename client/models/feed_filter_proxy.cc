#include "client/models/feed_filter_proxy.h"

#include "client/models/feed_model.h"

namespace attnscope::dashboard {

FeedFilterProxy::FeedFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(FeedModel::SortRole);
}

void FeedFilterProxy::setModelFilter(const QString& model) {
  if (model == m_model) return;
  m_model = model;
  invalidateFilter();
}

void FeedFilterProxy::setTextFilter(const QString& text) {
  if (text == m_text) return;
  m_text = text;
  invalidateFilter();
}

void FeedFilterProxy::setReplicaFilter(const QString& replica) {
  if (replica == m_replica) return;
  m_replica = replica;
  invalidateFilter();
}

bool FeedFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const QModelIndex index = sourceModel()->index(sourceRow, 0, sourceParent);
  if (!m_model.isEmpty() && index.data(FeedModel::ModelRole).toString() != m_model) return false;
  if (!m_replica.isEmpty() && index.data(FeedModel::ReplicaRole).toString() != m_replica) {
    return false;
  }
  if (m_text.isEmpty()) return true;
  return index.data(FeedModel::PromptPreviewRole).toString().contains(m_text, Qt::CaseInsensitive);
}

}  // namespace attnscope::dashboard
