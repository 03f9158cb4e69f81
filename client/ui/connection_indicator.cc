#include "client/ui/connection_indicator.h"

#include <QHBoxLayout>
#include <QLabel>

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

constexpr int kMaxLabelWidth = 420;  // px

constexpr int kDotSize = 12;
constexpr int kReplicaDotSize = 8;

QColor stateColor(Connection::State state) {
  switch (state) {
    case Connection::State::Connected:
      return healthColor(HealthLevel::Green);
    case Connection::State::Connecting:
    case Connection::State::Reconnecting:
      return healthColor(HealthLevel::Amber);
    case Connection::State::Disconnected:
      break;
  }
  return healthColor(HealthLevel::Red);
}

}  // namespace

ConnectionIndicator::ConnectionIndicator(QWidget* parent)
    : QWidget(parent),
      m_dot(new QLabel(this)),
      m_label(new QLabel(this)),
      m_replicaDots(new QHBoxLayout) {
  setObjectName(QStringLiteral("connectionIndicator"));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 0, 4, 0);
  layout->setSpacing(6);
  m_dot->setFixedSize(kDotSize, kDotSize);
  m_replicaDots->setSpacing(3);
  layout->addWidget(m_dot);
  layout->addLayout(m_replicaDots);
  layout->addWidget(m_label);
  setState(Connection::State::Disconnected, QString());
}

QString ConnectionIndicator::text() const { return m_text; }

Connection::State ConnectionIndicator::replicaState(const QString& replica) const {
  const auto it = m_replicaState.find(replica);
  return it == m_replicaState.end() ? Connection::State::Disconnected : it->state;
}

QString ConnectionIndicator::replicaDetail(const QString& replica) const {
  return m_replicaState.value(replica).detail;
}

void ConnectionIndicator::paintDot(QLabel* dot, Connection::State state, int size) {
  dot->setStyleSheet(QStringLiteral("background: %1; border-radius: %2px;")
                         .arg(stateColor(state).name())
                         .arg(size / 2));
}

void ConnectionIndicator::setState(Connection::State state, const QString& detail) {
  m_state = state;
  paintDot(m_dot, state, kDotSize);
  const QString name = Connection::stateName(state);
  m_text = detail.isEmpty() ? name : name + QStringLiteral(" · ") + detail;
  // A long error must not widen the status bar, and with it the window:
  // one line, elided; the tooltip has it all.
  m_label->setText(m_label->fontMetrics().elidedText(m_text, Qt::ElideRight, kMaxLabelWidth));
  updateToolTip();
}

void ConnectionIndicator::setReplicas(const QStringList& replicas) {
  for (auto it = m_replicaState.begin(); it != m_replicaState.end();) {
    if (replicas.contains(it.key())) {
      ++it;
      continue;
    }
    delete it->dot;
    it = m_replicaState.erase(it);
  }
  m_replicas = replicas;
  // A single server needs no second dot: the main one is its state.
  const bool several = replicas.size() > 1;
  for (int i = 0; i < replicas.size(); ++i) {
    ReplicaDot& entry = m_replicaState[replicas[i]];
    if (entry.dot == nullptr) {
      entry.dot = new QLabel(this);
      entry.dot->setFixedSize(kReplicaDotSize, kReplicaDotSize);
      entry.dot->setObjectName(QStringLiteral("replicaDot"));
      paintDot(entry.dot, entry.state, kReplicaDotSize);
    }
    m_replicaDots->removeWidget(entry.dot);
    m_replicaDots->insertWidget(i, entry.dot);
    entry.dot->setVisible(several);
    entry.dot->setToolTip(QStringLiteral("%1 · %2").arg(replicas[i], Connection::stateName(entry.state)));
  }
  updateToolTip();
}

void ConnectionIndicator::setReplicaState(const QString& replica, Connection::State state,
                                          const QString& detail) {
  auto it = m_replicaState.find(replica);
  if (it == m_replicaState.end()) return;  // not (or no longer) a replica of the target
  it->state = state;
  it->detail = detail;
  paintDot(it->dot, state, kReplicaDotSize);
  it->dot->setToolTip(detail == replica ? QStringLiteral("%1 · %2").arg(replica, Connection::stateName(state))
                                        : QStringLiteral("%1 · %2 · %3")
                                              .arg(replica, Connection::stateName(state), detail));
  updateToolTip();
}

void ConnectionIndicator::updateToolTip() {
  QStringList lines{m_text};
  if (m_replicas.size() > 1) {
    for (const QString& replica : m_replicas) lines << m_replicaState.value(replica).dot->toolTip();
  }
  m_label->setToolTip(lines.join(QLatin1Char('\n')));
}

}  // namespace attnscope::dashboard
