// The status-bar badge that shows the connection state: a coloured dot and
// "Connected · 127.0.0.1:50051" (or what went wrong); behind a target with
// several replicas, also one small dot per replica (hover: its address and
// state) and "2 of 3 replicas connected · ...".
#pragma once

#include <QMap>
#include <QStringList>
#include <QWidget>

#include "client/connection/connection.h"

class QHBoxLayout;
class QLabel;

namespace attnscope::dashboard {

class ConnectionIndicator : public QWidget {
  Q_OBJECT

 public:
  explicit ConnectionIndicator(QWidget* parent = nullptr);

  Connection::State state() const { return m_state; }
  // The text shown, e.g. "Connected · 127.0.0.1:50051".
  QString text() const;
  // The replicas shown (labels, in order) and one's last state (Disconnected
  // if unknown) and detail.
  QStringList replicas() const { return m_replicas; }
  Connection::State replicaState(const QString& replica) const;
  QString replicaDetail(const QString& replica) const;

 public Q_SLOTS:
  void setState(attnscope::dashboard::Connection::State state, const QString& detail);
  // One dot per replica when there are several; replicas no longer listed
  // are dropped.
  void setReplicas(const QStringList& replicas);
  void setReplicaState(const QString& replica, attnscope::dashboard::Connection::State state,
                       const QString& detail);

 private:
  struct ReplicaDot {
    QLabel* dot = nullptr;
    Connection::State state = Connection::State::Connecting;
    QString detail;
  };
  void paintDot(QLabel* dot, Connection::State state, int size);
  void updateToolTip();

  Connection::State m_state = Connection::State::Disconnected;
  QLabel* m_dot;
  QLabel* m_label;
  QString m_text;  // the label's whole text; it shows it elided
  QHBoxLayout* m_replicaDots;
  QStringList m_replicas;
  QMap<QString, ReplicaDot> m_replicaState;
};

}  // namespace attnscope::dashboard
