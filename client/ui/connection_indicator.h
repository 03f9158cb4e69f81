// The status-bar badge that shows the connection state: a coloured dot and
// "Connected to 127.0.0.1:50051" (or what went wrong).
#pragma once

#include <QWidget>

#include "client/connection/connection.h"

class QLabel;

namespace attnscope::dashboard {

class ConnectionIndicator : public QWidget {
  Q_OBJECT

 public:
  explicit ConnectionIndicator(QWidget* parent = nullptr);

  Connection::State state() const { return m_state; }
  // The text shown, e.g. "Connected · 127.0.0.1:50051".
  QString text() const;

 public Q_SLOTS:
  void setState(attnscope::dashboard::Connection::State state, const QString& detail);

 private:
  Connection::State m_state = Connection::State::Disconnected;
  QLabel* m_dot;
  QLabel* m_label;
};

}  // namespace attnscope::dashboard
