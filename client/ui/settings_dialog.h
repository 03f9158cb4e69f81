// Settings: the server to connect to, its TLS and token files, and how many
// feed rows to keep. Only file paths are taken (and persisted by the main
// window): the token stays in its file, never in the settings.
#pragma once

#include <QDialog>

#include "client/connection/connection.h"

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
  void setSecurity(const ConnectionSecurity& security);
  ConnectionSecurity security() const;

  // True for "host:port" with a port in 1..65535 (host a name, IPv4, or
  // [IPv6]) and for the gRPC targets of connection/target.h (checkTarget).
  static bool isValidAddress(const QString& address);

 private:
  void validate();
  // A path field with a "..." button that opens a file chooser.
  QWidget* fileRow(QLineEdit* edit, const QString& title);
  // "" when the file fields are consistent, else what to fix.
  QString securityProblem() const;

  QLineEdit* m_server;
  QLineEdit* m_caFile;
  QLineEdit* m_certFile;
  QLineEdit* m_keyFile;
  QLineEdit* m_tokenFile;
  QSpinBox* m_rows;
  QLabel* m_hint;
  QDialogButtonBox* m_buttons;
};

}  // namespace attnscope::dashboard
