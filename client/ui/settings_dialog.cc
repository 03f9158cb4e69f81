#include "client/ui/settings_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include "client/connection/target.h"

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
  form->addRow(tr("&Server (host:port or target)"), m_server);
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

bool SettingsDialog::isValidAddress(const QString& address) { return checkTarget(address).isEmpty(); }

void SettingsDialog::validate() {
  const QString problem = checkTarget(m_server->text());
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(problem.isEmpty());
  m_hint->setText(problem.isEmpty() ? QString()
                                    : problem + tr("; e.g. 127.0.0.1:50051 or "
                                                   "ipv4:10.0.0.1:50051,10.0.0.2:50051"));
}

}  // namespace attnscope::dashboard
