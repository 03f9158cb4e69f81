// The live feed: a model filter, a text filter and the table of requests.
#pragma once

#include <QWidget>

#include "client/models/feed_filter_proxy.h"
#include "client/models/feed_model.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;

namespace attnscope::dashboard {

class FeedPanel : public QWidget {
  Q_OBJECT

 public:
  // Shows `feed` (not owned) through its own FeedFilterProxy.
  explicit FeedPanel(FeedModel* feed, QWidget* parent = nullptr);

  FeedFilterProxy* proxy() const { return m_proxy; }
  QTableView* table() const { return m_table; }
  QLineEdit* filterEdit() const { return m_filter; }
  QComboBox* modelCombo() const { return m_models; }
  QComboBox* replicaCombo() const { return m_replicas; }
  QCheckBox* followCheck() const { return m_follow; }

  // Selects the row at `proxyRow` of the filtered table.
  void selectRow(int proxyRow);
  // Follow latest: each request that finishes (and passes the filters) is
  // selected and shown as it ends.
  void setFollowing(bool follow);
  bool isFollowing() const;
  // The replicas behind the target: with several, the Replica column and a
  // replica filter are shown (a filter on a replica no longer listed is
  // dropped).
  void setReplicas(const QStringList& replicas);

 public Q_SLOTS:
  // FeedModel::requestFinished: selects that row when following.
  void onRequestFinished(int sourceRow);
  void addModelName(const QString& model);
  void setDropped(quint64 dropped);

 Q_SIGNALS:
  // The user selected a request (the row of the FeedModel).
  void requestSelected(const attnscope::dashboard::FeedRow& row);

 private:
  void setUpTable();
  // The Model column as wide as its names up to kMaxModelChars characters;
  // longer names are elided (the row's tooltip has them whole).
  void fitModelColumn();
  void onCurrentChanged(const QModelIndex& current);
  void updateCount();

  FeedModel* m_feed;
  FeedFilterProxy* m_proxy;
  QComboBox* m_models;
  QComboBox* m_replicas;
  QLineEdit* m_filter;
  QTableView* m_table;
  QLabel* m_count;
  QCheckBox* m_follow;
};

}  // namespace attnscope::dashboard
