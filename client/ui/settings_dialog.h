// Settings: the server to connect to and how many feed rows to keep.
#pragma once

#include <QDialog>

class QLineEdit;
class QSpinBox;
class QLabel;
class QDialogButtonBox;

namespace attnscope::dashboard {

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SettingsDialog(QWidget* parent = nullptr);

  void setServerAddress(const QString& address);
  QString serverAddress() const;
  void setMaxFeedRows(int rows);
  int maxFeedRows() const;

  // True for "host:port" with a port in 1..65535 (host a name, IPv4, or
  // [IPv6]) and for the gRPC targets of connection/target.h (checkTarget).
  static bool isValidAddress(const QString& address);

 private:
  void validate();

  QLineEdit* m_server;
  QSpinBox* m_rows;
  QLabel* m_hint;
  QDialogButtonBox* m_buttons;
};

}  // namespace attnscope::dashboard
