#include "client/ui/connection_indicator.h"

#include <QHBoxLayout>
#include <QLabel>

#include "client/models/colors.h"

namespace attnscope::dashboard {
namespace {

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
    : QWidget(parent), m_dot(new QLabel(this)), m_label(new QLabel(this)) {
  setObjectName(QStringLiteral("connectionIndicator"));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 0, 4, 0);
  layout->setSpacing(6);
  m_dot->setFixedSize(12, 12);
  layout->addWidget(m_dot);
  layout->addWidget(m_label);
  setState(Connection::State::Disconnected, QString());
}

QString ConnectionIndicator::text() const { return m_label->text(); }

void ConnectionIndicator::setState(Connection::State state, const QString& detail) {
  m_state = state;
  m_dot->setStyleSheet(
      QStringLiteral("background: %1; border-radius: 6px;").arg(stateColor(state).name()));
  const QString name = Connection::stateName(state);
  m_label->setText(detail.isEmpty() ? name : name + QStringLiteral(" · ") + detail);
  m_label->setToolTip(m_label->text());
}

}  // namespace attnscope::dashboard
