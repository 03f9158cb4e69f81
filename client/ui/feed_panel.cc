#include "client/ui/feed_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QTableView>
#include <QVBoxLayout>

namespace attnscope::dashboard {
namespace {

// Model names as long as real ones ("Qwen2.5-0.5B-Instruct" and more) are
// elided past this many characters, in the column and in the filter combo.
constexpr int kMaxModelChars = 18;

}  // namespace

FeedPanel::FeedPanel(FeedModel* feed, QWidget* parent)
    : QWidget(parent),
      m_feed(feed),
      m_proxy(new FeedFilterProxy(this)),
      m_models(new QComboBox(this)),
      m_replicas(new QComboBox(this)),
      m_filter(new QLineEdit(this)),
      m_table(new QTableView(this)),
      m_count(new QLabel(this)),
      m_follow(new QCheckBox(tr("Follow &latest"), this)) {
  setObjectName(QStringLiteral("feedPanel"));
  m_models->setObjectName(QStringLiteral("modelFilterCombo"));
  m_replicas->setObjectName(QStringLiteral("replicaFilterCombo"));
  m_replicas->addItem(tr("All replicas"), QString());
  m_replicas->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_replicas->setVisible(false);
  m_filter->setObjectName(QStringLiteral("feedFilterEdit"));
  m_table->setObjectName(QStringLiteral("feedTable"));
  m_follow->setObjectName(QStringLiteral("followLatestCheck"));
  m_follow->setToolTip(tr("Show each request as it finishes"));
  m_models->addItem(tr("All models"), QString());
  m_models->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_models->setMinimumContentsLength(kMaxModelChars / 2);
  m_filter->setPlaceholderText(tr("Filter prompts (Ctrl+L)"));
  m_filter->setClearButtonEnabled(true);
  m_proxy->setSourceModel(feed);
  setUpTable();
  auto* filters = new QHBoxLayout;
  filters->addWidget(m_models);
  filters->addWidget(m_replicas);
  filters->addWidget(m_filter, 1);
  filters->addWidget(m_count);
  filters->addWidget(m_follow);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(filters);
  layout->addWidget(m_table, 1);
  connect(m_filter, &QLineEdit::textChanged, m_proxy, &FeedFilterProxy::setTextFilter);
  connect(m_models, &QComboBox::currentIndexChanged, this,
          [this] { m_proxy->setModelFilter(m_models->currentData().toString()); });
  connect(m_replicas, &QComboBox::currentIndexChanged, this,
          [this] { m_proxy->setReplicaFilter(m_replicas->currentData().toString()); });
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &FeedPanel::onCurrentChanged);
  connect(m_proxy, &QAbstractItemModel::rowsInserted, this, &FeedPanel::updateCount);
  connect(m_proxy, &QAbstractItemModel::rowsInserted, this, &FeedPanel::fitModelColumn);
  connect(m_proxy, &QAbstractItemModel::modelReset, this, &FeedPanel::fitModelColumn);
  connect(m_proxy, &QAbstractItemModel::rowsRemoved, this, &FeedPanel::updateCount);
  connect(m_proxy, &QAbstractItemModel::modelReset, this, &FeedPanel::updateCount);
  connect(m_proxy, &QAbstractItemModel::layoutChanged, this, &FeedPanel::updateCount);
  updateCount();
}

void FeedPanel::setUpTable() {
  m_table->setModel(m_proxy);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setAlternatingRowColors(true);
  m_table->setWordWrap(false);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
  QHeaderView* header = m_table->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::ResizeToContents);
  header->setSectionResizeMode(FeedModel::Prompt, QHeaderView::Stretch);
  header->setSectionResizeMode(FeedModel::Model, QHeaderView::Interactive);
  m_table->setColumnHidden(FeedModel::Replica, true);
  fitModelColumn();
}

void FeedPanel::fitModelColumn() {
  QHeaderView* header = m_table->horizontalHeader();
  const int widest = m_table->fontMetrics().averageCharWidth() * kMaxModelChars;
  const QFontMetrics metrics = m_table->fontMetrics();
  int wanted = header->sectionSizeHint(FeedModel::Model);
  for (int row = 0; row < m_proxy->rowCount() && wanted < widest; ++row) {
    const QString name = m_proxy->index(row, FeedModel::Model).data().toString();
    wanted = qMax(wanted, metrics.horizontalAdvance(name) + 2 * metrics.averageCharWidth());
  }
  header->resizeSection(FeedModel::Model, qMin(wanted, widest));
}

void FeedPanel::addModelName(const QString& model) {
  if (model.isEmpty() || m_models->findData(model) >= 0) return;
  m_models->addItem(model, model);
  m_models->setItemData(m_models->count() - 1, model, Qt::ToolTipRole);
}

void FeedPanel::setDropped(quint64 dropped) {
  m_count->setProperty("dropped", dropped);
  updateCount();
}

void FeedPanel::updateCount() {
  const quint64 dropped = m_count->property("dropped").toULongLong();
  QString text = tr("%1 of %2").arg(m_proxy->rowCount()).arg(m_feed->rowCount());
  if (dropped > 0) text += tr(" · %1 dropped").arg(dropped);
  m_count->setText(text);
}

void FeedPanel::selectRow(int proxyRow) {
  m_table->selectRow(proxyRow);
  m_table->setCurrentIndex(m_proxy->index(proxyRow, FeedModel::Prompt));
}

void FeedPanel::setFollowing(bool follow) { m_follow->setChecked(follow); }

void FeedPanel::setReplicas(const QStringList& replicas) {
  const bool several = replicas.size() > 1;
  m_table->setColumnHidden(FeedModel::Replica, !several);
  const QString current = m_replicas->currentData().toString();
  while (m_replicas->count() > 1) m_replicas->removeItem(1);
  for (const QString& replica : replicas) m_replicas->addItem(replica, replica);
  const int index = m_replicas->findData(current);
  m_replicas->setCurrentIndex(index >= 0 ? index : 0);
  m_replicas->setVisible(several);
}

bool FeedPanel::isFollowing() const { return m_follow->isChecked(); }

void FeedPanel::onRequestFinished(int sourceRow) {
  if (!m_follow->isChecked()) return;
  const QModelIndex shown = m_proxy->mapFromSource(m_feed->index(sourceRow, FeedModel::Prompt));
  if (!shown.isValid()) return;  // filtered out
  if (m_table->currentIndex().row() == shown.row()) {
    onCurrentChanged(shown);  // the row was selected while it ran: show it now
    return;
  }
  selectRow(shown.row());
}

void FeedPanel::onCurrentChanged(const QModelIndex& current) {
  if (!current.isValid()) return;
  const FeedRow* row = m_feed->rowAt(m_proxy->mapToSource(current).row());
  if (row != nullptr) Q_EMIT requestSelected(*row);
}

}  // namespace attnscope::dashboard
