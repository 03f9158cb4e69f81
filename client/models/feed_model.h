// The live feed as a Qt table: FeedRows (the events -> rows logic) shown
// one row per request, newest first, with the columns and roles the feed
// panel, its filter and its delegates read.
#pragma once

#include <QAbstractTableModel>

#include "client/models/feed_rows.h"

namespace attnscope::dashboard {

class FeedModel : public QAbstractTableModel, private FeedRowsListener {
  Q_OBJECT

 public:
  enum Column {
    Time,
    Replica,
    Rpc,
    Model,
    Prompt,
    Tokens,
    Health,
    Sinks,
    MaxEntropy,
    Duration,
    ColumnCount
  };
  enum Role {
    HealthLevelRole = Qt::UserRole + 1,  // int(HealthLevel), Analyze rows that finished OK
    RowStateRole,                        // int(FeedRow::State)
    RequestIdRole,                       // quint64
    PromptPreviewRole,                   // QString, unabridged preview
    ModelRole,                           // QString
    ReplicaRole,                         // QString
    SortRole,                            // a number or string to sort by
  };
  Q_ENUM(Column)

  static constexpr int kMaxTokensPerRow = FeedRows::kMaxTokensPerRow;
  static constexpr int kMaxDetailedRows = FeedRows::kMaxDetailedRows;

  explicit FeedModel(QObject* parent = nullptr);

  // FeedRows::apply, the table following.
  bool apply(const attnscope::v1::FeedEvent& event, QString* error = nullptr) {
    return apply(QString(), event, error);
  }
  bool apply(const QString& replica, const attnscope::v1::FeedEvent& event,
             QString* error = nullptr) {
    return m_rows.apply(replica, event, error);
  }
  void beginSession(const QString& replica = QString()) { m_rows.beginSession(replica); }
  void setMaxRows(int maxRows) { m_rows.setMaxRows(maxRows); }
  int maxRows() const { return m_rows.maxRows(); }
  quint64 dashboardRequests() const { return m_rows.dashboardRequests(); }
  quint64 droppedEvents() const { return m_rows.droppedEvents(); }
  QStringList replicaNames() const { return m_rows.replicaNames(); }
  QStringList modelNames() const { return m_rows.modelNames(); }
  // nullptr when row is out of range.
  const FeedRow* rowAt(int row) const { return m_rows.rowAt(row); }
  const FeedRows& rows() const { return m_rows; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 Q_SIGNALS:
  void modelSeen(const QString& model);
  void droppedEventsChanged(quint64 dropped);
  // A request of the feed ended (row: its index in this model).
  void requestFinished(int row);

 private:
  // FeedRowsListener: the item model's notifications and the signals.
  void aboutToRemoveRows(int first, int last) override;
  void rowsRemoved() override;
  void aboutToInsertFirstRow() override;
  void firstRowInserted() override;
  void rowChanged(int row) override;
  void newModel(const QString& model) override { Q_EMIT modelSeen(model); }
  void droppedChanged(quint64 dropped) override { Q_EMIT droppedEventsChanged(dropped); }
  void requestEnded(int row) override { Q_EMIT requestFinished(row); }

  QVariant displayData(const FeedRow& row, int column) const;
  QVariant sortData(const FeedRow& row, int column) const;
  QVariant backgroundData(const FeedRow& row, int column) const;
  QVariant toolTipData(const FeedRow& row) const;

  FeedRows m_rows{this};
};

}  // namespace attnscope::dashboard
