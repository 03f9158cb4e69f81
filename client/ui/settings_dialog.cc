#include "client/ui/settings_dialog.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QToolButton>
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
      m_caFile(new QLineEdit(this)),
      m_certFile(new QLineEdit(this)),
      m_keyFile(new QLineEdit(this)),
      m_tokenFile(new QLineEdit(this)),
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
  m_caFile->setObjectName(QStringLiteral("tlsCaFileEdit"));
  m_caFile->setPlaceholderText(tr("empty: plaintext"));
  m_certFile->setObjectName(QStringLiteral("tlsCertFileEdit"));
  m_certFile->setPlaceholderText(tr("only for servers that require one"));
  m_keyFile->setObjectName(QStringLiteral("tlsKeyFileEdit"));
  m_tokenFile->setObjectName(QStringLiteral("tokenFileEdit"));
  m_tokenFile->setPlaceholderText(tr("empty: $ATTNSCOPE_TOKEN if set"));
  form->addRow(tr("TLS &CA file (PEM)"), fileRow(m_caFile, tr("CA certificate")));
  form->addRow(tr("Client certificate"), fileRow(m_certFile, tr("Client certificate")));
  form->addRow(tr("Client key"), fileRow(m_keyFile, tr("Client key")));
  form->addRow(tr("&Token file"), fileRow(m_tokenFile, tr("Bearer token file")));
  form->addRow(tr("Feed &rows kept"), m_rows);
  form->addRow(m_hint);
  form->addRow(m_buttons);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_server, &QLineEdit::textChanged, this, &SettingsDialog::validate);
  for (QLineEdit* edit : {m_caFile, m_certFile, m_keyFile, m_tokenFile}) {
    connect(edit, &QLineEdit::textChanged, this, &SettingsDialog::validate);
  }
  validate();
}

QWidget* SettingsDialog::fileRow(QLineEdit* edit, const QString& title) {
  auto* row = new QWidget(this);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QToolButton(row);
  browse->setText(QStringLiteral("…"));
  layout->addWidget(edit);
  layout->addWidget(browse);
  connect(browse, &QToolButton::clicked, this, [this, edit, title] {
    const QString path = QFileDialog::getOpenFileName(this, title, edit->text());
    if (!path.isEmpty()) edit->setText(path);
  });
  return row;
}

void SettingsDialog::setSecurity(const ConnectionSecurity& security) {
  m_caFile->setText(security.caFile);
  m_certFile->setText(security.certFile);
  m_keyFile->setText(security.keyFile);
  m_tokenFile->setText(security.tokenFile);
}

ConnectionSecurity SettingsDialog::security() const {
  ConnectionSecurity security;
  security.caFile = m_caFile->text().trimmed();
  security.certFile = m_certFile->text().trimmed();
  security.keyFile = m_keyFile->text().trimmed();
  security.tokenFile = m_tokenFile->text().trimmed();
  return security;
}

QString SettingsDialog::securityProblem() const {
  const ConnectionSecurity s = security();
  if (s.certFile.isEmpty() != s.keyFile.isEmpty()) {
    return tr("Give both the client certificate and its key, or neither");
  }
  for (const QString& path : {s.caFile, s.certFile, s.keyFile, s.tokenFile}) {
    if (!path.isEmpty() && !QFileInfo(path).isReadable()) {
      return tr("Cannot read %1").arg(path);
    }
  }
  return QString();
}

void SettingsDialog::setServerAddress(const QString& address) { m_server->setText(address); }
QString SettingsDialog::serverAddress() const { return m_server->text().trimmed(); }
void SettingsDialog::setMaxFeedRows(int rows) { m_rows->setValue(rows); }
int SettingsDialog::maxFeedRows() const { return m_rows->value(); }

bool SettingsDialog::isValidAddress(const QString& address) { return checkTarget(address).isEmpty(); }

void SettingsDialog::validate() {
  const QString target = checkTarget(m_server->text());
  const QString problem = target.isEmpty() ? securityProblem() : QString();
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(target.isEmpty() && problem.isEmpty());
  m_hint->setText(!target.isEmpty() ? target + tr("; e.g. 127.0.0.1:50051 or "
                                                  "ipv4:10.0.0.1:50051,10.0.0.2:50051")
                                    : problem);
}

}  // namespace attnscope::dashboard
