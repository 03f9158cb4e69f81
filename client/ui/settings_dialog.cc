#include "client/ui/settings_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>

namespace attnscope::dashboard {

SettingsDialog::SettingsDialog(QWidget* parent)
    : QDialog(parent),
      m_server(new QLineEdit(this)),
      m_rows(new QSpinBox(this)),
      m_hint(new QLabel(this)),
      m_buttons(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this)) {
  setObjectName(QStringLiteral("settingsDialog"));
  setWindowTitle(tr("attnscope dashboard settings"));
  m_server->setObjectName(QStringLiteral("serverAddressEdit"));
  m_server->setPlaceholderText(QStringLiteral("127.0.0.1:50051"));
  m_rows->setRange(10, 100000);
  m_rows->setSingleStep(100);
  m_hint->setStyleSheet(QStringLiteral("color: #c62828;"));
  auto* form = new QFormLayout(this);
  form->addRow(tr("&Server (host:port)"), m_server);
  form->addRow(tr("Feed &rows kept"), m_rows);
  form->addRow(m_hint);
  form->addRow(m_buttons);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_server, &QLineEdit::textChanged, this, &SettingsDialog::validate);
  validate();
}

void SettingsDialog::setServerAddress(const QString& address) { m_server->setText(address); }
QString SettingsDialog::serverAddress() const { return m_server->text().trimmed(); }
void SettingsDialog::setMaxFeedRows(int rows) { m_rows->setValue(rows); }
int SettingsDialog::maxFeedRows() const { return m_rows->value(); }

bool SettingsDialog::isValidAddress(const QString& address) {
  static const QRegularExpression kPattern(
      QStringLiteral(R"(^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$)"));
  const QRegularExpressionMatch match = kPattern.match(address.trimmed());
  if (!match.hasMatch()) return false;
  const int port = match.captured(2).toInt();
  return port >= 1 && port <= 65535;
}

void SettingsDialog::validate() {
  const bool ok = isValidAddress(m_server->text());
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(ok);
  m_hint->setText(ok ? QString() : tr("Enter host:port, e.g. 127.0.0.1:50051"));
}

}  // namespace attnscope::dashboard
